"""``tesserabench compare`` and ``tesserabench report``: reports built from saved files.

Both take runs as files (``--bench-json`` results, baseline files) or baseline NAMEs (the file
of that baseline for the machine the runs came from). Exit status as for every ``tesserabench``
command: 0 fine, 1 a benchmark regressed (``compare`` only), 2 usage or file error.
"""

from __future__ import annotations

import argparse
import csv
import io
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pytest_tesserabench.history.baseline import BaselineError, load_runs, machine_files
from pytest_tesserabench.options import is_name
from pytest_tesserabench.record import files
from pytest_tesserabench.record.results import BenchRecord, RunDocument
from pytest_tesserabench.record.units import format_started, parse_started
from pytest_tesserabench.report import rows as R
from pytest_tesserabench.report.layout import Column, Line, Row, as_text, hidden_note, render_table, shorten_middle
from pytest_tesserabench.report.safe_text import printable

# Every `tesserabench` command imports this module (--help: ~136 modules, ~100 ms). What one
# command alone uses loads where it runs: the gate (numpy, scipy: ~0.8 s), the machine's device
# (~50 modules, ~19 ms), the report modules of compare and report (~1-12 ms each).

EXIT_OK, EXIT_REGRESSED, EXIT_USAGE = 0, 1, 2


class CommandError(Exception):
    """A bad argument or file; the message names it and the fix (exit status 2)."""


@dataclass
class Source:
    """One argument: its runs (oldest first) and how to name it."""

    label: str
    runs: list[RunDocument]


def _machine_key(run: RunDocument) -> str | None:
    from pytest_tesserabench.machine import device as machine

    try:
        return machine.machine_key(run.machine)
    except ValueError:
        return None


def _names_a_file(text: str) -> bool:
    path = Path(text)
    return path.exists() or path.is_symlink() or path.suffix == ".json" or not is_name(text)


def load_source(text: str, bench_dir: Path, machine_key: str | None) -> Source:
    """A file, or the file of baseline NAME under ``bench_dir`` for ``machine_key`` (the only
    file of that baseline, when there is one)."""

    try:
        if _names_a_file(text):
            return Source(Path(text).name, load_runs(Path(text)))
        candidates = machine_files(bench_dir, text)
        if not candidates:
            raise CommandError(
                f"{text!r} is neither a file nor a baseline under {bench_dir} (give a --bench-json result, "
                f"a baseline file, or a NAME recorded with `pytest --bench-save=NAME`; --dir sets the baselines root)"
            )
        chosen = [p for p in candidates if p.stem == machine_key] or (candidates if len(candidates) == 1 else [])
        if not chosen:
            keys = ", ".join(p.stem for p in candidates)
            raise CommandError(
                f"baseline {text!r} has files for several machines ({keys}) and none for "
                f"{machine_key or 'the machine of a file given'}; give the file itself, e.g. {candidates[0]}"
            )
        return Source(f"baseline {text} ({chosen[0].stem})", load_runs(chosen[0]))
    except BaselineError as exc:
        raise CommandError(str(exc)) from None


def load_sources(texts: Sequence[str], bench_dir: Path) -> list[Source]:
    """Every argument, in order; a NAME takes the file for the machine of the first file given."""
    loaded: dict[int, Source] = {}
    key = None
    for index, text in enumerate(texts):
        if _names_a_file(text):
            loaded[index] = load_source(text, bench_dir, None)
            if loaded[index].runs:
                key = _machine_key(loaded[index].runs[-1])
                break
    sources = [loaded.get(i) or load_source(t, bench_dir, key) for i, t in enumerate(texts)]
    for source, text in zip(sources, texts):
        if not source.runs:
            raise CommandError(f"{text}: holds no run")
    return sources


def write_output(path: Path, content: str, flag: str) -> None:
    """Write a file the user asked for; a write that fails (a full disk, /dev/full, a folder
    removed meanwhile) is a CommandError naming the option, the path and the system's reason."""

    try:
        files.write_atomic(path, content)
    except OSError as exc:
        if isinstance(exc, files.FileProblem):  # its message names the path and the fix
            raise CommandError(f"{flag} {exc}") from None
        raise CommandError(f"{flag} {path}: cannot write it: {exc.strerror or exc}") from None


