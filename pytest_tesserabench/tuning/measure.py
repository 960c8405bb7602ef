"""Timing configs with the plugin's own timers, and the gate's rule on the best two.

A config is timed by ``sampling.measure`` (warm-up by time, rounds, the stopping rule) with a
timer from ``timer_factory(config)``. On a GPU that is ``timing.CudaEventTimer``: CUDA events
around each repetition and the L2 cache flushed before each one, outside the timed window.
Tests inject a timer (and a clock) with known times, so strategies are checked without a GPU.

Every evaluation's wall time is counted (the first launch's JIT compile included: on a GPU it
is spent on the tuning machine either way): that is the figure strategies are compared on.

Is the best config really better than the runner-up? Both are measured again in alternation
(``runs`` times each, so drift between the two is shared), and the gate's decision rule
(``gate.rule.noise_components`` / ``gate.rule.decide``: log-space medians, within- and between-run noise,
Student's t) compares them: "better" when the best is significantly faster by more than the
noise, else "tied" (then either is a fine choice; the faster median is kept).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pytest_tesserabench.measure import sampling

from .space import Config

TimerFactory = Callable[[Config], sampling.Timer]

# Short enough to time hundreds of configs, long enough for the stopping rule to work:
# Triton's do_bench uses 25 ms of warm-up and 100 ms of repetitions.
TUNING_BUDGET = sampling.Budget(max_time=0.1, min_rounds=5, warmup=0.025, target_ci=0.01)


@dataclass
class Trial:
    """One evaluated config: its timing (round medians, ms) or the error that stopped it."""

    config: Config
    median_ms: float | None = None
    rounds_ms: list[float] = field(default_factory=list)
    seconds: float = 0.0  # wall time of this evaluation, compile and warm-up included
    noisy: bool = False
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and self.median_ms is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "config": self.config.to_json(),
            "median_ms": self.median_ms,
            "seconds": round(self.seconds, 4),
            "noisy": self.noisy,
            "error": self.error,
        }


class Evaluator:
    """``evaluator(config) -> Trial``; a config asked twice is timed once."""

    def __init__(
        self,
        timer_factory: TimerFactory,
        budget: sampling.Budget = TUNING_BUDGET,
        *,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self.timer_factory = timer_factory
        self.budget = budget
        self.clock = clock
        self.trials: dict[Config, Trial] = {}
        self.seconds = 0.0  # every evaluation and re-measurement

    def __call__(self, config: Config) -> Trial:
        if config in self.trials:
            return self.trials[config]
        trial = Trial(config=config)
        start = self.clock()
        try:
            measurement = self._measure(config)
        except Exception as error:  # noqa: BLE001 - a config that fails to run is recorded and skipped
            trial.error = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ''}"
        else:
            trial.rounds_ms = list(measurement.rounds_ms)
            trial.median_ms = float(measurement.summary()["median_ms"])
            trial.noisy = measurement.noisy
        trial.seconds = self.clock() - start
        self.seconds += trial.seconds
        self.trials[config] = trial
        return trial

    def _measure(self, config: Config) -> sampling.Measurement:
        return sampling.measure(self.timer_factory(config), self.budget, clock=self.clock)

    def remeasure(self, config: Config) -> list[float]:
        """Round medians of one more measurement of ``config`` (counted in ``seconds``)."""
        start = self.clock()
        try:
            return list(self._measure(config).rounds_ms)
        finally:
            self.seconds += self.clock() - start


@dataclass(frozen=True)
class Significance:
    verdict: str  # "better" | "tied" | "alone" (nothing to compare with)
    ratio: float | None = None  # best / runner-up (< 1: best is faster)
    ci: tuple[float, float] | None = None
    p_value: float | None = None  # one-sided, "best is faster"
    runner_up: Config | None = None
    runs: int = 0

    def line(self) -> str:
        if self.verdict == "alone":
            return "no runner-up to compare with"
        change = (1 - self.ratio) * 100
        text = (
            f"{change:.1f}% faster than the runner-up (95% interval {(1 - self.ci[1]) * 100:.1f}% to "
            f"{(1 - self.ci[0]) * 100:.1f}%, p={self.p_value:.2g}, {self.runs} alternating runs each)"
        )
        return ("significantly " if self.verdict == "better" else "tied: not significantly ") + text

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "ratio": self.ratio,
            "ci": list(self.ci) if self.ci else None,
            "p_value": self.p_value,
            "runner_up": self.runner_up.to_json() if self.runner_up else None,
            "runs": self.runs,
        }


def compare_best(evaluator: Evaluator, best: Config, runner_up: Config | None, *, runs: int = 3) -> Significance:
    """Re-measure ``best`` and ``runner_up`` alternately ``runs`` times; the gate's rule decides."""
    # numpy and the gate (scipy): ~0.8 s that `tesserabench tune --help`, --show and a static
    # ranking (no GPU) never need; only once a GPU timed two configs
    import numpy as np

    from pytest_tesserabench.gate import GateConfig
    from pytest_tesserabench.gate.centres import summarise_rounds
    from pytest_tesserabench.gate.rule import decide, noise_components

    if runner_up is None:
        return Significance(verdict="alone")
    runs = max(2, int(runs))
    best_runs, other_runs = [], []
    for _ in range(runs):  # alternating: machine drift hits both alike
        best_runs.append(evaluator.remeasure(best))
        other_runs.append(evaluator.remeasure(runner_up))

    def summaries(run_list):
        rows = [summarise_rounds(np.log(np.asarray(rounds, dtype=float))) for rounds in run_list]
        return tuple(np.array([[float(row[i]) for row in rows]]) for i in range(3))

    components = noise_components(*summaries(other_runs), *summaries(best_runs))
    config = GateConfig(alpha=0.05, threshold=0.0)
    decision = decide(components, np.array([config.between_run_floor**2]), config, m=1)
    verdict = "better" if str(decision.status[0]) == "IMPROVED" else "tied"
    return Significance(
        verdict=verdict,
        ratio=math.exp(float(decision.diff[0])),
        ci=(math.exp(float(decision.ci_low[0])), math.exp(float(decision.ci_high[0]))),
        p_value=float(decision.p_faster[0]),
        runner_up=runner_up,
        runs=runs,
    )


def gpu_timer_factory(runner: Callable[[Config], Callable[[], Any]], device: Any) -> TimerFactory:
    """Timers for configs launched by ``runner`` on ``device``: CUDA events, L2 flushed."""
    # the timers and the machine's device (~55 modules, ~20 ms): `tesserabench tune --help` reads this module
    from pytest_tesserabench.measure.timing import CudaEventTimer

    timer = None

    def factory(config: Config) -> CudaEventTimer:
        nonlocal timer
        call = runner(config)
        if timer is None:  # one L2 flush buffer for the whole tuning
            timer = CudaEventTimer(call, device)
        timer.call = call
        return timer

    return factory


__all__ = ["TUNING_BUDGET", "Evaluator", "Significance", "Trial", "compare_best", "gpu_timer_factory"]
