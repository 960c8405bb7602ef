"""The terminal summary: a table per group, or one line per benchmark under ``-q``.

Tables come from report/layout.py, so an id is never split: a group's header carries what its
rows share, a row shows the rest, and what does not fit gives way (details, then value columns,
then the middle of a name).
"""

from __future__ import annotations

import math
import os
import shlex
import statistics
import sys
import textwrap
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_tesserabench.gate.config import GateConfig
from pytest_tesserabench.history import baseline
from pytest_tesserabench.history.timeline import creeping
from pytest_tesserabench.inspect.summary import format_kernel_lines
from pytest_tesserabench.machine import interpret, neighbours, run_queue, threads
from pytest_tesserabench.record.results import BenchRecord, Verdict
from pytest_tesserabench.record.units import format_ms
from pytest_tesserabench.report import rows as R
from pytest_tesserabench.report.comparison_table import comparison_lines, software_differences
from pytest_tesserabench.report.layout import (
    ELLIPSIS,
    Column,
    Line,
    Row,
    hidden_note,
    render_table,
    shorten_middle,
    shorten_unique,
)
from pytest_tesserabench.report.safe_text import printable

# Loaded where used, which a --bench run without a baseline or A/B never pays: the gate (4 modules,
# ~10 ms after record.stats' numpy and scipy; `tesserabench compare` loads it anyway) and A/B's
# modules (14 modules with multiprocessing, ~10 ms).

QUIET_MIN_ID = 30  # under -q an id is shortened no further than this, whatever the width


def summary_lines(
    records: Mapping[str, BenchRecord] | Sequence[BenchRecord],
    *,
    width: int = 80,
    verbosity: int = 0,
    columns: Sequence[str] | None = None,
    sort: str = "id",
    group_by: Sequence[str] = ("group",),
) -> list[Line]:
    """The summary as lines: one table per group (``-q``: one line per benchmark)."""
    records = list(records.values()) if isinstance(records, Mapping) else list(records)
    measured = R.sort_records([r for r in records if r.stats is not None], sort)
    if not measured:
        return []
    if verbosity < 0:
        return quiet_lines(measured, width=width)  # (-q: one line per benchmark, nothing more)
    speeds = R.relative_speeds(R.sort_records(measured))  # relative to each test's first call
    out: list[Line] = []
    for key, members in R.group_records(measured, group_by).items():
        keys = tuple(columns) if columns else R.default_columns(members, verbose=verbosity > 0)
        table_columns = [Column(k, R.FIELDS[k].header, drop=R.FIELDS[k].drop) for k in keys]
        shared, labels = R.row_labels(members)
        member_notes = [R.notes(r, timer_shown="timer" in keys) for r in members]
        common = R.common_notes(member_notes)
        table_rows = [
            Row(label, {k: R.FIELDS[k].cell(r, speeds) for k in keys}, [n for n in notes if n not in common])
            for r, label, notes in zip(members, labels, member_notes)
        ]
        if out:
            out.append(Line(""))
        title = R.group_title(key, shared, common)
        out.append(Line(shorten_middle(title, width), "bold"))
        table = render_table("benchmark", table_columns, table_rows, width)
        out.extend(table.lines)
        out.extend(hidden_note(table, width))
    return out + noisy_legend(measured, width)


def noisy_legend(records: Sequence[BenchRecord], width: int) -> list[Line]:
    """What "noisy" means, once, where some benchmark is (wrapped to ``width``)."""
    count = sum(1 for r in records if r.stats is not None and r.stats.noisy)
    if not count:
        return []
    text = (
        f"noisy ({count} of {len(records)}): its time ran out (--bench-max-time) before the median's 95% interval "
        "narrowed to --bench-target-ci; more time or a quieter machine narrows it"
    )
    return [Line(part) for part in textwrap.wrap(text, max(width, 20), break_on_hyphens=False)]


