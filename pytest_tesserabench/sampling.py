"""The sampling plan: warm-up by time, calibration, rounds, and the stopping rule.

A benchmark is measured in rounds; each round yields its median. Measuring stops when the 95%
interval of the median of round medians is within ``target_ci`` of it (after at least
``min_rounds`` rounds), or when ``max_time`` is spent, in which case the result is ``noisy``.
The clock is injectable so the rule can be tested without real time.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pytest_tesserabench import stats

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


@dataclass(frozen=True)
class Plan:
    """What warm-up and calibration decided: how a round is made."""

    samples_per_round: int
    warmup_calls: int
    inner_loops: int


def warm_up(timer: Timer, budget: Budget, *, clock: Callable[[], float] = time.perf_counter) -> Plan:
    """Warm up for ``budget.warmup`` seconds (at least one call), then calibrate the timer and
    size rounds to about ``max_time / ROUNDS_PER_BUDGET``."""
    start = clock()
    durations = []
    while True:  # at least one warm-up call: first-call costs (compilation, caches) stay out
        durations.append(timer.time_once())
        if clock() - start >= budget.warmup:
            break
    # The last warm-up calls are the best estimate of steady-state cost.
    per_call = max(statistics.median(durations[-5:]), 1e-9)
    timer.calibrate(per_call)
    sample_s = per_call * timer.inner
    round_s = budget.max_time / ROUNDS_PER_BUDGET
    samples_per_round = int(min(MAX_SAMPLES_PER_ROUND, max(1, round_s // sample_s)))
    return Plan(samples_per_round=samples_per_round, warmup_calls=len(durations), inner_loops=timer.inner)


def take_round(timer: Timer, plan: Plan, into: Measurement) -> float:
    """One round: its samples and median go into ``into``; returns the median (ms)."""
    samples = timer.round(plan.samples_per_round)
    into.samples_ms.extend(samples)
    median = statistics.median(samples)
    into.rounds_ms.append(median)
    return median


def start_measurement(timer: Timer, plan: Plan) -> Measurement:
    return Measurement(
        timer=timer.name,
        warmup_calls=plan.warmup_calls,
        inner_loops=plan.inner_loops,
        samples_per_round=plan.samples_per_round,
    )


def measure(
    timer: Timer,
    budget: Budget,
    *,
    plan: Plan | None = None,
    clock: Callable[[], float] = time.perf_counter,
    on_round: Callable[[list[float], float, float | None], None] | None = None,
) -> Measurement:
    """Warm up for ``budget.warmup`` seconds (unless ``plan`` says how, from an earlier warm-up),
    then time rounds until the stopping rule fires.

    ``on_round(round medians so far, seconds measured, relative half-width of the median's 95%
    interval or None)`` is called after each round (the terminal's status line)."""
    plan = plan or warm_up(timer, budget, clock=clock)
    result = start_measurement(timer, plan)
    measuring_since = clock()
    while True:
        take_round(timer, plan, result)
        elapsed = clock() - measuring_since
        enough_rounds = len(result.rounds_ms) >= budget.min_rounds
        halfwidth = stats.relative_ci_halfwidth(result.rounds_ms) if enough_rounds or on_round else math.inf
        if on_round is not None:
            on_round(result.rounds_ms, elapsed, halfwidth if math.isfinite(halfwidth) else None)
        if enough_rounds and halfwidth <= budget.target_ci:
            result.stop_reason = "converged"
            break
        if enough_rounds and elapsed >= budget.max_time:
            result.stop_reason = "max_time"
            result.noisy = True
            break
        if len(result.rounds_ms) >= MAX_ROUNDS:
            result.stop_reason = "max_rounds"
            result.noisy = True
            break
    result.elapsed_s = clock() - measuring_since
    return result


class LocalMeasurer:
    """How ``bench()`` measures by default: all rounds here, nothing compared while measuring."""

    def measure(self, timer: Timer, budget: Budget, *, name: str | None, threshold: float, on_round=None):
        return measure(timer, budget, on_round=on_round), None
