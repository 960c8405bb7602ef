"""The HTML report (``--bench-html``, ``tesserabench report``): one self-contained page.

Everything is inline: the style sheet and every plot (SVG drawn by report/plots.py), so the file
opens offline, from a CI artifact or an e-mail, with nothing fetched. The page has the run's
description and verdict counts, then one section per group (a test function by default) with its
plots and a table of its results.
"""

from __future__ import annotations

import html
from collections.abc import Sequence

from pytest_tesserabench.record.results import STATUSES
from pytest_tesserabench.report import rows as R
from pytest_tesserabench.report.comparison_table import counts_text
from pytest_tesserabench.report.data import ReportData
from pytest_tesserabench.report.plots import PlotError, group_plots

_ORDER = {status: i for i, status in enumerate(STATUSES)}
_CSS = """
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: #1d1d1f;
       margin: 0 auto; max-width: 1320px; padding: 0 24px 48px; }
h1 { font-size: 22px; margin: 24px 0 4px; }
h2 { font-size: 17px; margin: 36px 0 8px; padding-top: 12px; border-top: 1px solid #ddd;
     font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; word-break: break-all; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 8px 0 16px; }
dl.meta dt { color: #666; } dl.meta dd { margin: 0; }
.counts { font-weight: 600; font-size: 15px; margin: 8px 0; }
ul.notes { margin: 0 0 16px; padding-left: 20px; color: #8a5a00; }
nav ol { columns: 2; font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; }
nav a { color: #0b57d0; text-decoration: none; }
.plots { display: grid; grid-template-columns: repeat(auto-fill, minmax(560px, 1fr)); gap: 16px; }
figure { margin: 0; padding: 8px; border: 1px solid #e4e4e4; border-radius: 6px; background: #fff; }
figure h3 { font-size: 13px; margin: 0 0 4px; font-weight: 600; }
figure svg { width: 100%; height: auto; display: block; }
figcaption { font-size: 12px; color: #666; margin-top: 4px; }
table { border-collapse: collapse; margin-top: 12px; font-size: 12.5px; }
th, td { padding: 3px 10px; border-bottom: 1px solid #eee; text-align: right; white-space: nowrap; }
th { color: #555; font-weight: 600; border-bottom: 1px solid #ccc; }
td.name, th.name, td.notes { text-align: left; }
td.name { font-family: ui-monospace, Menlo, Consolas, monospace; }
td.notes { white-space: normal; color: #555; }
.REGRESSED, .IMPOSSIBLE { color: #c62828; font-weight: 600; }
.IMPROVED { color: #2e7d32; } .INCONCLUSIVE { color: #b36b00; }
"""


def _e(text: object) -> str:
    return html.escape(str(text))


def _meta(data: ReportData) -> list[str]:
    run = data.run
    machine, commit = run.machine, run.commit
    items = []
    device = machine.get("device")
    if device:
        items.append(("device", f"{device}" + (f" ({machine['arch']})" if machine.get("arch") else "")))
    software = ", ".join(f"{k} {machine[k]}" for k in ("torch", "triton", "python", "cuda") if machine.get(k))
    if software:
        items.append(("software", software))
    if commit.get("sha"):
        text = str(commit["sha"])[:12] + (" (dirty)" if commit.get("dirty") else "")
        items.append(("commit", text + (f" on {commit['branch']}" if commit.get("branch") else "")))
    if run.started:
        items.append(("started", run.started))
    timers = sorted({r.timer for r in data.records})
    items.append(("timers", ", ".join(timers)))
    if data.baseline:
        items.append(("compared with", data.baseline))
    return ['<dl class="meta">', *(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in items), "</dl>"]


def _table(records, data: ReportData, columns: Sequence[str] | None) -> list[str]:
    keys = tuple(columns) if columns else R.default_columns(records, verbose=True)
    speeds = R.relative_speeds(R.sort_records(records))
    _, labels = R.row_labels(records)
    head = ['<th class="name">benchmark</th>', *(f"<th>{_e(R.FIELDS[k].header)}</th>" for k in keys)]
    head += ["<th>verdict</th>", "<th>change [CI95]</th>"] if data.compared else []
    head.append('<th class="name">notes</th>')
    lines = ["<table>", f"<tr>{''.join(head)}</tr>"]
    for record, label in zip(records, labels):
        cells = [
            f'<td class="name">{_e(label)}</td>',
            *(f"<td>{_e(R.FIELDS[k].cell(record, speeds))}</td>" for k in keys),
        ]
        if data.compared:
            verdict = data.verdicts.get(record.id)
            status = verdict.status if verdict else ""
            cells.append(f'<td class="{status}">{_e(verdict.head()) if verdict else "-"}</td>')
            cells.append(f"<td>{_e(verdict.change_text()) if verdict else '-'}</td>")
        notes = R.notes(record, timer_shown="timer" in keys)
        if data.verdicts.get(record.id):
            verdict = data.verdicts[record.id]
            notes += [*verdict.reasons, *verdict.notes]
        cells.append(f'<td class="notes">{_e("; ".join(notes))}</td>')
        lines.append(f"<tr>{''.join(cells)}</tr>")
    lines.append("</table>")
    return lines


def html_report(
    data: ReportData,
    *,
    title: str = "TesseraBench report",
    columns: Sequence[str] | None = None,
    sort: str = "id",
    group_by: Sequence[str] = ("group",),
) -> str:
    """The page. PlotError when there is nothing to plot or matplotlib is missing."""
    records = R.sort_records(data.records, sort)
    if not records:
        raise PlotError("no measured benchmark to plot")
    groups = R.group_records(records, group_by)
    body = [f"<h1>{_e(title)}</h1>"]
    counts = counts_text(data.verdicts) if data.compared else f"{len(records)} benchmark(s) measured, none compared"
    failing = any(v.failed for v in data.verdicts.values())
    body.append(f'<p class="counts{" REGRESSED" if failing else ""}">{_e(counts)}</p>')
    body += _meta(data)
    if data.notes:  # what the run says about itself (the CPU was shared, the suite-wide shift, ...)
        body += ['<ul class="notes">', *(f"<li>{_e(note)}</li>" for note in data.notes), "</ul>"]
    nav = []
    sections = []
    for index, (key, members) in enumerate(groups.items(), 1):
        shared, _ = R.row_labels(members)
        heading = R.group_title(key, shared, [])
        statuses = [data.verdicts[m.id].status for m in members if m.id in data.verdicts]
        worst = min(statuses, key=lambda s: _ORDER.get(s, 99)) if statuses else ""
        badge = f' <span class="{worst}">{_e(worst.lower())}</span>' if worst else ""
        nav.append(f'<li><a href="#g{index}">{_e(heading)}</a>{badge}</li>')
        plots = group_plots(members, verdicts=data.verdicts, history=data.history, current=data.run)
        figures = [
            f'<figure class="plot {p.kind}"><h3>{_e(p.title)}</h3>{p.svg}'
            f"<figcaption>{_e(p.caption)}</figcaption></figure>"
            for p in plots
        ]
        sections += [
            f'<section class="group" id="g{index}">',
            f"<h2>{_e(heading)}</h2>",
            '<div class="plots">',
            *figures,
            "</div>",
            *_table(members, data, columns),
            "</section>",
        ]
    if len(groups) > 1:
        body += ["<nav><ol>", *nav, "</ol></nav>"]
    page = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{_e(title)}</title>",
        f"<style>{_CSS}</style>",
        "</head>",
        "<body>",
        *body,
        *sections,
        "</body>",
        "</html>",
    ]
    return "\n".join(page) + "\n"
