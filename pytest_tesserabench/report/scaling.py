"""Scaling: the same benchmarks run at several world sizes (``torchrun --nproc-per-node=N``), read
from their run files (``machine.world_size``; 1 for a run without torchrun).

Against the smallest world size n0 with median time T0, at n ranks with median T:

- speed-up ``T0 / T``;
- strong-scaling efficiency ``(T0 / T) * n0 / n`` for a benchmark whose *total* problem is fixed
  (split over the ranks, like the suite's row-parallel linear layer): 1.0 is perfect, n times
  the ranks in 1/n of the time;
- weak-scaling efficiency ``T0 / T`` for a benchmark whose problem *per rank* is fixed: 1.0 is
  perfect, the same time on more ranks.

Which of the two applies depends on how the benchmark sizes its problem; the table shows both.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table

from pytest_tesserabench.record.results import RunDocument
from pytest_tesserabench.record.units import format_ms


class ScalingError(ValueError):
    """Runs that cannot be compared; the message names the files."""


@dataclass(frozen=True)
class Point:
    world_size: int
    median_ms: float
    speedup: float
    strong_efficiency: float
    weak_efficiency: float


def world_size(run: RunDocument) -> int:
    return int(run.machine.get("world_size") or 1)


def scaling(runs: list[tuple[str, RunDocument]]) -> dict[str, list[Point]]:
    """Per benchmark id measured at two or more world sizes, its points by world size.

    ``runs`` are (label, run) pairs; two runs at the same world size are an error naming both.
    """
    seen: dict[int, str] = {}
    times: dict[str, dict[int, float]] = {}
    for label, run in runs:
        n = world_size(run)
        if n in seen:
            raise ScalingError(
                f"{seen[n]} and {label} both ran on {n} rank(s); give one run per world size "
                "(tesserabench compare compares runs of the same size)"
            )
        seen[n] = label
        for record_id, record in run.benchmarks.items():
            if record.median_ms:
                times.setdefault(record_id, {})[n] = record.median_ms
    table: dict[str, list[Point]] = {}
    for record_id, by_size in times.items():
        if len(by_size) < 2:
            continue
        n0 = min(by_size)
        t0 = by_size[n0]
        table[record_id] = [Point(n, t, t0 / t, (t0 / t) * n0 / n, t0 / t) for n, t in sorted(by_size.items())]
    return table


def render(table: dict[str, list[Point]], *, width: int = 120) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, no_color=True, color_system=None, highlight=False, markup=False)
    out = Table(title="scaling against the smallest world size", title_justify="left")
    for column in ("benchmark", "ranks", "median", "speed-up", "strong eff.", "weak eff."):
        out.add_column(column, justify="left" if column == "benchmark" else "right", overflow="fold")
    for record_id, points in table.items():
        for i, p in enumerate(points):
            out.add_row(
                record_id if i == 0 else "",
                str(p.world_size),
                format_ms(p.median_ms),
                f"{p.speedup:.2f}x",
                f"{p.strong_efficiency:.0%}",
                f"{p.weak_efficiency:.0%}",
            )
    console.print(out)
    return buffer.getvalue()
