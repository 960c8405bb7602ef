"""The gate's promise, measured on seeded simulated suites (DESIGN.md section 5)."""

import numpy as np
import pytest
from gate_simulation import Scenario, gate_flags, run_effect_flags, simulate

from pytest_tesserabench.gate import GateConfig

CONFIG = GateConfig()
SUITES = 1000  # x 10 benchmarks = 10,000 simulated comparisons per scenario


@pytest.mark.parametrize("history", [3, 5, 10])
@pytest.mark.parametrize("drift", [0.005, 0.01, 0.02])
def test_false_positive_rate_per_benchmark_is_at_most_half_a_percent(history, drift):
    rng = np.random.default_rng(1000 * history + int(drift * 1e4))
    base, cand = simulate(rng, SUITES, Scenario(history=history, drift=drift))
    rate = gate_flags(base, cand, CONFIG).mean()
    assert rate <= 0.005, f"A/A false-positive rate {rate:.2%} at drift {drift:.1%}, H={history}"


@pytest.mark.parametrize("history", [3, 5, 10])
@pytest.mark.parametrize(("slowdown", "wanted"), [(0.05, 0.60), (0.10, 0.90)])
def test_power_at_half_a_percent_drift(history, slowdown, wanted):
    rng = np.random.default_rng(7 + history + int(slowdown * 100))
    base, cand = simulate(rng, SUITES // 2, Scenario(history=history, drift=0.005, slowdown=slowdown))
    power = gate_flags(base, cand, CONFIG).mean()
    assert power >= wanted, f"power {power:.1%} for a {slowdown:.0%} slowdown, H={history}"


def test_without_the_suite_prior_a_three_run_history_has_little_power():
    # Why the prior exists: alone, a benchmark's three runs give 2 degrees of freedom for the
    # drift, and Student's t on 2 df cannot find a 5% slowdown at alpha / m.
    rng = np.random.default_rng(5)
    base, cand = simulate(rng, SUITES // 2, Scenario(history=3, slowdown=0.05))
    alone = gate_flags(base, cand, GateConfig(prior_runs=0)).mean()
    pooled = gate_flags(base, cand, CONFIG).mean()
    assert alone < 0.2 and pooled > alone + 0.4, (alone, pooled)


@pytest.mark.parametrize("shared", [0.02, 0.05])
def test_with_shared_drift_the_run_effect_model_keeps_its_promise_and_the_old_rule_does_not(shared):
    # Drift shared by the whole run, as on a real machine: the old rule (drift per benchmark)
    # raises false alarms and loses power; removing the run effect restores both.
    rng = np.random.default_rng(int(shared * 1000))
    sc = Scenario(history=3, drift=0.005, shared_drift=shared, slowdown=0.10, slowed=2)
    base, cand = simulate(rng, SUITES // 2, sc)
    model, old = run_effect_flags(base, cand, CONFIG), gate_flags(base, cand, CONFIG)
    assert model[:, 2:].mean() <= 0.005, f"false alarms {model[:, 2:].mean():.2%} with the model"
    assert model[:, :2].mean() >= 0.95, f"power {model[:, :2].mean():.1%} at +10% with the model"
    assert old[:, :2].mean() < 0.5 and old[:, 2:].mean() > model[:, 2:].mean()