def quiet_lines(records: Sequence[BenchRecord], *, width: int = 80) -> list[Line]:
    """One line per benchmark: its whole id (shortened in the middle only when the line would
    not fit), median, interval, rates and notes."""
    tails = []
    for record in records:
        parts = [f"{R.FIELDS['median'].cell(record, {})} {R.FIELDS['ci'].cell(record, {})}"]
        if record.tflops:
            parts.append(R.FIELDS["throughput"].cell(record, {}))
        if record.gbps:
            parts.append(R.FIELDS["bandwidth"].cell(record, {}))
        if R.FIELDS["busbw"].value(record, {}) is not None:  # a collective: as the table shows it
            parts.append(f"algbw {R.FIELDS['algbw'].cell(record, {})}  busbw {R.FIELDS['busbw'].cell(record, {})}")
        notes = R.notes(record)
        if notes:
            parts.append(f"({', '.join(notes)})")
        tails.append("  " + "  ".join(parts))
    ids = [r.id for r in records]
    rooms = [max(QUIET_MIN_ID, width - len(t)) for t in tails]
    short = [_shorten_id(i, room) for i, room in zip(ids, rooms)]
    clashes: dict[str, list[int]] = {}
    for index, text in enumerate(short):
        clashes.setdefault(text, []).append(index)
    for members in clashes.values():  # ids that differ only where they were cut: cut them alike, apart
        if len({ids[i] for i in members}) > 1:
            apart = shorten_unique([ids[i] for i in members], min(rooms[i] for i in members))
            for index, text in zip(members, apart):
                short[index] = text
    return [Line(i + t) for i, t in zip(short, tails)]


def _shorten_id(bench_id: str, room: int) -> str:
    """An id in ``room`` characters: whole; else its path less its leading folders, whole ones
    (`…/test_cpu.py::test_mm[N400]`), or less the whole path (`…::test_mm[N400]`), so the test's
    name and parameters stay and no word is cut (a cut in the middle left `tests/benc…48-D64-
    bf16-causal]`, which names no test; a cut at the left `…est_cpu.py`); else cut in the middle."""
    bench_id = printable(bench_id)
    if len(bench_id) <= room:
        return bench_id
    path, sep, test = bench_id.partition("::")
    if not sep:
        return shorten_middle(bench_id, room)
    parts = path.split("/")
    for start in range(1, len(parts)):
        shorter = ELLIPSIS + "/" + "/".join(parts[start:]) + sep + test
        if len(shorter) <= room:
            return shorter
    if len(ELLIPSIS + sep + test) <= room:
        return ELLIPSIS + sep + test
    return shorten_middle(bench_id, room)


def cpu_sharing_line(records, *, pool: int | None = None, cpus: int | None = None) -> str | None:
    """A line when other processes shared the CPU the CPU-timed benchmarks ran on: they took it
    for a notable share of the timed wall clock (that wait is not in the figures), or kept other
    CPUs busy beside it; either way they share caches, memory bandwidth, a busy SMT sibling.
    ``pool``: torch's thread pool in the process that measured (live runs only), of ``cpus``: the
    line says when it outnumbers the CPUs the others left (threads.oversubscribed_hint)."""

    records = list(records)
    sampled = [record.sampling for record in records if record.sampling is not None]
    waits = [record.cpu_wait() for record in records]
    waited, timed = sum(w for w, _ in waits), sum(t for _, t in waits)
    others_wall = sum(s.others_wall_s for s in sampled)
    others_cpu = sum(max(s.others_cpu_s, 0.0) for s in sampled)  # (as BenchRecord.others_cpus)
    # (/proc/stat counts in ticks: over a few ms of rounds the figure can exceed the machine)
    busy = min(others_cpu / others_wall, float(os.cpu_count() or 1)) if others_wall > 0 else 0.0
    hint = threads.oversubscribed_hint(busy, pool, cpus or threads.cpus())
    crowded = f"; {hint}" if hint else ""
    if timed > 0 and waited / timed >= run_queue.SHARED:
        return (
            f"the CPU was shared: the timing thread waited for it {format_ms(waited * 1e3)} ({waited / timed:.0%} of "
            f"the timed wall clock), left out of the figures; other processes still share caches and memory "
            f"bandwidth{crowded}"
        )
    if busy >= neighbours.SHARED_CPUS:
        return (
            f"the CPU was shared: other processes kept {busy:.1f} CPUs busy while the benchmarks were timed; they "
            f"share caches, memory bandwidth and SMT siblings with them{crowded}"
        )
    if hint:  # (more threads than CPUs, other processes or not)
        return hint[0].upper() + hint[1:]
    return None


