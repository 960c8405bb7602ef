"""Summary statistics of timing samples: pure numpy/scipy, no pytest, no devices.

Timings are skewed to the right (interrupts, clock changes, other tenants), so the centre is the
median and its confidence interval is distribution-free: the binomial order-statistic interval
(the same one scipy's ``stats.quantile_test`` inverts), not a normal approximation.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

CONFIDENCE = 0.95


@lru_cache(maxsize=512)
def _median_ci_ranks(n: int, confidence: float) -> tuple[int, int]:
    """0-based ranks (lo, hi) of the order statistics bounding the median's interval.

    The narrowest symmetric pair whose coverage P(X_(lo) <= median <= X_(hi)) is at least
    ``confidence``; for n < 6 no pair reaches 95% and the full range is returned.
    """
    if n < 2:
        return 0, max(n - 1, 0)
    from scipy import stats as _scipy_stats  # here: ~0.7 s of import that plain pytest must not pay

    tail = (1.0 - confidence) / 2.0
    # Largest k with P(Binomial(n, 1/2) <= k - 1) <= tail: then [X_(k), X_(n-k+1)] (1-based) covers.
    k = int(_scipy_stats.binom.ppf(tail, n, 0.5))
    while k > 0 and _scipy_stats.binom.cdf(k - 1, n, 0.5) > tail:
        k -= 1
    if k < 1:
        return 0, n - 1
    return k - 1, n - k


def median_ci(values, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Distribution-free confidence interval of the median of ``values``."""
    x = np.sort(np.asarray(values, dtype=float))
    if x.size == 0:
        return (math.nan, math.nan)
    lo, hi = _median_ci_ranks(int(x.size), confidence)
    return float(x[lo]), float(x[hi])


def relative_ci_halfwidth(values, confidence: float = CONFIDENCE) -> float:
    """Half the width of the median's interval relative to the median (0.01 means +-1%)."""
    x = np.asarray(values, dtype=float)
    if x.size < 2:
        return math.inf
    lo, hi = median_ci(x, confidence)
    centre = float(np.median(x))
    if centre <= 0:
        return math.inf
    return (hi - lo) / 2.0 / centre


def outlier_count(values) -> int:
    """Values beyond 1.5 IQR from the quartiles (Tukey's fences)."""
    x = np.asarray(values, dtype=float)
    if x.size < 4:
        return 0
    q1, q3 = np.percentile(x, [25, 75])
    fence = 1.5 * (q3 - q1)
    return int(np.count_nonzero((x < q1 - fence) | (x > q3 + fence)))


def summarize(rounds_ms, samples_ms=None, *, noisy: bool = False) -> dict:
    """The ``stats`` block of a record (docs/usage.md, "The run file"), computed on the round medians.

    The round medians are the unit of the statistics: samples within a round are correlated
    (same cache and clock state), rounds much less so. ``samples`` counts the raw samples.
    """
    r = np.asarray(rounds_ms, dtype=float)
    if r.size == 0:
        raise ValueError("summarize() needs at least one round")
    median = float(np.median(r))
    q1, q3 = np.percentile(r, [25, 75])
    stdev = float(np.std(r, ddof=1)) if r.size > 1 else 0.0
    mean = float(np.mean(r))
    lo, hi = median_ci(r)
    extremes = r if samples_ms is None or len(samples_ms) == 0 else np.asarray(samples_ms, dtype=float)
    return {
        "median_ms": median,
        "ci95_ms": [lo, hi],
        "mean_ms": mean,
        "min_ms": float(np.min(extremes)),
        "max_ms": float(np.max(extremes)),
        "iqr_ms": float(q3 - q1),
        "stdev_ms": stdev,
        "cv": stdev / mean if mean > 0 else 0.0,
        "rounds": int(r.size),
        "samples": int(len(samples_ms)) if samples_ms is not None else int(r.size),
        "outliers": outlier_count(r),
        "noisy": bool(noisy),
    }
