"""The markdown summary (``--bench-md``, and the CI job summary in ``$GITHUB_STEP_SUMMARY``).

Read top down in a pull request: the verdict counts first, what the run says about itself (a
shared CPU, the command that settles INCONCLUSIVE verdicts, the suite-wide shift), then every
regression with its change, interval and reasons, then a compact table of every result (folded
away in a ``<details>`` block, one table per group, the same columns as the terminal).
"""

from __future__ import annotations

from collections.abc import Sequence

from pytest_tesserabench.record.results import FAILING_STATUSES
from pytest_tesserabench.record.units import format_ms
from pytest_tesserabench.report import rows as R
from pytest_tesserabench.report.comparison_table import counts_text
from pytest_tesserabench.report.data import ReportData
from pytest_tesserabench.report.safe_text import markdown_cell, printable

# GitHub shows at most 1 MiB of a step's summary; past this, rows of the results are left out.
MAX_BYTES = 900 * 1024


def code(text: str) -> str:
    """Inline code in a table cell: ids keep their brackets and underscores as they are."""
    return "`" + printable(text).replace("`", "'").replace("|", "\\|") + "`"


def _table(header: Sequence[str], align: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("--:" if a == "right" else ":--" for a in align) + "|"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return lines


def _headline(data: ReportData) -> list[str]:
    records = data.records
    machine, commit = data.run.machine, data.run.commit
    where = []
    if machine.get("device"):
        where.append(f"on {machine['device']}" + (f" ({machine['arch']})" if machine.get("arch") else ""))
    if commit.get("sha"):
        where.append(f"at commit `{str(commit['sha'])[:10]}`" + (" (dirty)" if commit.get("dirty") else ""))
    lines = ["## TesseraBench", ""]
    if data.compared:
        failed = sum(1 for v in data.verdicts.values() if v.status in FAILING_STATUSES)
        counts = counts_text(data.verdicts)
        lines += [f"**{counts}**" if failed else counts, ""]
        compared = f", compared with {data.baseline}" if data.baseline else ""
        unjudged = sum(1 for r in records if r.id not in data.verdicts)  # (a failed test, the interpreter)
        measured = f"{len(records)} benchmark(s) measured" + (f" ({unjudged} not judged)" if unjudged else "")
        lines.append(" ".join([measured, *where]) + compared + ".")
    else:
        noisy = sum(1 for r in records if r.stats.noisy)
        interpreted = sum(1 for r in records if r.timer == "interpreter")
        extra = [f"{noisy} noisy"] if noisy else []
        extra += [f"{interpreted} in the Triton interpreter, not gated"] if interpreted else []
        lines += [f"{len(records)} benchmark(s) measured, none compared with a baseline"]
        lines[-1] += f" ({'; '.join(extra)})." if extra else "."
        lines += ["", " ".join(["Measured", *where]) + "." if where else ""]
    return lines


def _notes(data: ReportData) -> list[str]:
    """What the run says about itself (the CPU was shared, how to settle INCONCLUSIVE verdicts,
    the suite-wide shift): a failing one in bold."""
    if not data.notes:
        return []
    return [
        "",
        *(f"- **{markdown_cell(n)}**" if n.startswith("FAILED") else f"- {markdown_cell(n)}" for n in data.notes),
    ]


def _regressions(data: ReportData) -> list[str]:
    failing = sorted((v for v in data.verdicts.values() if v.failed), key=lambda v: v.id)
    if not failing:
        return []
    rows = []
    for verdict in failing:
        why = "; ".join([*verdict.reasons, *verdict.notes])
        p = "-" if verdict.p_value is None else f"{verdict.p_value:.2g}"
        rows.append(
            [
                code(verdict.id),
                verdict.head(),
                verdict.change_text(),
                format_ms(verdict.baseline_ms),
                format_ms(verdict.candidate_ms),
                p,
                markdown_cell(why) or "-",
            ]
        )
    header = ["benchmark", "verdict", "change [CI95]", "baseline", "now", "p", "why"]
    align = ["left", "left", "right", "right", "right", "right", "left"]
    return ["", "### Regressions", "", *_table(header, align, rows)]


def _results(
    data: ReportData, *, columns: Sequence[str] | None, sort: str, group_by: Sequence[str], budget: int
) -> list[str]:
    records = R.sort_records(data.records, sort)
    if not records:
        return []
    speeds = R.relative_speeds(R.sort_records(records))
    lines = ["", "<details><summary>All results</summary>", ""]
    used = 0
    left_out = 0
    for key, members in R.group_records(records, group_by).items():
        if used > budget:
            left_out += len(members)
            continue
        keys = tuple(columns) if columns else R.default_columns(members, verbose=False)
        fields = [R.FIELDS[k] for k in keys]
        shared, labels = R.row_labels(members)
        rows = []
        for record, label in zip(members, labels):
            row = [code(label), *(markdown_cell(f.cell(record, speeds)) for f in fields)]
            if data.compared:
                # the verdict's change is of the gate's centres (the lowest pass's median, this
                # run's shared shift removed), which can differ from the median of all rounds
                verdict = data.verdicts.get(record.id)
                row += [verdict.head(), verdict.change_text()] if verdict else ["-", "-"]
            notes = R.notes(record, timer_shown="timer" in keys)
            rows.append([*row, markdown_cell(", ".join(notes)) or ""])
        judged = ["verdict", "change [CI95]"] if data.compared else []
        header = ["benchmark", *(f.header for f in fields), *judged, "notes"]
        align = ["left", *("right" for _ in fields), *(["left", "right"] if data.compared else []), "left"]
        block = [f"**{markdown_cell(R.group_title(key, shared, []))}**", "", *_table(header, align, rows), ""]
        used += sum(len(line.encode()) + 1 for line in block)
        lines += block
    if left_out:
        lines.append(f"{left_out} more result(s) left out to stay within GitHub's summary size; see the CSV or JSON.")
        lines.append("")
    lines.append("</details>")
    return lines


def markdown_summary(
    data: ReportData,
    *,
    columns: Sequence[str] | None = None,
    sort: str = "id",
    group_by: Sequence[str] = ("group",),
    max_bytes: int = MAX_BYTES,
) -> str:
    head = _headline(data) + _notes(data) + _regressions(data)
    budget = max_bytes - sum(len(line.encode()) + 1 for line in head)
    lines = head + _results(data, columns=columns, sort=sort, group_by=group_by, budget=budget)
    return "\n".join(lines) + "\n"
