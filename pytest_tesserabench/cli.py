"""The ``tesserabench`` command: compare runs, report them as HTML, show baselines, save a run file
into a baseline, inspect and tune kernels.

Exit status (for CI scripts): 0 fine, 1 a benchmark regressed, 2 usage or file error.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import os
import shutil
import statistics
import sys
from collections.abc import Sequence
from pathlib import Path

from pytest_tesserabench.history.baseline import (
    BaselineError,
    baseline_names,
    baseline_path,
    load_baseline,
    load_runs,
    save_runs,
)
from pytest_tesserabench.machine.interpret import FP_FUSION_ENV
from pytest_tesserabench.options import parse_count, parse_fraction, parse_lock_timeout, parse_name, parse_percent
from pytest_tesserabench.record.results import analysed_kernels, kernels_text
from pytest_tesserabench.record.units import format_started
from pytest_tesserabench.report.commands import (
    BASELINES_HELP,
    CommandError,
    add_gate_arguments,
    compare_command,
    find_baselines_dir,
    report_command,
)
from pytest_tesserabench.report.layout import shorten_unique
from pytest_tesserabench.report.safe_text import printable

# What one command alone needs is imported where that command runs: `tesserabench --help` loads
# ~136 modules in ~100 ms; scaling, history's steps and timeline, import, inspect, tune and the
# machine's device would add ~70 modules and ~50 ms to every command, rich ~30 ms, the gate
# (numpy, scipy) ~0.8 s.

EXIT_OK, EXIT_REGRESSED, EXIT_USAGE = 0, 1, 2


def _argparse_type(parse, what: str):
    """An argparse type from the plugin's own parser, so both read a value the same way."""

    def convert(text: str):
        try:
            return parse(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{what} {text!r} {exc}") from None

    convert.__name__ = what  # argparse names the type in its messages
    return convert


_percent = _argparse_type(parse_percent, "threshold")
_alpha = _argparse_type(parse_fraction, "alpha")
_name = _argparse_type(parse_name, "baseline name")
_history = _argparse_type(parse_count, "history")
_lock_timeout = _argparse_type(parse_lock_timeout, "lock timeout")
_machine_key = _argparse_type(parse_name, "machine key")

# Narrower than this, a table has no room for a benchmark id and its figures (rich then prints
# nothing at all); wider than this is a typo, not a screen.
MIN_WIDTH, MAX_WIDTH = 40, 10_000


def _parse_width(text: str) -> int:
    try:
        width = int(text)
    except ValueError:
        raise ValueError("is not a whole number of columns") from None
    if not MIN_WIDTH <= width <= MAX_WIDTH:
        raise ValueError(f"must be from {MIN_WIDTH} to {MAX_WIDTH} columns (leave it out for the terminal's width)")
    return width


_width = _argparse_type(_parse_width, "width")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="tesserabench",
        description="Compare runs, report them as HTML, show baselines, inspect and tune kernels.",
        epilog=__doc__.split("\n\n")[1],  # the exit statuses
    )
    sub = parser.add_subparsers(
        dest="command", required=True, metavar="{compare,report,show,history,save,import,scaling,inspect,tune}"
    )

    compare = sub.add_parser(
        "compare",
        help="compare runs (result or baseline files, baseline NAMEs) with the gate's rule",
        description="Compare the last RUN against the runs before it (each a --bench-json result, a "
        "baseline file or a baseline NAME), oldest first. With more than two, a table per benchmark "
        "across the runs comes first. Exit 0 when nothing regressed, 1 when something did, 2 on a "
        "usage or file error.",
    )
    compare.add_argument("runs", nargs="+", metavar="RUN", help="a result file, a baseline file or a baseline NAME")
    add_gate_arguments(compare, _percent, _alpha)
    compare.add_argument("--csv", type=Path, metavar="PATH", help="also write one CSV row per benchmark and run")
    compare.add_argument("--md", type=Path, metavar="PATH", help="also write the markdown summary of the comparison")
    compare.add_argument("--width", type=_width, default=None, help="table width in columns (default: the terminal's)")

    report = sub.add_parser(
        "report",
        help="an HTML report with plots of a run (needs the 'report' extra)",
        description="Write a self-contained HTML report of RUN (a --bench-json result; a baseline: its "
        "newest run), compared with the BASELINE runs after it when given (files or NAMEs, oldest "
        "first). Exit 0 when written, 2 on a usage or file error.",
    )
    report.add_argument("run", metavar="RUN", help="the run to report: a result file, a baseline file or NAME")
    report.add_argument("baseline", nargs="*", metavar="BASELINE", help="runs to compare it with, oldest first")
    report.add_argument("-o", "--output", type=Path, default=Path("report.html"), help="default report.html")
    report.add_argument("--title", default="TesseraBench report", help="the page's title")
    add_gate_arguments(report, _percent, _alpha)

    show = sub.add_parser(
        "show",
        help="list the runs recorded in a baseline, and the slowdowns the gate can catch against it",
        description="List the runs of baseline NAME, one table per machine, and per benchmark the smallest "
        "slowdown the gate catches against it (at its false-alarm rate, with 90% probability, for a run measured "
        "as quietly as the baseline's).",
    )
    show.add_argument("name", type=_name, help="the baseline name given to --bench-save")
    show.add_argument("--dir", type=Path, default=None, help=BASELINES_HELP)
    show.add_argument("--machine", metavar="KEY", help="only this machine key (default: every machine)")
    show.add_argument("--width", type=_width, default=None, help="table width in columns (default: the terminal's)")
    show.add_argument(
        "--threshold", type=_percent, default=0.05, metavar="PCT", help="the threshold to hold them to (default 5)"
    )
    show.add_argument("--alpha", type=_alpha, default=0.01, help="suite-wide false-alarm rate (default 0.01)")

    history = sub.add_parser(
        "history",
        help="each benchmark's saved runs in order, and the steps (change points) found in them",
        description="Per benchmark of baseline NAME (one table per machine): its saved runs in order (commit, date, "
        "median and interval), the steps its level took (each with its size, its confidence and the first run "
        "after it), and a creep: the latest runs slower than the earliest by more than the threshold in steps each "
        "too small to fail. Needs ruptures (pip install 'pytest-tesserabench[history]'). Exit 1 when a benchmark "
        "has a step or a creep.",
    )
    history.add_argument("name", type=_name, help="the baseline name given to --bench-save")
    history.add_argument("-k", dest="pattern", metavar="TEXT", help="only benchmarks whose id contains TEXT")
    history.add_argument("--dir", type=Path, default=None, help=BASELINES_HELP)
    history.add_argument("--machine", metavar="KEY", help="only this machine key (default: every machine)")
    history.add_argument("--width", type=_width, default=None, help="table width in columns (default: the terminal's)")
    history.add_argument(
        "--threshold", type=_percent, default=0.05, metavar="PCT", help="the creep to report (default 5)"
    )
    history.add_argument(
        "--alpha", type=_alpha, default=0.01, help="false-step rate per benchmark and history (default 0.01)"
    )

    save = sub.add_parser(
        "save",
        help="append a run file (--bench-json, or the run a locked --bench-save kept) to baseline NAME",
        description="Append the passing benchmarks of RUNFILE, a --bench-json result, to baseline NAME for the "
        "machine that measured it, as --bench-save would have. A --bench-save that found the baseline locked past "
        "--bench-lock-timeout keeps its run in such a file and prints this command. Exit 0 when saved, 2 on a "
        "usage or file error (the baseline still locked among them).",
    )
    save.add_argument("name", type=_name, help="the baseline name, as given to --bench-save")
    save.add_argument("run_file", type=Path, metavar="RUNFILE", help="a --bench-json result file")
    save.add_argument("--dir", type=Path, default=None, help=BASELINES_HELP)
    save.add_argument(
        "--history",
        type=_history,
        default=10,
        metavar="N",
        help="runs kept per benchmark (ini bench_history; default 10)",
    )
    save.add_argument(
        "--lock-timeout",
        type=_lock_timeout,
        default=600.0,
        metavar="S",
        help="seconds to wait for the baseline's lock while another process holds it (default 600)",
    )

    imports = sub.add_parser(
        "import",
        help="make the runs another tool saved (pytest-benchmark's .benchmarks) a baseline's history",
        description="Read the runs pytest-benchmark saved (--benchmark-autosave / --benchmark-save: "
        ".benchmarks/<machine>/NNNN_*.json) and add them to baseline NAME, each machine's to its own file, in the "
        "order they were made. Their timings are shown in the baseline's history (tesserabench show, report); the "
        "gate never compares this plugin's timings with another tool's, and judges a benchmark once runs saved "
        "with --bench-save=NAME are beside them. Exit 0 when imported, 2 on a usage or file error.",
    )
    imports.add_argument("tool", choices=["pytest-benchmark"], help="the tool that saved the runs")
    imports.add_argument("path", type=Path, help="its .benchmarks folder, one machine's folder in it, or one run file")
    imports.add_argument("--name", type=_name, required=True, help="the baseline name, as --bench-save would take")
    imports.add_argument("--dir", type=Path, default=None, help=BASELINES_HELP)
    imports.add_argument(
        "--machine", metavar="KEY", type=_machine_key, help="the machine key to file them under (default: each run's)"
    )
    imports.add_argument(
        "--history", type=_history, default=10, metavar="N", help="runs kept per benchmark (bench_history; default 10)"
    )
    imports.add_argument(
        "--lock-timeout",
        type=_lock_timeout,
        default=600.0,
        metavar="S",
        help="seconds to wait for the baseline's lock while another process holds it (default 600)",
    )

    scaling = sub.add_parser(
        "scaling",
        help="strong- and weak-scaling efficiency of runs made at several world sizes (torchrun)",
        description="Read --bench-json runs of the same suite at different torchrun world sizes and show, "
        "per benchmark, its speed-up and strong- and weak-scaling efficiency against the smallest size.",
    )
    scaling.add_argument("runs", type=Path, nargs="+", help="--bench-json result files, one per world size")
    scaling.add_argument("--width", type=_width, default=None, help="table width in columns (default: the terminal's)")

    sub.add_parser(
        "inspect", help="static analysis of Triton kernels (see `tesserabench inspect -h`)", add_help=False
    )  # main() hands every argument after it to the inspect parser
    sub.add_parser(
        "tune", help="tune a kernel's configs, or list the tuning cache (see `tesserabench tune -h`)", add_help=False
    )  # main() hands every argument after it to pytest_tesserabench.tuning.cli
    return parser


