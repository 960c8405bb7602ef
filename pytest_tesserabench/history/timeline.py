"""`tesserabench history NAME`: each benchmark's saved runs in order, and the steps found in them.

Reads a baseline's runs (per machine file), makes one series per benchmark of its run medians and
intervals (history/steps.py finds the steps), and prints per benchmark its runs and its steps,
with a creep (a slowdown past the threshold in steps each too small to fail) said on its own line.
"""

from __future__ import annotations

import io
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_tesserabench.history import steps as steps_
from pytest_tesserabench.record.results import RunDocument
from pytest_tesserabench.record.units import format_ms, format_started

# Kernels run in Triton's interpreter: CPU time of Python emulating a GPU, no history of the kernel.
INTERPRETED = "interpreter"

# Steps and creep are looked for in the latest runs only: the segmentation's cost grows with the
# square of the runs (a baseline of 10,000 runs took minutes), and a step of long ago is history.
LATEST_RUNS = 200

# A run's shared shift is read from this many benchmarks at least; with fewer, a step of one of
# them would be half the shift, and no shift is taken out.
MIN_SHARED = 3


@dataclass(frozen=True)
class Point:
    run: int  # 1-based, in saved order
    started: str | None
    commit: str
    median_ms: float
    ci95_ms: tuple[float, float] | None
    shift: float = 0.0  # the run's shared shift (log): what moved every benchmark of that run

    @property
    def adjusted_ms(self) -> float:
        return self.median_ms / math.exp(self.shift)


def shared_shifts(runs: Sequence[RunDocument]) -> list[float]:
    """Per run, the median over its benchmarks of how far each sat from its own usual level (log
    medians less each benchmark's median over the runs): what moved the whole run, the machine's
    speed or a change that touched everything. 0 where fewer than MIN_SHARED benchmarks tell."""
    logs: dict[str, dict[int, float]] = {}
    for number, run in enumerate(runs):
        for record_id, record in run.benchmarks.items():
            if record.stats is not None and record.stats.median_ms > 0 and record.timer != INTERPRETED:
                logs.setdefault(record_id, {})[number] = math.log(record.stats.median_ms)
    usual = {i: statistics.median(by_run.values()) for i, by_run in logs.items()}
    shifts = []
    for number in range(len(runs)):
        away = [by_run[number] - usual[i] for i, by_run in logs.items() if number in by_run]
        shifts.append(statistics.median(away) if len(away) >= MIN_SHARED else 0.0)
    return shifts


def latest(runs: Sequence[RunDocument]) -> tuple[Sequence[RunDocument], int]:
    """The runs steps are looked for in (the latest LATEST_RUNS), and the number of the first."""
    kept = runs[-LATEST_RUNS:]
    return kept, len(runs) - len(kept) + 1


def series(
    runs: Sequence[RunDocument], shifts: Sequence[float] | None = None, first: int = 1
) -> dict[str, list[Point]]:
    """Benchmark id -> its points, in saved order (runs that did not measure it are skipped),
    each with its run's shared shift (``shifts``: shared_shifts(runs), computed when not given);
    ``first``: the number of the first run."""
    shifts = shared_shifts(runs) if shifts is None else shifts
    out: dict[str, list[Point]] = {}
    for number, run in enumerate(runs, first):
        sha = str(run.commit.get("sha") or "-")[:8] + ("+dirty" if run.commit.get("dirty") else "")
        for record_id, record in run.benchmarks.items():
            if record.stats is None or not record.stats.median_ms > 0 or record.timer == INTERPRETED:
                continue
            ci = tuple(record.stats.ci95_ms) if record.stats.ci95_ms else None
            point = Point(number, run.started, sha, record.stats.median_ms, ci, shifts[number - first])
            out.setdefault(record_id, []).append(point)
    return out


def _half_width(point: Point) -> float | None:
    if point.ci95_ms is None or not (point.ci95_ms[0] > 0 and point.ci95_ms[1] > 0):
        return None
    return (math.log(point.ci95_ms[1]) - math.log(point.ci95_ms[0])) / 2


def steps_of(points: Sequence[Point], *, alpha: float) -> list[steps_.Step]:
    """The steps of a benchmark's own level: its medians less each run's shared shift."""
    return steps_.find_steps([p.adjusted_ms for p in points], [_half_width(p) for p in points], alpha=alpha)


def suite_steps(shifts: Sequence[float], *, alpha: float) -> list[steps_.Step]:
    """The steps the runs' shared shift itself took: every benchmark moved together."""
    if not any(shifts):
        return []
    return steps_.find_steps([math.exp(s) for s in shifts], alpha=alpha)


