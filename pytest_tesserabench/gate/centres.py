"""A run's centre of one benchmark: what the gate compares, in log milliseconds.

A round median is already robust to the odd slow repetition; logs make a slowdown and a speed-up
of the same factor symmetric. Measured in interleaved passes (passes.py), the centre is the
**lowest of the passes' centres**, each the median of its rounds: a machine's interference only
ever slows, and the fastest pass is the one it touched least. Not the median of all rounds
pooled (it flips between a machine's two speeds with how many rounds each pass took), nor the
mean or median of the passes (a slow stretch over one or two passes of four moves them by a share
of it). docs/gate-evidence.md has the runs that chose it.
"""

from __future__ import annotations

import math

import numpy as np
from scipy import stats

from pytest_tesserabench.record.results import BenchRecord

# (UNGATED_TIMERS: Triton's CPU interpreter says nothing of a kernel on a GPU, and its swings must
# not move any other benchmark's shift either.)
MEDIAN_VARIANCE_FACTOR = math.pi / 2  # variance of a median relative to a mean's, normal data
NORMAL_MAD = 1 / stats.norm.ppf(0.75)  # a MAD times this estimates a normal sd


def median_factor(n) -> np.ndarray:
    """Variance of a median of n values relative to one value's, over 1/n: 1 for n <= 2 (the
    median of two is their mean), pi/2 beyond (its large-sample value; slightly conservative)."""
    return np.where(np.asarray(n) <= 2, 1.0, MEDIAN_VARIANCE_FACTOR)


def summarise_rounds(log_rounds: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per run, along the last axis: (centre: the median, within-run variance: a normal-consistent
    MAD squared, number of rounds)."""
    log_rounds = np.asarray(log_rounds, dtype=float)
    n = np.full(log_rounds.shape[:-1], log_rounds.shape[-1])
    centre = np.median(log_rounds, axis=-1)
    if log_rounds.shape[-1] < 2:
        return centre, np.zeros_like(centre), n
    return centre, robust_sd(log_rounds) ** 2, n


def robust_sd(values, axis: int = -1) -> np.ndarray:
    """The normal-consistent median absolute deviation (scipy's ``median_abs_deviation(scale=
    "normal")``, without its per-call overhead: the gate takes thousands)."""
    values = np.asarray(values, dtype=float)
    centre = np.median(values, axis=axis, keepdims=True)
    return NORMAL_MAD * np.median(np.abs(values - centre), axis=axis)


def passes_of(record: BenchRecord) -> list[np.ndarray] | None:
    """The record's round medians (ms, positive) split into its interleaved passes, in order;
    None when it was measured in one pass (or its counts do not fit its rounds)."""
    counts = list(record.sampling.pass_rounds) if record.sampling is not None else []
    rounds = np.asarray(record.measured_rounds, dtype=float)
    if len(counts) < 2 or sum(counts) > rounds.size:
        return None
    return np.split(rounds, np.cumsum(counts[:-1]))


def record_summary(record: BenchRecord) -> tuple[float, float, int] | None:
    """(centre, within-run variance, rounds) of one record, or None without rounds. In passes:
    the lowest pass centre, and the variance within the passes."""
    rounds = np.log(np.asarray(record.measured_rounds, dtype=float))
    if not rounds.size:
        return None
    split = passes_of(record)
    if split is None:
        centre, within, n = summarise_rounds(rounds)
        return float(centre), float(within), int(n)
    summaries = [summarise_rounds(np.log(part)) for part in split if part.size]
    weights = np.array([max(int(n) - 1, 0) for _, _, n in summaries], dtype=float)
    within_by_pass = np.array([float(w) for _, w, _ in summaries])
    within = float((weights * within_by_pass).sum() / weights.sum()) if weights.sum() > 0 else 0.0
    return float(min(float(c) for c, _, _ in summaries)), within, int(rounds.size)


def log_centre(record: BenchRecord) -> float | None:
    """A record's centre (log ms); None without rounds, or where its timings are never gated."""
    summary = record_summary(record) if record.timing_gated else None
    return None if summary is None else summary[0]


def passes_centre(pass_rounds_ms: list[list[float]]) -> float | None:
    """The centre (log) of some passes of one benchmark, each given by its round medians (ms), as
    record_summary combines them; None without rounds."""
    centres = [float(np.median(np.log(r))) for r in ([x for x in p if x > 0] for p in pass_rounds_ms) if r]
    return min(centres) if centres else None


def pass_centres(record: BenchRecord) -> list[float]:
    """The centre (log) of each of a record's passes, in order (one entry, the run's centre, in one
    pass); empty without rounds, or where its timings are never gated."""
    if not record.timing_gated:
        return []
    split = passes_of(record)
    if split is None:
        centre = log_centre(record)
        return [] if centre is None else [centre]
    return [c for c in (passes_centre([list(part)]) for part in split) if c is not None]


def earlier_passes_centre(memory, record: BenchRecord) -> float | None:
    """The centre (log) of a record's passes before its last, corrected for the memory's speed as
    the plugin corrected it then (``memory``: gate.memory.MemoryModel, from the memory canary after
    each of those passes): what it knew of this benchmark while the last pass judged the ones
    before it. None in one pass."""
    split = passes_of(record)
    if split is None:
        return None
    readings = list(record.sampling.memory_canary) if record.sampling is not None else []
    earlier = readings[:-1] if len(readings) == len(split) else []
    return memory.passes_centre(record.id, [list(part) for part in split[:-1]], earlier)
