"""The run's files, written once at the end of the session (on the xdist controller): the
``--bench-json`` run file, the reports (``--bench-html``, ``--bench-md``, ``--bench-csv``), the CI
job summary and the ``--bench-save`` baseline. Each says what it wrote, on a line of its own; a
failure is one error line and a failed session, never a traceback, except the job summary, which
only warns (a CI convenience must not fail a run); nothing is saved from an interrupted run
(Ctrl-C), since half a run in a baseline would pass for a whole one."""

from __future__ import annotations

import math
import os
import stat
import statistics

from pytest_tesserabench.gate.centres import pass_centres
from pytest_tesserabench.gate.config import GateConfig
from pytest_tesserabench.history.baseline import BaselineError, BaselineLocked
from pytest_tesserabench.record import files
from pytest_tesserabench.record.results import analysed_kernels, kernels_text
from pytest_tesserabench.record.units import format_factor, format_ms
from pytest_tesserabench.report.csv_report import csv_text
from pytest_tesserabench.report.markdown_report import markdown_summary
from pytest_tesserabench.report.openmetrics import metrics_text
from pytest_tesserabench.report.safe_text import printable
from pytest_tesserabench.report.terminal import run_notes

GITHUB_SUMMARY = "GITHUB_STEP_SUMMARY"


def write_outputs(state, reporter, *, interrupted: bool) -> bool:
    """Write what the settings ask for; True when something could not be written."""

    settings = state.settings
    failed = False

    def say(message: str, **markup) -> None:
        if reporter is not None:
            if reporter.config.get_terminal_writer().width_of_current_line:
                reporter.write_line("")  # never on the end of pytest's progress line
            reporter.write_line(message, **markup)

    def error(message: str) -> None:
        nonlocal failed
        failed = True
        say(f"ERROR: {message}", red=True)

    if settings.json_path is not None:
        try:
            state.write_json()
        except (OSError, ValueError) as exc:
            error(f"--bench-json={settings.json_path}: cannot write the results: {exc}")
        else:
            say(f"tesserabench: wrote {len(state.records)} benchmark(s) to {settings.json_path}")
    reports = (settings.html_path, settings.md_path, settings.csv_path, settings.openmetrics_path)
    if any(reports) or os.environ.get(GITHUB_SUMMARY):
        _write_reports(state, say, error, reporter.config if reporter is not None else None)
    if settings.save:
        if interrupted:
            say(f"tesserabench: nothing saved to baseline {settings.save}: the run was interrupted", yellow=True)
            return failed
        try:
            path, saved, outlying = state.save_baseline()
        except BaselineLocked as exc:  # the run is kept in a file; the message says how to save it
            error(f"--bench-save={settings.save}: not saved yet: {exc}")
        except (BaselineError, OSError) as exc:
            error(f"--bench-save={settings.save}: nothing saved: {exc}")
        else:
            skipped = len(state.records) - saved
            if saved:
                left_out = f" ({skipped} from failed tests left out)" if skipped else ""
                say(f"tesserabench: saved {saved} benchmark(s) to {path}{left_out}{_fresh_cost(state)}")
                commit = state.context.commit
                if commit.get("dirty") and commit.get("sha"):
                    say(
                        f"tesserabench: saved from a modified checkout of {str(commit['sha'])[:12]} (uncommitted "
                        "changes to tracked files): no commit holds the code these timings belong to, so a compare "
                        "cannot offer to measure its undecided benchmarks beside it (--bench-ab=REF); save "
                        "baselines from clean commits",
                        yellow=True,
                    )
            else:
                say(f"tesserabench: nothing saved to {path}: no passing benchmark")
            undetectable, timed = state.undetectable(path) if saved else ({}, 0)
            if undetectable:
                worst = sorted(undetectable.items(), key=lambda item: -item[1])
                # rounded up: a benchmark left out at 5% must not read "(5%)"
                named = ", ".join(
                    f"{printable(bench_id)} (it catches {math.ceil(size * 1000) / 10:g}% or more)"
                    for bench_id, size in worst[:5]
                )
                more = f" and {len(worst) - 5} more" if len(worst) > 5 else ""
                kernels = analysed_kernels(state.records.values())
                exact = f"; the figures of {kernels_text(kernels)} are compared exactly all the same" if kernels else ""
                moved = speed_moved(state.records.values(), settings.threshold)
                why = (
                    f" This machine's speed moved within the run: its passes of one benchmark, seconds apart, read "
                    f"a median {moved:.0%} apart; runs minutes apart meet it at other speeds, while --bench-ab=REF "
                    "pairs blocks 50 ms apart."
                    if moved is not None
                    else ""
                )
                say(
                    f"tesserabench: on this machine the gate can catch slowdowns of {settings.threshold:.0%} in "
                    f"{timed - len(worst)} of {timed} timed benchmark(s); not in {named}{more} "
                    f"(their comparisons end INCONCLUSIVE below that).{why} More saves, a "
                    f"quieter runner, or --bench-ab=REF; `tesserabench show {settings.save}` lists them all{exact}",
                    yellow=True,
                )
            for bench_id, left in (state.left_out(path) if saved else {}).items():
                say(
                    f"tesserabench: {_left_out_line(bench_id, left, state.records.get(bench_id))}",
                    yellow=True,
                )
            for far in outlying:
                what = {"runs": "its runs' median", "run": "the earlier run's", "fresh": "its fresh processes' median"}
                factor = format_factor(far.ratio)
                say(
                    f"tesserabench: {printable(far.bench_id)}: {format_ms(far.now)} in this run, {factor} "
                    f"{what[far.against]} ({format_ms(far.typical)}); {far.blame()} "
                    f"(`tesserabench show {settings.save}` lists the runs)",
                    yellow=True,
                )
    return failed