def threads_beyond_line(records) -> str | None:
    """A line naming the benchmarks that kept more CPUs busy than --bench-threads gives them
    (BenchRecord.threads_beyond), with why and what to do; None when there are none."""
    margin = GateConfig().crowded_cpus  # (past --bench-threads as a multi-threaded benchmark is past one CPU)
    beyond = {r.id: r.threads_beyond(margin) for r in records if r.timing_gated}
    beyond = {i: cpus for i, cpus in beyond.items() if cpus is not None}
    if not beyond:
        return None
    threads = next(r.sampling.threads for r in records if r.id in beyond)
    named = ", ".join(
        f"{printable(i.split('::', 1)[-1])} ({cpus:.1f} CPUs)" for i, cpus in sorted(beyond.items())[:MAX_NAMED]
    )
    more = f" and {len(beyond) - MAX_NAMED} more" if len(beyond) > MAX_NAMED else ""
    return (
        f"{len(beyond)} benchmark(s) kept more CPUs busy than --bench-threads={threads} gives them: {named}{more}; "
        "the test sizes those threads itself (workers=, threadpoolctl, a thread pool of its own), which the option "
        "cannot limit, so they still wait for a slow or shared CPU: size them in the test from the option's "
        "environment (OMP_NUM_THREADS), or compare them in one job with --bench-ab=REF"
    )


def render_summary(records, **kwargs) -> str:
    """The summary as plain text (see summary_lines)."""
    return "".join(line.text + "\n" for line in summary_lines(records, **kwargs))


def _kernel_lines(records: dict[str, BenchRecord]) -> list[str]:
    """The static analysis of each record's kernels, by record id (not completion order: under -n
    that changes from run to run, and two runs' blocks are compared by eye)."""
    lines = []
    for record_id, record in sorted(records.items()):
        if record.kernels:
            lines.append(record_id)
            lines.extend(f"  {line}" for line in format_kernel_lines(record.kernels))
    return lines


def ab_conditions_line() -> str:
    """How A/B's served processes run the code, which a user comparing figures with --bench's must
    know: a multi-threaded call reads slower there than under --bench."""

    from pytest_tesserabench.ab.interleave import measuring_cpu
    from pytest_tesserabench.processes.served import THREAD_POOLS

    cpu = measuring_cpu()
    where = f"on CPU {cpu}" if cpu is not None else "on one CPU"
    pools = [pool for pool in THREAD_POOLS if pool not in os.environ]
    if not pools:
        return f"tesserabench: A/B measures every served process {where}, thread pools as {', '.join(THREAD_POOLS)} set"
    return (
        f"tesserabench: A/B measures every served process {where}, {'/'.join(pools)} at 1 thread: multi-threaded "
        "code runs single-threaded there, or with the threads it sizes itself (set_num_threads, workers=) on that "
        "one CPU, so its figures differ from --bench's (the two sides alike)"
    )


def reach_line(reach: Mapping[str, float], threshold: float) -> str | None:
    """The header's word, before anything is measured, on what the baseline lets the gate see on
    this machine: said only when some timed benchmark cannot be judged at ``threshold`` (a
    slowdown smaller than it can catch reads INCONCLUSIVE), with what judges them there."""
    above = sorted(size for size in reach.values() if size > threshold)
    if not above:
        return None
    # rounded up: a benchmark left out at 5% must not read "5%"
    low, high = (math.ceil(size * 100) for size in (above[0], above[-1]))
    sizes = f"{low}%" if low == high else f"{low}-{high}%"
    return (
        f"tesserabench: against it the gate catches {threshold:.0%} slowdowns in {len(reach) - len(above)} of "
        f"{len(reach)} timed benchmark(s) on this machine, {sizes} ones in the others (a smaller slowdown there "
        f"reads INCONCLUSIVE); --bench-ab=REF judges them at {threshold:.0%} in one job"
    )


