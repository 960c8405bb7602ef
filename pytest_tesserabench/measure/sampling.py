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

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pytest_tesserabench.machine.ranks import SOLO, Ranks


def _stats():
    """The statistics module (numpy, ~120 ms), imported when something is measured: a pytest run
    without --bench loads this module and must not pay for numpy."""
    from pytest_tesserabench.record import stats

    return stats


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
    run_queue_wait_s: float = 0.0  # waiting for a CPU, left out of the samples (see run_queue)
    others_cpu_s: float = 0.0  # CPU time other processes used during the rounds (see neighbours)
    others_wall_s: float = 0.0  # the wall time of those rounds
    own_cpu_s: float = 0.0  # CPU time this process (all its threads) used during those rounds
    passes: int = 1  # interleaved passes over the suite its rounds come from (see passes.py)
    pass_rounds: list[int] = field(default_factory=list)  # rounds per pass, when several
    pool_canary_ms: list[float] = field(default_factory=list)  # per pass of a multi-threaded benchmark (canary.py)
    blas_canary_ms: list[float] = field(default_factory=list)  # the same, in a process without torch
    memory_canary: list[float] = field(default_factory=list)  # per pass of a CPU benchmark (canary.py)

    @property
    def calls(self) -> int:
        """Calls made while measuring (for energy per call)."""
        return len(self.samples_ms) * self.inner_loops

    def summary(self) -> dict:
        return _stats().summarize(self.rounds_ms, self.samples_ms, noisy=self.noisy)


@dataclass(frozen=True)
class Plan:
    """What warm-up and calibration decided: how a round is made."""

    samples_per_round: int
    warmup_calls: int
    inner_loops: int


def warm_up(
    timer: Timer, budget: Budget, *, clock: Callable[[], float] = time.perf_counter, ranks: Ranks = SOLO
) -> Plan:
    """Warm up for ``budget.warmup`` seconds (at least one call), then calibrate the timer and
    size rounds to about ``max_time / ROUNDS_PER_BUDGET``; every rank agrees on both."""
    __tracebackhide__ = True  # a user's error shows in their code, not in the plugin's frames
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
    return Plan(samples_per_round=samples_per_round, warmup_calls=len(durations), inner_loops=timer.inner)


# A process warming up after another of its side has warmed up and calibrated (A/B's served
# processes): this share of --bench-warmup, and at least FOLLOWER_CALLS calls, is enough to leave
# first-call costs behind; the round size comes from the leader's full warm-up, as few calls
# cannot size it (a 5 ms call calibrated on one or two calls sizes its rounds wrong).
FOLLOWER_SHARE = 0.25
FOLLOWER_CALLS = 3


def warm_up_like(timer: Timer, budget: Budget, leader: Plan, *, clock: Callable[[], float] = time.perf_counter) -> Plan:
    """A short warm-up (FOLLOWER_SHARE of ``budget.warmup``, at least FOLLOWER_CALLS calls) taking
    ``leader``'s plan: its calls per sample and samples per round, so every process of a side
    measures rounds of one size."""
    __tracebackhide__ = True
    start = clock()
    durations = []
    while len(durations) < FOLLOWER_CALLS or clock() - start < budget.warmup * FOLLOWER_SHARE:
        durations.append(timer.time_once())
    timer.calibrate(max(statistics.median(durations[-5:]), 1e-9))  # (a timer's own state: a GPU's enqueue time)
    timer.inner = leader.inner_loops
    return Plan(samples_per_round=leader.samples_per_round, warmup_calls=len(durations), inner_loops=leader.inner_loops)


def _timed_round(timer: Timer, plan: Plan, into: Measurement) -> list[float]:
    """The samples of one round; the time they left out waiting for a CPU goes into ``into``."""
    __tracebackhide__ = True
    counted = ("run_queue_wait_ns", "others_cpu_ns", "others_wall_ns", "own_cpu_ns")  # CPU timers count them
    before = [getattr(timer, name, 0) for name in counted]
    samples = timer.round(plan.samples_per_round)
    waited, others_cpu, others_wall, own_cpu = ((getattr(timer, name, 0) - b) / 1e9 for name, b in zip(counted, before))
    into.run_queue_wait_s += waited
    into.others_cpu_s += others_cpu
    into.others_wall_s += others_wall
    into.own_cpu_s += own_cpu
    return samples


def take_round(timer: Timer, plan: Plan, into: Measurement) -> float:
    """One round (of this process alone): its samples and median go into ``into``; returns the median (ms)."""
    __tracebackhide__ = True
    samples = _timed_round(timer, plan, into)
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
    ranks: Ranks = SOLO,
) -> Measurement:
    """Warm up for ``budget.warmup`` seconds (unless ``plan`` says how, from an earlier warm-up),
    then time rounds until the stopping rule fires.

    With several ``ranks``, each round starts on a barrier and each sample is the slowest rank's.
    ``on_round(round medians so far, seconds measured, relative half-width of the median's 95%
    interval or None)`` is called after each round (the terminal's status line).
    """
    __tracebackhide__ = True
    plan = plan or warm_up(timer, budget, clock=clock, ranks=ranks)
    result = start_measurement(timer, plan)
    measuring_since = clock()
    while True:
        ranks.barrier()
        samples = _timed_round(timer, plan, result)
        *samples, elapsed = ranks.max([*samples, clock() - measuring_since])
        result.samples_ms.extend(samples)
        result.rounds_ms.append(statistics.median(samples))
        if on_round is not None:
            halfwidth = _stats().relative_ci_halfwidth(result.rounds_ms)
            on_round(result.rounds_ms, elapsed, halfwidth if math.isfinite(halfwidth) else None)
        stop = _stop_code(result.rounds_ms, elapsed, budget)
        if ranks.size > 1:
            stop = int(ranks.agree([stop])[0])
        if stop != _CONTINUE:
            result.stop_reason = _STOP_REASONS[stop]
            result.noisy = stop != _CONVERGED and budget.max_time > 0  # (no budget: a few rounds by design)
            break
    result.elapsed_s = ranks.max([clock() - measuring_since])[0]
    from pytest_tesserabench.measure import canary  # (numpy-free to import; torch only where the test loaded it)

    if ranks.size == 1 and timer.name == "cpu":
        result.memory_canary.append(canary.measure_memory_canary())
    if ranks.size == 1 and result.others_wall_s > 0:
        cpus = result.own_cpu_s / result.others_wall_s
        if cpus >= canary.POOL_CPUS:
            pool = canary.measure_pool_canary(round(cpus))
            if pool is not None:
                result.pool_canary_ms.append(pool)
            elif (blas := canary.measure_blas_canary()) is not None:  # (no torch in the process)
                result.blas_canary_ms.append(blas)
    return result


def _stop_code(rounds_ms: list[float], elapsed: float, budget: Budget) -> int:
    enough_rounds = len(rounds_ms) >= budget.min_rounds
    if enough_rounds and _stats().relative_ci_halfwidth(rounds_ms) <= budget.target_ci:
        return _CONVERGED
    if enough_rounds and elapsed >= budget.max_time:
        return _MAX_TIME
    if len(rounds_ms) >= MAX_ROUNDS:
        return _MAX_ROUNDS
    return _CONTINUE


class LocalMeasurer:
    """How ``bench()`` measures by default: all rounds here (or on every rank together), nothing
    compared while measuring."""

    def measure(
        self, timer: Timer, budget: Budget, *, name: str | None, threshold: float, on_round=None, ranks: Ranks = SOLO
    ):
        __tracebackhide__ = True
        return measure(timer, budget, on_round=on_round, ranks=ranks), None