def _scaling(args: argparse.Namespace, out, err) -> int:
    from pytest_tesserabench.report.scaling import ScalingError, render, scaling

    runs = [(str(path), run) for path in args.runs for run in load(path)[-1:]]
    try:
        table = scaling(runs)
    except ScalingError as exc:
        print(f"tesserabench: error: {exc}", file=err)
        return EXIT_USAGE
    if not table:
        print(
            "tesserabench: no benchmark was measured at two world sizes; give runs of the same suite made "
            "with different torchrun --nproc-per-node",
            file=err,
        )
        return EXIT_USAGE
    out.write(render(table, width=args.width))
    return EXIT_OK


def load(path: Path):
    return load_runs(path)


def _show(args: argparse.Namespace, out, err) -> int:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    files = _baseline_files(args, err)
    if files is None:
        return EXIT_USAGE
    buffer = io.StringIO()
    console = Console(
        file=buffer, width=args.width, no_color=True, color_system=None, highlight=False, markup=False
    )  # branch names and paths are data, not rich style tags
    for path in files:
        data = load_baseline(path, machine_key=path.stem)
        rows = []
        for i, run in enumerate(data.runs, 1):
            commit, machine = run.commit, run.machine
            sha = str(commit.get("sha") or "-")[:8] + ("+dirty" if commit.get("dirty") else "")
            canary = run.canary_ms
            # the session's process and the fresh ones it was measured in too (--bench-save-processes)
            processes = 1 + max((len(r.confirm or []) for r in run.benchmarks.values()), default=0)
            rows.append(
                [
                    str(i),
                    _started(run.started),
                    sha,
                    printable(str(commit.get("branch") or "-")),
                    str(run.other.get("imported_from") or "-"),  # (tesserabench import)
                    str(len(run.benchmarks)),
                    str(processes) if processes > 1 else "-",
                    f"{statistics.median(canary):.3f} ms" if canary else "-",
                    *(str(machine.get(k) or "-") for k in ("torch", "triton", "python")),
                ]
            )
        # Simple rules, no vertical lines; software that every run shares goes into the title,
        # and a column that is "-" in every run (torch in a project without it) is left out: a
        # run's line fits 80 columns.
        columns = (
            "#", "started", "commit", "branch", "imported from", "benchmarks", "processes", "canary", "torch", "triton",
            "python",
        )  # fmt: skip
        software = range(columns.index("torch"), len(columns))
        shared = [c for c in software if len({r[c] for r in rows}) == 1 and rows[0][c] != "-"]
        title = f"{args.name} on {data.machine_key}"
        if shared:  # (a line of its own: a value is never split from its name)
            title += "\n  every run: " + ", ".join(f"{columns[c]} {rows[0][c]}" for c in shared)
        kept = [
            c
            for c, name in enumerate(columns)
            if c not in shared and (name in ("#", "started") or any(r[c] != "-" for r in rows))
        ]
        # the title above the table, wrapped at spaces to the console's width (a table's title
        # wraps to the table's, which cut the path mid-word however wide the terminal), and the
        # file's path on a line of its own, whole: a path cut anywhere cannot be copied
        console.print(title)
        console.print(f"  {path}", soft_wrap=True)
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for c in kept:
            right = columns[c] in ("#", "benchmarks", "processes", "canary")
            table.add_column(columns[c], justify="right" if right else "left", no_wrap=columns[c] != "branch")
        for row in rows:
            table.add_row(*(row[c] for c in kept))
        console.print(table)
        _print_kernels(console, data.runs)
        _print_detectable(console, data.runs, args)
    out.write(buffer.getvalue())
    return EXIT_OK