def save_processes_line(draws: Mapping[str, int], processes: int) -> str:
    """What a save with fresh processes will cost, said before it measures (``draws``: the
    process draws the baseline holds of each benchmark, this save's own process included)."""
    enough = baseline.SAVE_DRAWS
    if draws and all(count >= enough for count in draws.values()):
        return (
            f"tesserabench: the baseline holds at least {enough} process draws of each of its benchmarks: this save "
            "measures them in its own process only (a new benchmark in fresh processes too)"
        )
    return (
        f"tesserabench: each timed benchmark (not an interpreted kernel) is also measured in {processes} fresh "
        "process(es) (a process's own bias, "
        f"for the baseline) until the baseline holds {enough} draws of it: about this run's measuring time more "
        "per process (--bench-save-processes)"
    )


def header_lines(state, interpret_switch) -> list[str]:
    """The report header: what this run does, on which device, against what."""

    settings = state.settings
    if not settings.enabled:
        return [f"tesserabench: {settings.mode}"]
    info = state.context.machine_info
    device = f"{info.get('device')} ({info.get('arch')})"
    pools = f"; thread pools {settings.threads} (--bench-threads)" if settings.threads is not None else ""
    lines = [f"tesserabench: {settings.mode}; timer {settings.timer}; device {device}{pools}"]
    if state.comparison is not None:
        lines.append(f"tesserabench: baseline {state.comparison.describe()}")
        reach = reach_line(state.comparison.reach(processes=1 + settings.confirm), settings.threshold)
        if reach:
            lines.append(reach)
    if settings.save is not None and settings.save_processes > 0 and state.reference is None:
        lines.append(save_processes_line(state.process_draws(), settings.save_processes))
    if state.passes is not None:
        lines.append(
            f"tesserabench: {state.passes.total} interleaved passes over the benchmark tests (--bench-passes), "
            "each measuring a share of every budget"
        )
    elif state.passes_not_possible is not None:
        lines.append(f"tesserabench: one pass over the benchmark tests: {state.passes_not_possible}")
    if state.reference is not None:
        processes = settings.ab_processes
        served = f"{processes} served processes per side" if processes > 1 else "one served process per side"
        lines.append(f"tesserabench: A/B, {state.reference.describe()}, {served}, worktree {state.reference.path}")
        lines.append(ab_conditions_line())
    return lines


def triton_lines(state, interpret_switch) -> list[str]:
    """After collection, where the collected tests imported Triton (a project without Triton
    kernels hears nothing of them): whether its kernels run in the interpreter, and for which
    archs the plugin analyses them statically."""
    if "triton" not in sys.modules:
        return []
    settings = state.settings
    interpreting = interpret.interpreting()
    why = ""
    if interpret_switch is not None and interpret_switch.changed:
        why = f" (--bench-interpret={settings.interpret}" + (": no GPU driver found)" if interpreting else ")")
    said = [f"Triton kernels in the interpreter{why}"] if interpreting else []
    if settings.enabled:
        archs = settings.arch
        if archs is None:
            archs = ("the live GPU's arch",) if state.context.machine_info.get("gpu_count") else ("sm_90",)
        said.append(f"the Triton kernels the tests launch are analysed statically for {', '.join(archs)}")
    return [f"tesserabench: {'; '.join(said)}"] if said else []


LOG_WIDTH = 160  # a comparison row with every column: verdict, change, p, runs, baseline, now, shift


def table_width(terminal_width: int) -> int:
    """The width the tables lay out to: the terminal's; where the output is no terminal (a CI
    log, a file) and COLUMNS does not say, wide enough for every column of a comparison, as a log
    does not wrap (80 columns hid a regression's baseline and candidate times there)."""
    try:
        terminal = sys.__stdout__ is not None and sys.__stdout__.isatty()
    except ValueError:  # (closed)
        terminal = False
    if terminal or os.environ.get("COLUMNS"):
        return terminal_width
    return max(terminal_width, LOG_WIDTH)


