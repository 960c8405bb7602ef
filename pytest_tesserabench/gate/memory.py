"""The machine's memory speed as a covariate of history mode.

A shared host serves memory at speeds that change from one second to the next (other tenants
fill its shared cache and memory bus). A benchmark that streams memory reads them as changes of
its own time, 10-30%, in every process measured during a slow stretch, fresh ones too; a
benchmark that stays in its core's caches does not, and neither does the sorting canary. The
memory canary (measure/canary.py), timed after each pass, reads the memory's speed of that
moment against the CPU's (a ratio: a slow CPU slows every benchmark and is the run's shift's and
the passes' business, not this correction's).

A process's centre is its fastest pass (centres.py), and the canary after that pass says how fast
the memory was then. Per benchmark, the slope of the baseline's process centres on those
readings (log on log) says how much of the memory's slowness its time takes; the whole record,
the baseline's processes and the candidate's, is scaled by the slope from its reading to the
median of the baseline's before the gate reads it. Centres, not passes: a benchmark's passes slow
together for reasons of their own, and a slope fitted on them corrects a centre for noise.

The slope is a ridge estimate (the posterior mean under a normal prior centred on 0,
GateConfig.memory_slope_prior), so a benchmark whose centres scatter for other reasons, or a
baseline whose canary hardly moved, is barely corrected; and it is never negative: slower memory
speeds nothing up. The slope's own error is not added to a verdict's variance: the shrinkage
keeps an uncertain slope near 0, and the term widened every benchmark's interval whenever the
memory moved, for fewer slowdowns caught and hardly fewer false alarms (the pipeline simulation).
Records without a canary per pass (older files, GPU timers) are left as they are.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np

from pytest_tesserabench.gate.centres import log_centre, pass_centres, passes_centre
from pytest_tesserabench.record.results import BenchRecord, RunDocument

RESIDUAL_FLOOR = 1e-8  # log^2: centres that agreed exactly still carry a little noise
MIN_PROCESSES = 4  # baseline processes with a reading before a slope is fitted (the line and its residual)


@dataclass(frozen=True)
class Slope:
    """One benchmark's share of the memory's slowness (log on log), as the baseline showed it."""

    value: float  # the ridge estimate, >= 0
    reference: float  # log: the canary (a ratio) after the baseline's centres (fastest passes), median over processes
    slowest: float = math.inf  # log: the highest of those readings, the slowest memory the slope was fitted on


@dataclass(frozen=True)
class MemoryModel:
    slopes: Mapping[str, Slope] = field(default_factory=dict)  # benchmark id -> its slope

    def adjusted(self, record: BenchRecord) -> BenchRecord:
        """``record`` scaled from the memory speed after its centre's pass to that of the
        baseline's centres (the record itself where there is nothing to correct)."""
        slope = self.slopes.get(record.id)
        canary = centre_canary(record)
        if slope is None or canary is None or slope.value == 0.0:
            return record
        factor = math.exp(-slope.value * (canary - slope.reference))
        return replace(record, rounds_ms=[ms * factor for ms in record.rounds_ms])

    def passes_centre(self, bench_id: str, passes_ms: list[list[float]], readings: list[float]) -> float | None:
        """The centre (log) of some passes of one benchmark (centres.passes_centre: its lowest pass),
        scaled as ``adjusted`` scales a record: from the memory canary after that pass (``readings``:
        one per pass) to the baseline's. What the plugin knows of a benchmark after its earlier
        passes, before the last one measures it; uncorrected without a reading per pass."""
        centres = [(c, k) for k, c in enumerate(passes_centre([p]) for p in passes_ms) if c is not None]
        if not centres:
            return None
        centre, lowest = min(centres)
        slope = self.slopes.get(bench_id)
        if slope is None or slope.value == 0.0 or len(readings) != len(passes_ms):
            return centre
        if not all(0 < r < math.inf for r in readings):  # (as pass_canaries reads a record's)
            return centre
        return centre - slope.value * (math.log(readings[lowest]) - slope.reference)

    def adjusted_run(self, run: RunDocument) -> RunDocument:
        if not self.slopes:
            return run
        return replace(run, benchmarks={i: self.adjusted(r) for i, r in run.benchmarks.items()})

    def move(self, bench_id: str, records: Iterable[BenchRecord]) -> float | None:
        """How far (log) the memory speed after ``records``' centres (their fastest passes) lies
        from the baseline's (the median over processes), or None where either has none."""
        here = _median_reading(records)
        slope = self.slopes.get(bench_id)
        return None if slope is None or here is None else here - slope.reference

    def beyond(self, bench_id: str, records: Iterable[BenchRecord]) -> float | None:
        """How far (log) the memory speed after ``records``' centres lies past the slowest the
        baseline's slope was fitted on, where it does: there the slope says nothing, as a baseline
        whose saves all met a fast memory learns no slope at all."""
        here = _median_reading(records)
        slope = self.slopes.get(bench_id)
        return None if slope is None or here is None or here <= slope.slowest else here - slope.slowest


def _median_reading(records: Iterable[BenchRecord]) -> float | None:
    """The median (log) of the memory canary after each record's centre, or None where none has one."""
    here = [c for c in (centre_canary(r) for r in records) if c is not None]
    return float(np.median(here)) if here else None


OFF = MemoryModel()


def pass_canaries(record: BenchRecord) -> np.ndarray | None:
    """The log memory canary after each of ``record``'s passes, or None where it has not exactly
    one positive reading per pass (or is never gated)."""
    readings = record.sampling.memory_canary if record.sampling is not None else ()
    if not readings or not all(0 < r < math.inf for r in readings):  # (0: a clock that did not move, a fake's)
        return None
    return np.log(np.asarray(readings, dtype=float)) if len(pass_centres(record)) == len(readings) else None


def centre_canary(record: BenchRecord) -> float | None:
    """The log memory canary after the pass the record's centre comes from (its fastest), or None."""
    canaries = pass_canaries(record)
    if canaries is None:
        return None
    return float(canaries[int(np.argmin(pass_centres(record)))])


def fit(runs: list[RunDocument], prior_sd: float) -> MemoryModel:
    """Each benchmark's slope on the memory canary from the baseline's processes (``runs``: each
    process a run; MIN_PROCESSES at least), or OFF where the baseline has no canaries or
    ``prior_sd`` is 0."""
    if prior_sd <= 0:
        return OFF
    slopes = {}
    for bench_id in dict.fromkeys(i for run in runs for i in run.benchmarks):
        pairs = []
        for run in runs:
            record = run.benchmarks.get(bench_id)
            canary = centre_canary(record) if record is not None else None
            if canary is not None:
                pairs.append((canary, log_centre(record)))
        if len(pairs) < MIN_PROCESSES:
            continue
        x, y = (np.array(column) for column in zip(*pairs))
        x0, y0 = x - x.mean(), y - y.mean()
        sxx, sxy = float(x0 @ x0), float(x0 @ y0)
        least = sxy / sxx if sxx > 0 else 0.0
        residual = max(float(np.sum((y0 - least * x0) ** 2)) / (len(pairs) - 2), RESIDUAL_FLOOR)
        precision = sxx + residual / prior_sd**2
        slopes[bench_id] = Slope(max(sxy / precision, 0.0), float(np.median(x)), float(np.max(x)))
    return MemoryModel(slopes) if slopes else OFF