def _gate_config(args: argparse.Namespace):
    from pytest_tesserabench.gate import GateConfig

    return GateConfig(alpha=args.alpha, threshold=args.threshold, work_threshold=args.work_threshold)


def add_gate_arguments(parser: argparse.ArgumentParser, percent, alpha) -> None:
    parser.add_argument(
        "--threshold",
        type=percent,
        default=0.05,
        metavar="PCT",
        help="smallest slowdown worth failing for, in percent (default 5)",
    )
    parser.add_argument(
        "--alpha",
        type=alpha,
        default=0.01,
        help="suite-wide false-alarm rate, split over the benchmarks (default 0.01)",
    )
    parser.add_argument(
        "--work-threshold",
        type=percent,
        default=None,
        metavar="PCT",
        help="fail a kernel whose SASS instruction count grew by PCT or more, as --bench-work-threshold (default: off)",
    )
    parser.add_argument("--dir", type=Path, default=None, help=BASELINES_HELP)


BASELINES_HELP = "baselines root for NAMEs (default: baselines/ here or in the nearest folder above that has one)"


def find_baselines_dir(start: Path) -> Path:
    """The baselines root the plugin's default (<rootdir>/baselines) most likely is, from ``start``:
    its ``baselines`` folder, or the nearest one above; ``start/baselines`` where there is none
    (then its messages name that path)."""
    start = start.resolve()
    for folder in (start, *start.parents):
        if (folder / "baselines").is_dir():
            return folder / "baselines"
    return start / "baselines"


# -- compare ------------------------------------------------------------------------------------------
def across_runs_lines(runs: Sequence[RunDocument], labels: Sequence[str], width: int) -> list[Line]:
    """A table per benchmark: its median in each run (oldest first) and the change from the first
    run that measured it."""
    columns = [
        Column("started", "started", align="left", drop=2),
        Column("median", "median"),
        Column("ci", "CI95"),
        Column("change", "vs first"),
        Column("throughput", "throughput", drop=3),
        Column("bandwidth", "bandwidth", drop=3),
    ]
    out: list[Line] = []
    for reference in _measured(runs):
        measured: list[tuple[str, str, BenchRecord]] = []
        for index, (run, label) in enumerate(zip(runs, labels), 1):
            record = run.benchmarks.get(reference.id)
            if record is not None and record.stats is not None:
                sha = str(run.commit.get("sha") or "")[:7] or "-"
                measured.append((printable(f"{index} {sha} {label}"), run.started or "-", record))
        first = measured[0][2].median_ms
        rows = []
        for name, started, record in measured:
            cells = {
                "started": started,
                "median": R.FIELDS["median"].cell(record, {}),
                "ci": R.FIELDS["ci"].cell(record, {}),
                "change": f"{(record.median_ms / first - 1) * 100:+.1f}%",
            }
            if any(r.tflops for _, _, r in measured):
                cells["throughput"] = R.FIELDS["throughput"].cell(record, {})
            if any(r.gbps for _, _, r in measured):
                cells["bandwidth"] = R.FIELDS["bandwidth"].cell(record, {})
            rows.append(Row(name, cells))
        shown = [c for c in columns if any(c.key in row.cells for row in rows)]
        if out:
            out.append(Line(""))
        out.append(Line(shorten_middle(printable(reference.id), width), "bold"))
        table = render_table("run", shown, rows, width, details_header=None)
        out.extend(table.lines + hidden_note(table, width))
    return out


def _measured(runs: Sequence[RunDocument]) -> list[BenchRecord]:
    """One record per benchmark measured in any of the runs, in id order."""
    return R.sort_records({i: r for run in runs for i, r in run.benchmarks.items() if r.stats is not None}.values())


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else (ratio - 1.0) * 100.0


CSV_COLUMNS = (
    "id", "run", "source", "commit", "started", "median_ms", "ci95_low_ms", "ci95_high_ms", "tflop_per_s", "gb_per_s",
    "change_vs_first_pct", "verdict", "change_pct", "change_ci95_low_pct", "change_ci95_high_pct", "p_value",
)  # fmt: skip


