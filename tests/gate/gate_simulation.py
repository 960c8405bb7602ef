"""Seeded simulated benchmark suites for measuring the gate (tests and benchmarks/gate_power.py).

Model, in log time: a round median = drift of its run + round noise + an occasional outlier.
* drift: one N(0, drift) draw per run and benchmark (another process, clocks, a warmer GPU);
* round noise: N(0, within) per round;
* outliers: with probability ``outlier_rate`` a round is slowed by 10-50% (interference spikes
  only ever slow a round down).
The candidate run is one more run of the same model, optionally slowed by ``slowdown``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from pytest_tesserabench.gate import (
    GateConfig,
    decide,
    noise_components,
    suite_prior,
    summarise_rounds,
)


@dataclass(frozen=True)
class Scenario:
    history: int = 3  # baseline runs
    rounds: int = 10  # rounds per run
    drift: float = 0.005  # between-run sd (relative)
    within: float = 0.01  # round-to-round sd (relative)
    outlier_rate: float = 0.05
    slowdown: float = 0.0  # injected into the candidate (0.05 = 5% slower)
    suite_size: int = 10  # benchmarks compared together (m)


def simulate(rng: np.random.Generator, trials: int, sc: Scenario) -> tuple[np.ndarray, np.ndarray]:
    """Log round medians: baseline (trials, m, H, R) and candidate (trials, m, R)."""
    shape_b = (trials, sc.suite_size, sc.history, sc.rounds)
    shape_c = (trials, sc.suite_size, sc.rounds)

    def rounds(shape: tuple[int, ...], drift_shape: tuple[int, ...]) -> np.ndarray:
        drift = rng.normal(0.0, sc.drift, drift_shape)
        noise = rng.normal(0.0, sc.within, shape)
        spikes = (rng.random(shape) < sc.outlier_rate) * np.log1p(rng.uniform(0.1, 0.5, shape))
        return drift + noise + spikes

    base = rounds(shape_b, shape_b[:-1] + (1,))
    cand = rounds(shape_c, shape_c[:-1] + (1,)) + np.log1p(sc.slowdown)
    return base, cand


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


def fixed_threshold_flags(base: np.ndarray, cand: np.ndarray, threshold: float = 0.05) -> np.ndarray:
    """pytest-benchmark style: the candidate median against the latest saved run's median."""
    return np.median(cand, axis=-1) - np.median(base[..., -1, :], axis=-1) > np.log1p(threshold)


def mann_whitney_flags(base: np.ndarray, cand: np.ndarray, alpha: float = 0.05) -> np.ndarray:
    """Within-run samples only: candidate rounds vs the latest saved run's rounds, one-sided."""
    p = stats.mannwhitneyu(cand, base[..., -1, :], alternative="greater", axis=-1).pvalue
    return p < alpha