def _print_kernels(console, runs) -> None:
    """The kernels whose static figures the baseline holds (over its runs): what a compare gates
    exactly, with no statistics, even on a GPU-less runner."""
    kernels = analysed_kernels(r for run in runs for r in run.benchmarks.values())  # (a -k save keeps the others')
    if kernels:
        names = sorted({name for name, _ in kernels})
        console.print(
            f"Kernel figures of {kernels_text(kernels)} ({', '.join(printable(n) for n in names)}): "
            "compared exactly, without statistics (spills and occupancy gated; registers, shared memory and "
            "the work the kernel holds noted, its SASS instruction count gated with --bench-work-threshold)"
        )


def _print_detectable(console, runs, args: argparse.Namespace) -> None:
    """Per benchmark, the smallest slowdown the gate catches against these runs (gate.pipeline
    History.detectable), and whether that is above the threshold."""
    from rich import box
    from rich.table import Table

    from pytest_tesserabench.gate import GateConfig
    from pytest_tesserabench.gate.pipeline import History

    config = GateConfig(alpha=args.alpha, threshold=args.threshold)
    detectable = History.of(runs, config).detectable()
    if not detectable:
        return
    threshold = f"{args.threshold * 100:g}%"
    console.print(
        f"What the gate catches against it: the smallest slowdown caught with {config.power:.0%} probability at "
        f"alpha {args.alpha:g}, in a run as quiet as these measured in 3 processes (its own and --bench-confirm's "
        f"2); threshold {threshold}:"
    )
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    table.add_column("benchmark", no_wrap=True)
    table.add_column("catches", justify="right", no_wrap=True)
    judged = f"judged at {threshold}"
    table.add_column(judged, no_wrap=True)
    # an id is never split over lines: shortened in the middle to what the other columns leave
    room = max(console.width - len("catches") - len(judged) - 8, 16)
    ordered = sorted(detectable.items())
    names = shorten_unique([printable(bench_id) for bench_id, _ in ordered], room)  # (ids that differ stay apart)
    for name, (_, size) in zip(names, ordered, strict=True):
        table.add_row(name, f"{size:.1%}", "no" if size > args.threshold else "yes")
    console.print(table)
    above = sum(1 for d in detectable.values() if d > args.threshold)
    if above:
        console.print(
            f"{above} of {len(detectable)} benchmark(s) cannot be judged at {threshold} on this machine: their "
            "comparisons end INCONCLUSIVE unless they move more. More saves, a quieter runner, or --bench-ab=REF "
            "(both sides in one job) let the gate see smaller changes."
        )


