"""Seeded simulated benchmark suites for measuring the gate (tests and benchmarks/gate_power.py).

Model, in log time: a round median = shared drift of its run + own drift + round noise + an
occasional outlier.
* shared drift: one N(0, shared_drift) draw per run, the same for every benchmark of the run (clocks,
  load from other jobs, a warmer GPU: what a real machine mostly does);
* own drift: one N(0, drift) draw per run and benchmark;
* round noise: N(0, within) per round;
* outliers: with probability ``outlier_rate`` a round is slowed by 10-50% (interference spikes
  only ever slow a round down).
The candidate run is one more run of the same model, its first ``slowed`` benchmarks (all, by
default) slowed by ``slowdown``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from pytest_tesserabench.gate import (
    GateConfig,
    centre_of,
    decide,
    noise_components,
    suite_prior,
    summarise_rounds,
)
from pytest_tesserabench.run_effect import MEDIAN_VARIANCE_FACTOR, leave_one_out_median, median_polish


@dataclass(frozen=True)
class Scenario:
    history: int = 3  # baseline runs
    rounds: int = 10  # rounds per run
    drift: float = 0.005  # between-run sd (relative)
    within: float = 0.01  # round-to-round sd (relative)
    outlier_rate: float = 0.05
    slowdown: float = 0.0  # injected into the candidate (0.05 = 5% slower)
    suite_size: int = 10  # benchmarks compared together (m)
    shared_drift: float = 0.0  # between-run sd shared by every benchmark of a run (relative)
    slowed: int | None = None  # how many benchmarks the slowdown hits (None: all)


def simulate(rng: np.random.Generator, trials: int, sc: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """Log round medians: baseline (trials, m, H, R) and candidate (trials, m, R)."""
    shape_b = (trials, sc.suite_size, sc.history, sc.rounds)
    shape_c = (trials, sc.suite_size, sc.rounds)

    def rounds(shape: tuple[int, ...], drift_shape: tuple[int, ...]) -> np.ndarray:
        drift = rng.normal(0.0, sc.drift, drift_shape)
        noise = rng.normal(0.0, sc.within, shape)
        spikes = (rng.random(shape) < sc.outlier_rate) * np.log1p(rng.uniform(0.1, 0.5, shape))
        return drift + noise + spikes

    base = rounds(shape_b, shape_b[:-1] + (1,)) + rng.normal(0.0, sc.shared_drift, (trials, 1, sc.history, 1))
    cand = rounds(shape_c, shape_c[:-1] + (1,)) + rng.normal(0.0, sc.shared_drift, (trials, 1, 1))
    hit = np.zeros(sc.suite_size)
    hit[: sc.suite_size if sc.slowed is None else sc.slowed] = np.log1p(sc.slowdown)
    return base, cand + hit[None, :, None]


def gate_flags(base: np.ndarray, cand: np.ndarray, config: GateConfig) -> np.ndarray:
    """REGRESSED flags (trials, m) of the shipped gate, each trial one suite of m benchmarks."""
    trials, m, history, _ = base.shape
    bc, bw, bn = summarise_rounds(base.reshape(trials * m, history, -1))
    cc, cw, cn = summarise_rounds(cand.reshape(trials * m, 1, -1))
    nc = noise_components(bc, bw, bn, cc, cw, cn)
    prior = suite_prior(
        nc.between_est.reshape(trials, m), nc.between_df.reshape(trials, m), config.between_run_floor
    ).reshape(-1)
    return (decide(nc, prior, config, m).status == "REGRESSED").reshape(trials, m)


def run_effect_flags(base: np.ndarray, cand: np.ndarray, config: GateConfig) -> np.ndarray:
    """REGRESSED flags (trials, m) of history mode's run-effect model (run_effect.py): the baseline's
    run shifts removed by median polish, the candidate's shift estimated from the other benchmarks
    (leave-one-out), as the plugin does once the suite's other benchmarks are measured."""
    trials, m, history, _ = base.shape
    centres = centre_of(base)  # (trials, m, H)
    effects, shifts, residual = median_polish(centres)
    base = base - shifts[:, None, :, None]
    cand_shift = leave_one_out_median(centre_of(cand) - effects)  # (trials, m)
    cand = cand - cand_shift[..., None]
    residual_var = np.median(np.sum(residual**2, axis=-1) / max(history - 1, 1), axis=-1)  # (trials,)
    extra = (MEDIAN_VARIANCE_FACTOR * np.maximum(residual_var, 1e-8) / (m - 1))[:, None] * np.ones((1, m))
    bc, bw, bn = summarise_rounds(base.reshape(trials * m, history, -1))
    cc, cw, cn = summarise_rounds(cand.reshape(trials * m, 1, -1))
    nc = noise_components(bc, bw, bn, cc, cw, cn)
    prior = suite_prior(
        nc.between_est.reshape(trials, m), nc.between_df.reshape(trials, m), config.between_run_floor
    ).reshape(-1)
    return (decide(nc, prior, config, m, extra_var=extra.reshape(-1)).status == "REGRESSED").reshape(trials, m)


def fixed_threshold_flags(base: np.ndarray, cand: np.ndarray, threshold: float = 0.05) -> np.ndarray:
    """pytest-benchmark style: the candidate median against the latest saved run's median."""
    return np.median(cand, axis=-1) - np.median(base[..., -1, :], axis=-1) > np.log1p(threshold)


def mann_whitney_flags(base: np.ndarray, cand: np.ndarray, alpha: float = 0.05) -> np.ndarray:
    """Within-run samples only: candidate rounds vs the latest saved run's rounds, one-sided."""
    p = stats.mannwhitneyu(cand, base[..., -1, :], alternative="greater", axis=-1).pvalue
    return p < alpha