def across_runs_csv(runs: Sequence[RunDocument], labels: Sequence[str], verdicts) -> str:
    """One row per benchmark and run; the verdict columns on the newest run's rows."""

    from pytest_tesserabench.report.csv_report import cells

    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=CSV_COLUMNS, lineterminator="\n")
    writer.writeheader()
    for reference in _measured(runs):
        first = None
        for index, (run, label) in enumerate(zip(runs, labels), 1):
            record = run.benchmarks.get(reference.id)
            if record is None or record.stats is None:
                continue
            first = first or record.median_ms
            row = {
                "id": reference.id,
                "run": index,
                "source": label,
                "commit": run.commit.get("sha"),
                "started": run.started,
                "median_ms": record.median_ms,
                "ci95_low_ms": record.stats.ci95_ms[0],
                "ci95_high_ms": record.stats.ci95_ms[1],
                "tflop_per_s": record.tflops,
                "gb_per_s": record.gbps,
                "change_vs_first_pct": _pct(record.median_ms / first),
            }
            verdict = verdicts.get(reference.id) if index == len(runs) else None
            if verdict is not None:
                low, high = verdict.ci or (None, None)
                row |= {
                    "verdict": verdict.status,
                    "change_pct": _pct(verdict.ratio),
                    "change_ci95_low_pct": _pct(low),
                    "change_ci95_high_pct": _pct(high),
                    "p_value": verdict.p_value,
                }
            writer.writerow(cells(row))
    return out.getvalue()


def compare_command(args: argparse.Namespace, out, err) -> int:
    from pytest_tesserabench.gate.model import machine_ratio
    from pytest_tesserabench.gate.pipeline import History, judge_run
    from pytest_tesserabench.report.comparison_table import comparison_lines, software_differences
    from pytest_tesserabench.report.data import ReportData
    from pytest_tesserabench.report.markdown_report import markdown_summary
    from pytest_tesserabench.report.terminal import report_notes, settle_advice

    if len(args.runs) < 2:
        raise CommandError("compare needs at least two runs (files or baseline NAMEs), oldest first")
    for path, flag, example in ((args.csv, "--csv", "results.csv"), (args.md, "--md", "summary.md")):
        problem = files.check_writable_file(path, example=example) if path is not None else None
        if problem:
            raise CommandError(f"{flag}={path}: {problem}")
    sources = load_sources(args.runs, args.dir)
    old_runs = [run for source in sources[:-1] for run in source.runs]
    new_runs = sources[-1].runs
    if len(new_runs) > 1:
        print(
            f"{sources[-1].label} holds {len(new_runs)} runs: its newest is judged against the others' runs",
            file=err,
        )
    # The run judged as the plugin judged it while measuring (gate.pipeline.judge_run)
    verdicts = judge_run(new_runs[-1], old_runs, _gate_config(args))
    suite = _suite_shift(new_runs[-1], History.of(old_runs, _gate_config(args)))
    old_machine, new_machine = old_runs[-1].machine, new_runs[-1].machine
    for key in ("device", "arch", "cpu"):
        if old_machine.get(key) != new_machine.get(key) and (old_machine.get(key) or new_machine.get(key)):
            print(
                f"warning: the files come from different machines ({key}: {old_machine.get(key)!r} vs "
                f"{new_machine.get(key)!r}); timing differences may be the machine's",
                file=err,
            )
            break
    # (older than every run it is judged against: the arguments reversed, not an old artifact judged
    # against a baseline that has since grown)
    starts = [moment for run in old_runs if (moment := parse_started(run.started)) is not None]
    judged_at = parse_started(new_runs[-1].started)
    if judged_at is not None and starts and judged_at < min(starts):
        print(
            f"warning: {sources[-1].label}, the run judged (the last argument), was recorded "
            f"{format_started(new_runs[-1].started)}, before every run it is judged against (the oldest "
            f"{min(starts):%Y-%m-%d %H:%M}): compare takes the runs oldest first, the one to judge last "
            "(`tesserabench compare main run.json`)",
            file=err,
        )
    runs = [run for source in sources for run in source.runs]
    labels = [source.label for source in sources for _ in source.runs]
    lines: list[Line] = []
    if len(sources) > 2:
        lines += across_runs_lines(runs, labels, args.width) + [Line("")]
    records = {i: r for run in runs for i, r in run.benchmarks.items()}
    lines += comparison_lines(
        verdicts,
        version_diffs=software_differences(new_machine, old_machine),
        canary_ratio=machine_ratio(new_runs, old_runs),
        records=records,
        width=args.width,
    )
    settle = None
    root = _project_root(new_runs[0].benchmarks.values(), args.dir) if len(new_runs) == 1 else None
    if root is not None:  # the tests named from here, as the plugin names them from where pytest ran
        settle = settle_advice(verdicts, new_runs[0].benchmarks, old_runs, root, Path.cwd(), [])
    notes = report_notes(new_runs[-1].benchmarks.values(), verdicts, settle=settle, suite=suite)  # as the plugin's
    lines += [Line(note, "red" if note.startswith("FAILED") else None) for note in notes]
    out.write(as_text(lines, color=getattr(out, "isatty", lambda: False)()))
    regressed = [v for v in verdicts.values() if v.failed]
    for verdict in regressed:
        print(f"{printable(verdict.id)}: {verdict.line()}", file=out)
    described = ", ".join(source.label for source in sources[:-1])
    if args.md is not None:
        data = ReportData(run=new_runs[-1], verdicts=verdicts, history=old_runs, baseline=described, notes=notes)
        write_output(args.md, markdown_summary(data), "--md")
        print(f"wrote the markdown summary to {args.md}", file=err)
    if args.csv is not None:
        write_output(args.csv, across_runs_csv(runs, labels, verdicts), "--csv")
        print(f"wrote {len(runs)} run(s) as CSV rows to {args.csv}", file=err)
    return EXIT_REGRESSED if regressed or (suite is not None and suite.failed) else EXIT_OK