def _started(started: str | None) -> str:
    return format_started(started)


def _baseline_files(args: argparse.Namespace, err) -> list[Path] | None:
    """The machine files of baseline NAME (one with --machine), or None after saying what is missing."""

    if args.machine:
        path = baseline_path(args.dir, args.name, args.machine)
        if path.exists():
            return [path]
        keys = sorted(p.stem for p in (args.dir / args.name).glob("*.json")) if (args.dir / args.name).is_dir() else []
        print(
            f"no baseline {args.name!r} for machine {args.machine!r}: {path} does not exist "
            f"(machines recorded: {', '.join(keys) or 'none'}); "
            f"record one with `pytest --bench-save={args.name}` on that machine",
            file=err,
        )
        return None
    folder = args.dir / args.name
    files = sorted(folder.glob("*.json")) if folder.is_dir() else []
    if not files:
        recorded = ", ".join(baseline_names(args.dir)) or "none"
        print(
            f"no baseline {args.name!r} under {args.dir} (recorded: {recorded}); record one with "
            f"`pytest --bench-save={args.name}`",
            file=err,
        )
        return None
    return files


def _history(args: argparse.Namespace, out, err) -> int:
    from pytest_tesserabench.history.steps import MissingLibrary, ruptures_library
    from pytest_tesserabench.history.timeline import render

    files = _baseline_files(args, err)
    if files is None:
        return EXIT_USAGE
    try:  # up front: a history too short for steps would not need it yet, and the next save would
        ruptures_library()
    except MissingLibrary as exc:
        print(f"tesserabench history: {exc}", file=err)
        return EXIT_USAGE
    flagged = shown = 0
    for path in files:
        data = load_baseline(path, machine_key=path.stem)
        try:
            text, found, count = render(
                f"{args.name} on {data.machine_key} ({len(data.runs)} run(s), {path})",
                data.runs,
                pattern=args.pattern,
                threshold=args.threshold,
                alpha=args.alpha,
                width=args.width,
                shown_as=printable,
            )
        except MissingLibrary as exc:  # (installed, yet it would not import: a broken install)
            print(f"tesserabench history: {exc}", file=err)
            return EXIT_USAGE
        out.write(text)
        flagged += found
        shown += count
    if args.pattern and not shown:
        print(f"tesserabench history: no benchmark of {args.name!r} has an id containing {args.pattern!r}", file=err)
        return EXIT_USAGE
    return 1 if flagged else EXIT_OK