def speed_moved(records, threshold: float) -> float | None:
    """How far apart (relative) the passes of one benchmark read in this run, the median over its
    benchmarks measured in passes, where that is ``threshold`` or more; else None. Passes of one
    process are seconds apart: where they differ by the threshold, the machine's speed moves on
    that time scale (a VM whose vCPUs switch between two speeds), and a run's centre depends on
    which speeds its passes met, which more saves do not change."""
    spreads = [math.expm1(max(c) - min(c)) for c in (pass_centres(r) for r in records) if len(c) >= 2]
    if not spreads:
        return None
    moved = statistics.median(spreads)
    return moved if moved >= threshold else None


def _left_out_line(bench_id: str, left, record) -> str:
    """A save's word on processes the baseline leaves out (``left``: gate.pipeline.LeftOut), far
    from the others: a compare that reads the benchmark there fails it, so the reason matters now,
    not in CI. Where they are this save's own, the save has just measured this code slower than
    the baseline knows it, and another save would not mend that."""
    read = ", ".join(format_ms(ms) for ms in left.times)
    count = len(left.times)
    whose = f"this save's process{'es' if count > 1 else ''}" if left.newest else f"{count} of the baseline's processes"
    head = (
        f"{printable(bench_id)}: {whose} read {read}, far from its others ({format_ms(left.typical)}), and "
        f"{'are' if count > 1 else 'is'} left out of it: a compare that reads it there fails it"
    )
    cpus = record.own_cpus() if record is not None else 0.0
    if cpus >= 1 + GateConfig().crowded_cpus:  # (a multi-threaded benchmark, as gate.conditions reads one)
        return (
            f"{head}. It kept {cpus:.1f} CPUs busy: a multi-threaded benchmark on a shared machine can read at two "
            "levels with nothing changed; a baseline under --bench-threads=1 (compared with it) measures it on one"
        )
    if left.newest:
        return (
            f"{head}. If this code is slower, fix it, or, where the new speed is meant, save under a new name (or "
            "remove this machine's file) to start from it; if the machine was busy, nothing needs doing"
        )
    return f"{head}; unless the machine was busy then, record again and `tesserabench show` the runs"