def write_summary(terminalreporter, state, *, verbosity: int) -> None:
    """The whole tesserabench section of the terminal summary."""
    settings = state.settings
    width = table_width(terminalreporter.config.get_terminal_writer().fullwidth)
    terminalreporter.write_sep("=", "tesserabench")
    lines = summary_lines(
        state.records,
        width=width,
        verbosity=verbosity,
        columns=settings.columns,
        sort=settings.sort,
        group_by=settings.group_by,
    )
    for line in lines:
        terminalreporter.write_line(line.text, **line.markup())

    # (A/B's served processes measure with one thread, whatever the lead's pool)
    pool = threads.torch_threads() if state.reference is None else None
    sharing = cpu_sharing_line(state.records.values(), pool=pool)
    if sharing:  # even under -q: it says how far the figures can be trusted
        terminalreporter.write_line(sharing, yellow=True)
    beyond = threads_beyond_line(state.records.values())
    if beyond:
        terminalreporter.write_line(beyond, yellow=True)
    kernel_lines = _kernel_lines(state.records)
    if kernel_lines and verbosity >= 0:
        terminalreporter.write_sep("-", "static kernel analysis")
        for line in kernel_lines:
            terminalreporter.write_line(line)
    if state.reference is not None:
        _write_ab_section(terminalreporter, state, width)
    comparison = state.comparison
    if comparison is None:
        if state.not_compared:
            terminalreporter.write_line(f"NOTHING JUDGED: {state.not_compared}", red=True)
        return
    from pytest_tesserabench.gate.model import machine_ratio

    terminalreporter.write_sep("-", f"compared with baseline {comparison.describe()}")
    known = {i: r for run in comparison.runs for i, r in run.benchmarks.items()}  # names MISSING ones' groups
    for line in comparison_lines(
        state.all_verdicts(),
        records={**known, **state.records},
        version_diffs=software_differences(state.context.machine_info, comparison.baseline.latest_machine),
        canary_ratio=machine_ratio([state.document()], comparison.runs) if comparison.same_machine else None,
        width=width,
        hints=True,  # what would settle each INCONCLUSIVE one, a line each
    ):
        terminalreporter.write_line(line.text, **line.markup())
    verdicts = state.all_verdicts()
    confirmed = confirm_line(state.records.values(), verdicts)
    if confirmed:
        terminalreporter.write_line(confirmed)
    settle = settle_by_ab(state, terminalreporter.config)
    unresolved = unresolved_line(verdicts, failing=settings.unresolved == "fail", settle=settle)
    if unresolved:
        loud = unresolved.startswith("NOTHING")
        terminalreporter.write_line(unresolved, yellow=not loud, red=loud)
    elsewhere = elsewhere_line(state, verdicts)
    if elsewhere:  # (red where nothing was judged, as NOTHING JUDGED; yellow beside judged kernel figures)
        figures = kernel_figures_judged(verdicts) > 0
        terminalreporter.write_line(elsewhere, red=not figures, yellow=figures)
    suite = suite_line(state)
    if suite:
        terminalreporter.write_line(suite, red=state.suite.failed)
    creep = creep_line(state)
    if creep:
        terminalreporter.write_line(creep, yellow=True)
    not_run = not_run_line(state)
    if not_run:
        terminalreporter.write_line(not_run)


def kernel_figures_judged(verdicts: Mapping[str, Verdict]) -> int:
    """How many of ``verdicts`` the kernel figures decided (their timings judged or not)."""
    from pytest_tesserabench.gate.pipeline import KERNEL_FIGURES

    return sum(1 for v in verdicts.values() if v.stage == KERNEL_FIGURES)


def elsewhere_line(state, verdicts: Mapping[str, Verdict]) -> str | None:
    """Loud where this run's timings were measured and none judged: the --bench-compare baseline
    holds another machine's runs only (a pool of CI runners of several CPU models), which the
    comparison's header alone leaves easy to miss in a green job."""
    why = state.timings_elsewhere()
    timed = [r for r in state.records.values() if r.timing_gated and r.measured_rounds]
    if why is None or not timed:
        return None
    figures = kernel_figures_judged(verdicts)
    judged = f"; the kernel figures of {figures} were" if figures else ""
    failing = state.settings.unresolved == "fail"
    return f"TIMINGS NOT JUDGED ({len(timed)} timed benchmark(s){judged}): {why}" + (
        "" if failing else "; --bench-unresolved=fail fails them"
    )


