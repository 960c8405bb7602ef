"""`tesserabench history NAME`: each benchmark's saved runs in order, and the steps found in them.

Reads a baseline's runs (per machine file), makes one series per benchmark of its run medians and
intervals (history/steps.py finds the steps), and prints per benchmark its runs and its steps,
with a creep (a slowdown past the threshold in steps each too small to fail) said on its own line.
"""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from dataclasses import dataclass

from pytest_tesserabench.history import steps as steps_
from pytest_tesserabench.record.results import RunDocument
from pytest_tesserabench.record.units import format_ms, format_started


@dataclass(frozen=True)
class Point:
    run: int  # 1-based, in saved order
    started: str | None
    commit: str
    median_ms: float
    ci95_ms: tuple[float, float] | None


def series(runs: Sequence[RunDocument]) -> dict[str, list[Point]]:
    """Benchmark id -> its points, in saved order (runs that did not measure it are skipped)."""
    out: dict[str, list[Point]] = {}
    for number, run in enumerate(runs, 1):
        sha = str(run.commit.get("sha") or "-")[:8] + ("+dirty" if run.commit.get("dirty") else "")
        for record_id, record in run.benchmarks.items():
            if record.stats is None or not record.stats.median_ms > 0:
                continue
            ci = tuple(record.stats.ci95_ms) if record.stats.ci95_ms else None
            out.setdefault(record_id, []).append(Point(number, run.started, sha, record.stats.median_ms, ci))
    return out


def _half_width(point: Point) -> float | None:
    if point.ci95_ms is None or not (point.ci95_ms[0] > 0 and point.ci95_ms[1] > 0):
        return None
    return (math.log(point.ci95_ms[1]) - math.log(point.ci95_ms[0])) / 2


def steps_of(points: Sequence[Point], *, alpha: float) -> list[steps_.Step]:
    return steps_.find_steps([p.median_ms for p in points], [_half_width(p) for p in points], alpha=alpha)


def render(
    title: str, runs: Sequence[RunDocument], *, pattern: str | None, threshold: float, alpha: float, width: int
) -> tuple[str, int]:
    """The text for one machine's runs, and how many benchmarks have a step or a creep."""
    from rich import box
    from rich.console import Console
    from rich.table import Table

    buffer = io.StringIO()
    console = Console(file=buffer, width=width, no_color=True, color_system=None, highlight=False, markup=False)
    console.print(title, soft_wrap=True)
    flagged = 0
    chosen = {i: p for i, p in series(runs).items() if pattern is None or pattern.lower() in i.lower()}
    if not chosen:
        console.print(f"  no benchmark{f' matching {pattern!r}' if pattern else ''} with a timing in these runs")
    for record_id, points in chosen.items():
        found = steps_of(points, alpha=alpha)
        creeping = steps_.creep([p.median_ms for p in points], found, threshold)
        flagged += bool(found) or creeping is not None
        console.print(f"\n{record_id}", soft_wrap=True)
        table = Table(box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
        for column, right in (
            ("#", True),
            ("started", False),
            ("commit", False),
            ("median", True),
            ("95% interval", True),
        ):
            table.add_column(column, justify="right" if right else "left", no_wrap=True)
        starts = {step.index: step for step in found}
        for position, point in enumerate(points):
            if position in starts:
                step = starts[position]
                table.add_row("", f"step {step.ratio - 1:+.1%}", f"confidence {step.confidence:.1%}", "", "")
            interval = f"[{format_ms(point.ci95_ms[0])}, {format_ms(point.ci95_ms[1])}]" if point.ci95_ms else "-"
            table.add_row(
                str(point.run), format_started(point.started), point.commit, format_ms(point.median_ms), interval
            )
        console.print(table)
        for step in found:
            after = points[step.index]
            console.print(
                f"  step {step.ratio - 1:+.1%} ({format_ms(step.before_ms)} -> {format_ms(step.after_ms)}), "
                f"confidence {step.confidence:.1%}, first in run {after.run} "
                f"({after.commit}, {format_started(after.started)})"
            )
        if not found:
            console.print(f"  no step in {len(points)} run(s) at alpha {alpha:g}")
        if creeping is not None:
            console.print(
                f"  creep: the latest runs are {creeping:+.1%} slower than the earliest, in steps each under "
                f"the {threshold:.0%} threshold"
            )
    return buffer.getvalue(), flagged


def creeping(runs: Sequence[RunDocument], ids, threshold: float, *, alpha: float = 0.01) -> dict[str, float]:
    """Of the benchmarks ``ids``, those whose baseline crept: id -> the slowdown from its earliest
    runs to its latest, past ``threshold`` with no single step that large. Without ruptures every
    slowdown past the threshold counts (the steps cannot be told)."""
    chosen = set(ids)
    out = {}
    for record_id, points in series(runs).items():
        if record_id not in chosen:
            continue
        try:
            found = steps_of(points, alpha=alpha)
        except steps_.MissingLibrary:
            found = []
        change = steps_.creep([p.median_ms for p in points], found, threshold)
        if change is not None:
            out[record_id] = change
    return out