def _inspect(rest: list[str], out, err) -> int:
    from pytest_tesserabench.inspect.cli import add_arguments, run

    parser = argparse.ArgumentParser(prog="tesserabench inspect")
    add_arguments(parser)
    try:
        args = parser.parse_args(rest)
    except SystemExit as exc:
        return int(exc.code or 0)
    status = run(args)
    return EXIT_OK if status is None else int(status)


def _save(args: argparse.Namespace, out, err) -> int:
    from pytest_tesserabench.machine.device import machine_key

    runs = load(args.run_file)
    if len(runs) != 1:
        print(
            f"tesserabench: error: {args.run_file} is a baseline of {len(runs)} runs; give one run, a --bench-json "
            "result file",
            file=err,
        )
        return EXIT_USAGE
    run = runs[0]
    passed = {i: r for i, r in run.benchmarks.items() if r.outcome == "passed"}
    if not passed:
        print(f"tesserabench: error: {args.run_file} holds no passing benchmark; nothing to save", file=err)
        return EXIT_USAGE
    try:
        key = machine_key(run.machine)
    except ValueError:
        print(
            f"tesserabench: error: {args.run_file} does not say which machine measured it ('machine' needs "
            "'device' and 'arch'); save a run file the plugin wrote",
            file=err,
        )
        return EXIT_USAGE
    # A failed test's records never enter a baseline (as with --bench-save).
    run = dataclasses.replace(run, benchmarks=passed, measured_order=[i for i in run.measured_order if i in passed])
    path = _save_into(args, key, [run], err)
    left_out = len(runs[0].benchmarks) - len(passed)
    note = f" ({left_out} from failed tests left out)" if left_out else ""
    print(
        f"tesserabench: saved {len(passed)} benchmark(s) to {path}{note}; {args.run_file} may now be removed", file=out
    )
    return EXIT_OK