def creep_line(state) -> str | None:
    """The benchmarks whose baseline (this machine's) got slower from its earliest runs to its
    latest by more than the threshold, in steps each too small to fail a comparison."""
    comparison = state.comparison
    if comparison is None or not comparison.same_machine:
        return None

    crept = creeping(comparison.baseline.runs, state.records, state.settings.threshold)
    if not crept:
        return None
    listed = ", ".join(f"{printable(i)} ({change:+.1%})" for i, change in sorted(crept.items(), key=lambda kv: -kv[1]))
    return (
        f"creep: {len(crept)} benchmark(s) of baseline {state.settings.compare} got slower over its runs by more "
        f"than {state.settings.threshold:.0%} with no single step that large: {listed}; "
        f"`tesserabench history {state.settings.compare}` shows the runs"
    )


def run_notes(state, config) -> list[str]:
    """What the summary says about this session's run under its tables, for the reports (see
    report_notes); the settle command not without ``config``."""
    if state.comparison is None:
        nothing = [f"NOTHING JUDGED: {state.not_compared}"] if state.not_compared else []
        return [*report_notes(state.records.values()), *nothing]
    settle = settle_by_ab(state, config) if config is not None else None
    verdicts = state.all_verdicts()
    notes = report_notes(
        state.records.values(),
        verdicts,
        settle=settle,
        suite=state.suite,
        not_run=not_run_line(state),
        failing=state.settings.unresolved == "fail",
    )
    elsewhere = elsewhere_line(state, verdicts)
    return [*notes, elsewhere] if elsewhere else notes


def report_notes(
    records, verdicts=None, *, settle: str | None = None, suite=None, not_run: str | None = None, failing=False
) -> list[str]:
    """What a run says about itself, in the summary's order: the CPU was shared, threads past
    --bench-threads, what was measured again, what it could not judge (of ``verdicts``: the
    records' own by default), ``settle`` (the command that settles its INCONCLUSIVE verdicts, in
    the same line), its ``suite``-wide shift, ``not_run``."""
    records = list(records)
    verdicts = verdicts if verdicts is not None else {r.id: r.verdict for r in records if r.verdict is not None}
    unresolved = unresolved_line(verdicts, failing=failing, settle=settle)
    lines = [cpu_sharing_line(records), threads_beyond_line(records), confirm_line(records, verdicts), unresolved]
    return [line for line in [*lines, suite.line() if suite is not None else None, not_run] if line]


def confirm_line(records, verdicts) -> str | None:
    """How --bench-confirm went: the benchmarks judged on fresh processes too (history mode), what
    measuring them cost, and how they ended."""
    again = [r for r in records if r.id in verdicts and verdicts[r.id].processes > 1 and r.ab is None]
    if not again:
        return None
    ended: dict[str, int] = {}
    for record in again:
        ended[verdicts[record.id].status] = ended.get(verdicts[record.id].status, 0) + 1
    seconds = sum(r.sampling.confirm_s for r in again if r.sampling is not None)
    counts = ", ".join(f"{n} {status}" for status, n in sorted(ended.items()))
    return f"{len(again)} benchmark(s) measured again in fresh processes ({seconds:.1f} s): {counts} (--bench-confirm)"


MAX_NAMED = 5  # unresolved benchmarks named in the line; the rest are counted


