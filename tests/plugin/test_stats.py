"""Statistics on synthetic samples."""

import numpy as np
import pytest

from pytest_tesserabench.record import stats


def test_summary_of_known_values():
    rounds = [1.0, 2.0, 3.0, 4.0, 100.0]
    s = stats.summarize(rounds, samples_ms=[0.5, 1, 2, 3, 4, 100, 120])
    assert s["median_ms"] == 3.0 and s["mean_ms"] == pytest.approx(22.0)
    assert s["min_ms"] == 0.5 and s["max_ms"] == 120  # extremes come from the raw samples
    assert s["iqr_ms"] == pytest.approx(2.0)
    assert s["rounds"] == 5 and s["samples"] == 7
    assert s["outliers"] == 1  # 100 is beyond q3 + 1.5 IQR
    assert s["cv"] == pytest.approx(np.std(rounds, ddof=1) / 22.0)


def test_median_ci_uses_order_statistics():
    x = np.arange(1.0, 11.0)  # n=10: the 95% interval is [x(2), x(9)]
    assert stats.median_ci(x) == (2.0, 9.0)
    assert stats.median_ci([5.0, 1.0, 3.0]) == (1.0, 5.0)  # too few for 95%: the full range


def test_median_ci_covers_the_true_median_at_least_95_percent():
    rng = np.random.default_rng(7)
    n, trials = 25, 4000
    data = rng.lognormal(mean=0.0, sigma=0.3, size=(trials, n))  # skewed, like timings; median 1.0
    covered = sum(lo <= 1.0 <= hi for lo, hi in (stats.median_ci(row) for row in data))
    assert covered / trials >= 0.945


def test_relative_halfwidth_shrinks_with_more_rounds():
    rng = np.random.default_rng(1)
    few = stats.relative_ci_halfwidth(1 + 0.02 * rng.standard_normal(8))
    many = stats.relative_ci_halfwidth(1 + 0.02 * rng.standard_normal(400))
    assert many < few
    assert stats.relative_ci_halfwidth([1.0]) == float("inf")


def test_no_outliers_in_a_tight_sample():
    assert stats.outlier_count([1.0, 1.01, 0.99, 1.0, 1.02]) == 0


def test_empty_rounds_are_an_error():
    with pytest.raises(ValueError):
        stats.summarize([])
