"""The sampling plan: warm-up by time, calibration, rounds, and the stopping rule.

A benchmark is measured in rounds; each round yields its median. Measuring stops when the 95%
interval of the median of round medians is within ``target_ci`` of it (after at least
``min_rounds`` rounds), or when ``max_time`` is spent, in which case the result is ``noisy``.
The clock is injectable so the rule can be tested without real time.

Under torchrun every rank runs this loop and every call of the measured function must be matched
on every rank (a collective waits for its peers), so every decision is taken from data all ranks
share: ``Ranks.max`` all-reduces with MAX, which is exact (no rounding, no order dependence), so
each rank gets bit-identical warm-up times, round samples and elapsed time; a round's sample is
the slowest rank's. The stop decision is then taken from rank 0 (``Ranks.agree``), so ranks on
different machines cannot diverge even by a floating-point hair. ``SOLO`` (one process) makes
all of it free.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pytest_tesserabench import stats
from pytest_tesserabench.ranks import SOLO, Ranks

# Rounds last about max_time / ROUNDS_PER_BUDGET, so a converging benchmark gets this many rounds.
ROUNDS_PER_BUDGET = 20
MAX_SAMPLES_PER_ROUND = 1000
MAX_ROUNDS = 1000


class Timer(Protocol):
    name: str
    inner: int

    def time_once(self) -> float: ...
    def calibrate(self, seconds_per_call: float) -> None: ...
    def round(self, samples: int) -> list[float]: ...


# Stop codes exchanged between ranks (a float vector carries them).
_CONTINUE, _CONVERGED, _MAX_TIME, _MAX_ROUNDS = 0, 1, 2, 3
_STOP_REASONS = {_CONVERGED: "converged", _MAX_TIME: "max_time", _MAX_ROUNDS: "max_rounds"}


@dataclass(frozen=True)
class Budget:
    max_time: float = 1.0  # seconds of measurement after warm-up
    min_rounds: int = 5
    warmup: float = 0.1  # seconds
    target_ci: float = 0.01  # relative half-width of the median's 95% interval


@dataclass
class Measurement:
    timer: str
    rounds_ms: list[float] = field(default_factory=list)
    samples_ms: list[float] = field(default_factory=list)
    noisy: bool = False
    stop_reason: str = ""
    warmup_calls: int = 0
    inner_loops: int = 1
    samples_per_round: int = 1
    elapsed_s: float = 0.0

    @property
    def calls(self) -> int:
        """Calls made while measuring (for energy per call)."""
        return len(self.samples_ms) * self.inner_loops

    def summary(self) -> dict:
        return stats.summarize(self.rounds_ms, self.samples_ms, noisy=self.noisy)


def measure(
    timer: Timer, budget: Budget, *, clock: Callable[[], float] = time.perf_counter, ranks: Ranks = SOLO
) -> Measurement:
    """Warm up for ``budget.warmup`` seconds, then time rounds until the stopping rule fires.

    With several ``ranks``, each round starts on a barrier and each sample is the slowest rank's.
    """
    start = clock()
    durations = []
    while True:  # at least one warm-up call: first-call costs (compilation, caches) stay out
        durations.append(timer.time_once())
        if ranks.max([clock() - start])[0] >= budget.warmup:
            break
    # The last warm-up calls are the best estimate of steady-state cost.
    per_call = ranks.max([max(statistics.median(durations[-5:]), 1e-9)])[0]
    timer.calibrate(per_call)
    sample_s = per_call * timer.inner
    round_s = budget.max_time / ROUNDS_PER_BUDGET
    samples_per_round = int(min(MAX_SAMPLES_PER_ROUND, max(1, round_s // sample_s)))
    if ranks.size > 1:  # the inner loop count and round length decide how many calls each rank makes
        inner, samples_per_round = (int(v) for v in ranks.agree([timer.inner, samples_per_round]))
        timer.inner = inner

    result = Measurement(
        timer=timer.name,
        warmup_calls=len(durations),
        inner_loops=timer.inner,
        samples_per_round=samples_per_round,
    )
    measuring_since = clock()
    while True:
        ranks.barrier()
        samples = timer.round(samples_per_round)
        *samples, elapsed = ranks.max([*samples, clock() - measuring_since])
        result.samples_ms.extend(samples)
        result.rounds_ms.append(statistics.median(samples))
        stop = _stop_code(result.rounds_ms, elapsed, budget)
        if ranks.size > 1:
            stop = int(ranks.agree([stop])[0])
        if stop != _CONTINUE:
            result.stop_reason = _STOP_REASONS[stop]
            result.noisy = stop != _CONVERGED
            break
    result.elapsed_s = ranks.max([clock() - measuring_since])[0]
    return result


def _stop_code(rounds_ms: list[float], elapsed: float, budget: Budget) -> int:
    enough_rounds = len(rounds_ms) >= budget.min_rounds
    if enough_rounds and stats.relative_ci_halfwidth(rounds_ms) <= budget.target_ci:
        return _CONVERGED
    if enough_rounds and elapsed >= budget.max_time:
        return _MAX_TIME
    if len(rounds_ms) >= MAX_ROUNDS:
        return _MAX_ROUNDS
    return _CONTINUE