def unresolved_line(verdicts, *, failing: bool = False, settle: str | None = None) -> str | None:
    """History mode: the benchmarks this run could not judge at their threshold (INCONCLUSIVE),
    the slowdown it could have caught in each, and what to do (``settle``: the advice of
    settle_advice, when there is a commit to measure them beside); loud when it judged none.
    One line, so that a reader meets the word once under the table. (A/B's verdicts say so in
    their own table.)"""
    timed = [v for v in verdicts.values() if v.ratio is not None and v.stage != "paired"]
    undecided = [v for v in timed if v.status == "INCONCLUSIVE"]
    if not undecided:
        return None
    from pytest_tesserabench.gate.conditions import STAGE as CONDITIONS

    named = []
    for verdict in sorted(undecided, key=lambda v: -(v.detectable or 0.0))[:MAX_NAMED]:
        if verdict.stage == CONDITIONS:  # not the noise: how this run measured it (its line says which)
            could = " (not judged as this run measured it: its line says why)"
        elif verdict.detectable is not None:
            could = f" (it could catch {verdict.detectable:.0%} or more)"
        else:
            could = ""
        named.append(f"{printable(verdict.id.split('::', 1)[-1])}{could}")
    more = f" and {len(undecided) - MAX_NAMED} more" if len(undecided) > MAX_NAMED else ""
    # where the run's conditions left every one undecided, their fix is what judges them
    fixes = list(dict.fromkeys(v.hint_text for v in undecided if v.stage == CONDITIONS and v.hint_text))
    if fixes and all(v.stage == CONDITIONS for v in undecided):
        todo = f"to judge them: {'; '.join(fixes)}"
    elif settle:
        todo = f"to judge them, {settle}"
    else:
        todo = "to judge them: --bench-ab=REF (both sides in one job), more saves of the baseline, or a quieter runner"
    reach = threshold_within_reach(timed)
    if reach is not None:
        threshold, judged = reach
        todo += f"; or a threshold this machine can judge: --bench-threshold={threshold} ({judged} of {len(timed)})"
    todo += "" if failing else "; --bench-unresolved=fail fails them"
    if len(undecided) == len(timed):
        figures = kernel_figures_judged(verdicts)
        head = "NOTHING JUDGED" if not figures else f"NO TIMING JUDGED (the kernel figures of {figures} were)"
        return (
            f"{head}: all {len(timed)} timed benchmark(s) are INCONCLUSIVE: this run could not tell "
            f"whether they got slower by their threshold: {', '.join(named)}{more}; {todo}"
        )
    return (
        f"{len(undecided)} of {len(timed)} timed benchmark(s) INCONCLUSIVE, not judged at their threshold: "
        f"{', '.join(named)}{more}; {todo}"
    )


REACH_SHARE = 0.75  # the share of the timed benchmarks a suggested threshold lets the gate judge


def threshold_within_reach(timed: Sequence[Verdict]) -> tuple[int, int] | None:
    """(threshold in whole percent, benchmarks within reach of it): the smallest threshold at which
    the slowdown this run could catch is within reach for REACH_SHARE of the timed benchmarks (a
    decided one is); None where that is no higher than the run's threshold
    (the median of the benchmarks': one benchmark's own bench(threshold=) does not decide it), or
    100% or more (nothing a gate is for)."""
    from pytest_tesserabench.gate.conditions import STAGE as CONDITIONS

    def need(v: Verdict) -> float:  # (one the run's conditions left undecided: no threshold judges it)
        if v.status != "INCONCLUSIVE":
            return 0.0  # judged already, whatever the option says
        known = v.detectable is not None and math.isfinite(v.detectable)
        return v.detectable if known and v.stage != CONDITIONS else math.inf

    needs = sorted(need(v) for v in timed)
    if not needs:
        return None
    reach = needs[math.ceil(REACH_SHARE * len(needs)) - 1]
    if reach >= 1:
        return None
    threshold = math.ceil(reach * 100 - 1e-9)
    if threshold <= round(statistics.median(v.threshold or 0.0 for v in timed) * 100):
        return None
    return threshold, sum(need * 100 <= threshold + 1e-9 for need in needs)


def suite_line(state) -> str | None:
    return None if state.suite is None else state.suite.line()


def not_run_line(state) -> str | None:
    not_run = state.comparison.not_run(state.ran)
    if not not_run:
        return None
    return f"{not_run} baseline benchmark(s) belong to tests that did not run in this session (deselected or removed)"


MAX_NODEIDS = 6  # more undecided tests than this: their files are named instead
# Options of this run that the A/B run must be given too: how it measures and how it judges.
CARRIED_OPTIONS = (
    "--bench-threshold", "--bench-alpha", "--bench-max-time", "--bench-warmup", "--bench-min-rounds",
    "--bench-target-ci", "--bench-timer", "--bench-arch", "--bench-threads",
)  # fmt: skip