def _save_into(args: argparse.Namespace, key: str, runs: list, err, *, by_date: bool = False) -> Path:
    """``runs`` appended to baseline ``args.name`` for machine ``key``, as ``save`` and ``import``
    take the baseline's options (--dir, --history, --lock-timeout); the wait for its lock is said
    on ``err``."""

    return save_runs(
        args.dir,
        args.name,
        key,
        runs,
        history=args.history,
        lock_timeout=args.lock_timeout,
        say=lambda line: print(line, file=err, flush=True),
        lock_option="--lock-timeout",
        by_date=by_date,
    )


def _import(args: argparse.Namespace, out, err) -> int:
    from pytest_tesserabench.history import imported
    from pytest_tesserabench.machine.device import machine_key

    try:
        found = [imported.read_run(path) for path in imported.saved_files(args.path)]
    except imported.NotSavedRuns as exc:
        print(f"tesserabench: error: {exc}", file=err)
        return EXIT_USAGE
    by_key: dict[str, list] = {}
    for run, _ in found:
        try:
            key = args.machine or machine_key(run.machine)
        except ValueError:
            print(
                f"tesserabench: error: {run.other.get('imported_file')}: its machine_info names no CPU model; "
                "name the machine with --machine KEY (as `tesserabench show` lists keys)",
                file=err,
            )
            return EXIT_USAGE
        by_key.setdefault(key, []).append(run)
    for key, runs in by_key.items():
        path = _save_into(args, key, runs, err, by_date=True)
        benchmarks = len({i for run in runs for i in run.benchmarks})
        print(f"tesserabench: imported {len(runs)} run(s) of {benchmarks} benchmark(s) into {path}", file=out)
    lacks = list(dict.fromkeys(what for _, said in found for what in said))
    if lacks:
        print(f"tesserabench: what pytest-benchmark did not save: {'; '.join(lacks)}", file=out)
    print(
        f"tesserabench: their timings are shown in the history (tesserabench show {args.name}, report); the gate "
        f"compares timings of this plugin's own runs only: save some with pytest --bench-save={args.name}",
        file=out,
    )
    return EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    os.environ.setdefault(FP_FUSION_ENV, "1")  # Triton's own default; unset, it warns on every compile
    out, err = sys.stdout, sys.stderr
    if argv and argv[0] == "inspect":
        return _inspect(argv[1:], out, err)
    if argv and argv[0] == "tune":
        from pytest_tesserabench.tuning.cli import main as tune_main

        return tune_main(argv[1:], out, err)
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse already printed the usage error
        return EXIT_USAGE if exc.code else EXIT_OK
    if "dir" in args and args.dir is None:
        args.dir = find_baselines_dir(Path.cwd())
    if getattr(args, "width", 0) is None:  # COLUMNS, else the terminal's, else a log's (the plugin's tables')
        from pytest_tesserabench.report.terminal import table_width

        args.width = max(table_width(shutil.get_terminal_size((80, 24)).columns), MIN_WIDTH)
    try:
        if args.command == "compare":
            return compare_command(args, out, err)
        if args.command == "report":
            return report_command(args, out, err)
        if args.command == "show":
            return _show(args, out, err)
        if args.command == "history":
            return _history(args, out, err)
        if args.command == "save":
            return _save(args, out, err)
        if args.command == "import":
            return _import(args, out, err)
        if args.command == "scaling":
            return _scaling(args, out, err)
        return _inspect([], out, err)
    except (BaselineError, CommandError) as exc:
        print(f"tesserabench: error: {exc}", file=err)
        return EXIT_USAGE


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