def _suite_shift(run, history):
    """The run's suite-wide shift, as the plugin reported it at the end of the run: every
    benchmark's centre, the canary of the start and the end."""

    from pytest_tesserabench.gate.model import canary_centre

    canary = canary_centre([run])
    return history.suite_shift(run.benchmarks.values(), math.log(canary) if canary else None)


def _project_root(records, baselines_dir: Path) -> Path | None:
    """The directory a run's node ids are relative to (pytest's rootdir): the parent of the
    baselines root (the plugin's default, <rootdir>/baselines), the current directory or one above
    it, the first under which the tests' files exist; None when none of them has them."""
    files = {record.nodeid.partition("::")[0] for record in records}
    if not files:
        return None
    here = Path.cwd()
    for candidate in (baselines_dir.resolve().parent, here, *here.parents):
        if all((candidate / name).is_file() for name in files):
            return candidate
    return None


# -- report ---------------------------------------------------------------------------------------------
def report_command(args: argparse.Namespace, out, err) -> int:
    from pytest_tesserabench.gate.pipeline import History, judge_run
    from pytest_tesserabench.report.data import ReportData
    from pytest_tesserabench.report.plots import PlotError, missing_dependency
    from pytest_tesserabench.report.terminal import report_notes

    missing = missing_dependency()
    if missing:
        raise CommandError(missing)
    problem = files.check_writable_file(args.output, example="report.html")
    if problem:
        raise CommandError(f"-o {args.output}: {problem}")
    sources = load_sources([args.run, *args.baseline], args.dir)
    *earlier, run = sources[0].runs  # a baseline given first: its newest run, its history before it
    history = earlier + [r for source in sources[1:] for r in source.runs]
    if not any(r.stats is not None for r in run.benchmarks.values()):
        raise CommandError(f"{args.run}: holds no measured benchmark; nothing to plot")
    suite = None
    if history:
        verdicts = judge_run(run, history, _gate_config(args))
        suite = _suite_shift(run, History.of(history, _gate_config(args)))
        described = ", ".join(s.label for s in sources[1:]) or f"the earlier runs of {sources[0].label}"
    else:  # a run made with --bench-compare keeps its verdicts
        verdicts = {i: r.verdict for i, r in run.benchmarks.items() if r.verdict is not None}
        described = None
    notes = report_notes(run.benchmarks.values(), verdicts, suite=suite)
    data = ReportData(run=run, verdicts=verdicts, history=history, baseline=described, notes=notes)
    from pytest_tesserabench.report.html_report import html_report

    try:
        page = html_report(data, title=args.title)
    except PlotError as exc:
        raise CommandError(str(exc)) from None
    write_output(args.output, page, "-o")
    print(f"wrote the HTML report of {len(data.records)} benchmark(s) to {args.output}", file=out)
    return EXIT_OK