def settle_by_ab(state, config) -> str | None:
    """History mode: how to decide this run's INCONCLUSIVE verdicts in one job (see
    settle_advice), to be run where this run was, with this run's measuring and judging options."""
    params = config.invocation_params
    verdicts = state.all_verdicts()
    return settle_advice(verdicts, state.records, state.comparison.runs, state.context.rootdir, params.dir, params.args)


def settle_advice(verdicts, records, baseline_runs, rootdir: Path, where: Path, args) -> str | None:
    """How to decide the INCONCLUSIVE verdicts of ``records`` in one job: the command that
    measures them by A/B against the commit the baseline's newest run was recorded at (test
    paths relative to ``where``, the CARRIED_OPTIONS of the command line ``args``), or why there
    is none; None when there is nothing to decide, or ``rootdir`` is not a git checkout."""

    from pytest_tesserabench.ab import worktree

    undecided = [i for i, v in verdicts.items() if v.status == "INCONCLUSIVE" and i in records]
    commit = baseline_runs[-1].commit if baseline_runs else {}
    sha = commit.get("sha")
    if not undecided or not sha:
        return None
    if commit.get("dirty"):
        return (
            f"the baseline's newest run was recorded on a modified checkout of {sha[:12]}, so there is "
            "no commit to measure them beside in one job (--bench-ab=REF); record baselines on clean commits"
        )
    here = worktree.has_commit(rootdir, sha)
    if here is None:
        return None
    tests = []
    for nodeid in dict.fromkeys(records[i].nodeid for i in undecided):
        path, sep, rest = nodeid.partition("::")
        tests.append(os.path.relpath(Path(rootdir) / path, where) + sep + rest)
    if len(tests) > MAX_NODEIDS:
        tests = list(dict.fromkeys(t.split("::")[0] for t in tests))
    command = ["pytest", f"--bench-ab={sha[:12]}", *_carried(args), *tests]
    fetch = "" if here else f" (this clone lacks that commit, a shallow clone's way: `git fetch origin {sha}` first)"
    return (
        "measure them beside the baseline's commit in one job, which cancels the machine's drift: `"
        + " ".join(shlex.quote(part) for part in command)
        + "`"
        + fetch
    )


def _carried(args) -> list[str]:
    """This run's CARRIED_OPTIONS as `--name=value`, from its command line."""
    carried, args = [], list(args)
    for index, arg in enumerate(args):
        name, equals, value = arg.partition("=")
        if name not in CARRIED_OPTIONS:
            continue
        if not equals and index + 1 < len(args):
            value = args[index + 1]
        carried.append(f"{name}={value}")
    return carried


def _write_ab_section(terminalreporter, state, width: int) -> None:
    terminalreporter.write_sep("-", f"A/B: {state.reference.describe()}")
    records = {**state.ab_missing_records, **state.records}
    for line in comparison_lines(
        state.all_verdicts(),
        records=records,
        version_diffs=[],
        canary_ratio=None,
        width=width,
        canary=False,
        paired=True,
        hints=True,  # what would settle each INCONCLUSIVE one, a line each
    ):
        terminalreporter.write_line(line.text, **line.markup())
    text = ab_counts_line(state.records.values())
    if text:
        terminalreporter.write_line(text)


def ab_counts_line(records) -> str | None:
    """How many benchmarks A/B compared, in how many pairs, and how settling went."""
    compared = [r for r in records if r.ab and r.ab.decision]
    if not compared:
        return None
    pairs = sum(r.ab.decision.pairs for r in compared)
    processes = max(r.ab.decision.processes for r in compared)
    over = f" from {processes} process pairs" if processes > 1 else ""
    text = f"A/B: {len(compared)} benchmark(s) compared in {pairs} pairs of blocks{over}"
    settled = [r for r in compared if r.ab.settle_s]
    if settled:
        decided = sum(1 for r in settled if r.ab.decision.decided)
        seconds = sum(r.ab.settle_s for r in settled)
        text += f"; {len(settled)} needed settling ({seconds:.1f} s), {decided} decided by it"
        if decided < len(settled):  # (the rest judged by their interval when the budget ended)
            text += f", {len(settled) - decided} judged when its budget ended"
    return text