def render(
    title: str,
    runs: Sequence[RunDocument],
    *,
    pattern: str | None,
    threshold: float,
    alpha: float,
    width: int,
    shown_as=str,
) -> tuple[str, int, int]:
    """The text for one machine's runs, how many benchmarks have a step or a creep, and how many
    were shown; ``shown_as``: how a benchmark's id is printed (names are data: the command
    escapes them)."""
    # rich (~30 ms): a --bench run's terminal report imports this module for creeping() alone
    from rich import box
    from rich.console import Console
    from rich.table import Table

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, no_color=True, color_system=None, highlight=False, markup=False)
    console.print(title, soft_wrap=True)
    total = len(runs)
    runs, first = latest(runs)
    if first > 1:
        console.print(f"  the latest {len(runs)} of {total} runs (steps are looked for in those)")
    shifts = shared_shifts(runs)
    adjusted = any(shifts)
    if adjusted:
        console.print("  each run's shared shift (the median move of its benchmarks) is taken out before steps are")
        console.print("  looked for; what moved every benchmark together (the machine, or a change to all) is here:")
        found_suite = suite_steps(shifts, alpha=alpha)
        for step in found_suite:
            console.print(
                f"  the whole run stepped {step.ratio - 1:+.1%} at run {step.index + first} "
                f"({format_started(runs[step.index].started)}), confidence {step.confidence:.1%}"
            )
        if not found_suite:
            console.print("  the shared shift took no step")
    flagged = 0
    chosen = {i: p for i, p in series(runs, shifts, first).items() if pattern is None or pattern.lower() in i.lower()}
    if not chosen:
        console.print(f"  no benchmark{f' matching {pattern!r}' if pattern else ''} with a timing in these runs")
    columns = [("#", True), ("started", False), ("commit", False), ("median", True), ("95% interval", True)]
    if adjusted:
        columns.append(("run shift", True))
    for record_id, points in chosen.items():
        found = steps_of(points, alpha=alpha)
        creeping = steps_.creep(
            [p.adjusted_ms for p in points], found, threshold, half_widths=[_half_width(p) for p in points], alpha=alpha
        )
        flagged += bool(found) or creeping is not None
        console.print(f"\n{shown_as(record_id)}", soft_wrap=True)
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for column, right in columns:
            table.add_column(column, justify="right" if right else "left", no_wrap=True)
        starts = {step.index: step for step in found}
        for position, point in enumerate(points):
            if position in starts:
                step = starts[position]
                marker = [f"step {step.ratio - 1:+.1%}", f"confidence {step.confidence:.1%}"]
                table.add_row("", *marker, *[""] * (len(columns) - 3))
            interval = f"[{format_ms(point.ci95_ms[0])}, {format_ms(point.ci95_ms[1])}]" if point.ci95_ms else "-"
            row = [str(point.run), format_started(point.started), point.commit, format_ms(point.median_ms), interval]
            shift = math.expm1(point.shift)
            table.add_row(*row, *([f"{shift if abs(shift) >= 5e-4 else 0.0:+.1%}"] if adjusted else []))
        console.print(table)
        for step in found:
            after = points[step.index]
            console.print(
                f"  step {step.ratio - 1:+.1%} ({format_ms(step.before_ms)} -> {format_ms(step.after_ms)}"
                f"{', shared shift taken out' if adjusted else ''}), confidence {step.confidence:.1%}, first in run "
                f"{after.run} ({after.commit}, {format_started(after.started)})"
            )
        if not found:
            console.print(f"  no step in {len(points)} run(s) at alpha {alpha:g}")
        if creeping is not None:
            console.print(
                f"  creep: the latest runs are {creeping:+.1%} slower than the earliest, with no single step "
                f"past the {threshold:.0%} threshold"
            )
    return buffer.getvalue(), flagged, len(chosen)


def creeping(runs: Sequence[RunDocument], ids, threshold: float, *, alpha: float = 0.01) -> dict[str, float]:
    """Of the benchmarks ``ids``, those whose baseline crept: id -> the slowdown from its earliest
    runs to its latest, past ``threshold`` with no single step that large. Without ruptures every
    slowdown past the threshold counts (the steps cannot be told)."""
    chosen = set(ids)
    out = {}
    for record_id, points in series(latest(runs)[0]).items():
        if record_id not in chosen:
            continue
        try:
            found = steps_of(points, alpha=alpha)
        except steps_.MissingLibrary:
            found = []
        change = steps_.creep(
            [p.adjusted_ms for p in points], found, threshold, half_widths=[_half_width(p) for p in points], alpha=alpha
        )
        if change is not None:
            out[record_id] = change
    return out