def _fresh_cost(state) -> str:
    """What a save's fresh processes measured and cost (--bench-save-processes, and --bench-confirm's
    where the run compared too), for its line."""
    fresh = [r for r in state.records.values() if r.confirm]
    if not fresh:
        return ""
    processes = max(len(r.confirm) for r in fresh)
    seconds = sum(r.sampling.confirm_s for r in fresh if r.sampling is not None)
    return f"; {len(fresh)} of them measured in {processes} fresh process(es) too, {seconds:.1f} s"


def _write_reports(state, say, error, config) -> None:

    settings = state.settings
    data = state.report_data(run_notes(state, config))
    layout = dict(columns=settings.columns, sort=settings.sort, group_by=settings.group_by)
    measured = len(data.records)
    if settings.html_path is not None:
        # the HTML report and its plots (~10 ms; matplotlib when drawing): only for --bench-html
        from pytest_tesserabench.report.html_report import html_report
        from pytest_tesserabench.report.plots import PlotError

        if not measured:
            say(f"tesserabench: no HTML report written to {settings.html_path}: no benchmark was measured", yellow=True)
        else:
            try:
                files.write_atomic(settings.html_path, html_report(data, **layout))
            except (OSError, PlotError) as exc:
                error(f"--bench-html={settings.html_path}: cannot write the report: {exc}")
            else:
                say(f"tesserabench: wrote the HTML report of {measured} benchmark(s) to {settings.html_path}")
    markdown = markdown_summary(data, **layout)
    if settings.md_path is not None:
        try:
            files.write_atomic(settings.md_path, markdown)
        except OSError as exc:
            error(f"--bench-md={settings.md_path}: cannot write the summary: {exc}")
        else:
            say(f"tesserabench: wrote the markdown summary to {settings.md_path}")
    if settings.csv_path is not None:
        try:
            files.write_atomic(settings.csv_path, csv_text(data.records, data.verdicts))
        except OSError as exc:
            error(f"--bench-csv={settings.csv_path}: cannot write the table: {exc}")
        else:
            say(f"tesserabench: wrote {measured} row(s) to {settings.csv_path}")
    if settings.openmetrics_path is not None:
        try:
            files.write_atomic(settings.openmetrics_path, metrics_text(data, settings.openmetrics_path))
        except OSError as exc:
            error(f"--bench-openmetrics={settings.openmetrics_path}: cannot write the metrics: {exc}")
        else:
            say(f"tesserabench: wrote the metrics of {measured} benchmark(s) to {settings.openmetrics_path}")
    summary = os.environ.get(GITHUB_SUMMARY)
    if summary and settings.github_summary and measured:
        kind = _not_a_regular_file(summary)
        if kind is not None:
            say(
                f"tesserabench: the summary was not written to {GITHUB_SUMMARY}={summary}: it is {kind}, "
                "not a regular file; the run is unaffected (point it at a file, or ini "
                "bench_github_summary=false turns this off)",
                yellow=True,
            )
            return
        try:
            _append(summary, markdown)
        except OSError as exc:
            say(
                f"tesserabench: warning: could not append the summary to {GITHUB_SUMMARY}={summary} "
                f"({exc.strerror or exc}); the run is unaffected (ini bench_github_summary=false turns this off)",
                yellow=True,
            )
        else:
            say(f"tesserabench: appended the summary to {GITHUB_SUMMARY}")


def _not_a_regular_file(path: str) -> str | None:
    """What ``path`` is when it exists and is not a regular file (a FIFO, a device, a folder), else
    None: opening a FIFO nobody reads blocks forever, and a device may swallow or refuse the text."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None  # absent (created on append) or unreadable: the append's own error says which
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "neither a file nor a folder"


def _append(path: str, text: str) -> None:
    """Appended, since other steps write there too. O_NONBLOCK: should the path become a FIFO
    between the check and the open, the open fails (ENXIO) instead of waiting for a reader."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NONBLOCK, 0o666)
    with open(fd, "a", encoding="utf-8") as stream:
        stream.write(text)
