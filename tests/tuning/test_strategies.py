"""Search strategies against a fake GPU with a known optimum (no GPU, no real time)."""

import importlib.util
import sys

import pytest
from fakes import FAST_BUDGET, LANDSCAPE, FakeGpu, landscape_ms

from pytest_tesserabench.tuning import Config, Evaluator, search
from pytest_tesserabench.tuning.strategies import StrategyError, check_strategy
from pytest_tesserabench.tuning.tuner import TuningError, resolve_budget, tune

PROBLEM = LANDSCAPE.default_problems[0]
CANDIDATES = LANDSCAPE.space(PROBLEM).enumerate().legal
OPTIMUM = Config({"A": 64, "B": 128, "num_warps": 4, "num_stages": 3})


def run(strategy, budget=None, seed=0, gpu=None, **kwargs):
    gpu = gpu or FakeGpu(landscape_ms)
    result = tune(
        LANDSCAPE,
        PROBLEM,
        "sm_90",
        strategy=strategy,
        budget=budget,
        seed=seed,
        static_pruning=False,
        timer_factory=gpu.timer,
        measure_budget=FAST_BUDGET,
        clock=gpu.clock,
        **kwargs,
    )
    return result, gpu


def test_the_landscape_has_one_optimum_among_legal_configs():
    assert OPTIMUM in CANDIDATES and len(CANDIDATES) == 264  # 300 minus the 36 with A * B > 16384
    assert min(CANDIDATES, key=landscape_ms) == OPTIMUM


def test_exhaustive_times_every_candidate_once_and_finds_the_optimum():
    result, gpu = run("exhaustive", budget=10)  # the budget does not bind exhaustive search
    assert result.best == OPTIMUM and result.best_ms == pytest.approx(1.0, rel=0.01)
    assert len(result.trials) == len(CANDIDATES) == len(set(t.config for t in result.trials))
    # Every GPU second is counted: the search's seconds are the fake clock's.
    assert result.search_seconds == pytest.approx(gpu.now)


def test_random_times_its_budget_of_distinct_configs_reproducibly():
    first, _ = run("random", budget=40, seed=1)
    again, _ = run("random", budget=40, seed=1)
    other, _ = run("random", budget=40, seed=2)
    configs = [t.config for t in first.trials]
    assert len(configs) == 40 == len(set(configs))
    assert configs == [t.config for t in again.trials]
    assert configs != [t.config for t in other.trials]
    assert first.best == min(configs, key=landscape_ms)


needs_optuna = pytest.mark.skipif(
    importlib.util.find_spec("optuna") is None, reason="needs optuna (the 'tune' extra; CI installs it)"
)


@needs_optuna
@pytest.mark.parametrize("strategy", ["bayesian", "genetic"])
def test_optuna_strategies_get_near_the_optimum_on_a_fifth_of_the_time(strategy):
    exhaustive, exhaustive_gpu = run("exhaustive")
    result, gpu = run(strategy, budget=55, seed=0)
    assert len(result.trials) == 55 == len({t.config for t in result.trials})
    assert all(t.config in set(CANDIDATES) for t in result.trials)  # infeasible points are never timed
    assert result.best_ms <= 1.05 * exhaustive.best_ms
    assert gpu.now <= 0.25 * exhaustive_gpu.now


@needs_optuna
def test_optuna_search_starts_from_the_seeds():
    gpu = FakeGpu(landscape_ms)
    evaluator = Evaluator(gpu.timer, FAST_BUDGET, clock=gpu.clock)
    trials = search("bayesian", CANDIDATES, evaluator, budget=12, seed=3, seeds=[OPTIMUM])
    assert trials[0].config == OPTIMUM


def test_a_config_that_fails_to_run_is_recorded_and_skipped():
    broken = [OPTIMUM, Config({"A": 64, "B": 128, "num_warps": 4, "num_stages": 2})]
    result, _ = run("exhaustive", gpu=FakeGpu(landscape_ms, broken=broken))
    failed = [t for t in result.trials if not t.ok]
    assert {t.config for t in failed} == set(broken)
    assert all("OutOfResources" in t.error for t in failed)
    assert result.best not in broken and result.best_ms == pytest.approx(1.05, rel=0.01)
    assert any("failed: " in line for line in result.lines())


def test_when_every_timed_config_fails_the_error_names_one():
    with pytest.raises(TuningError, match=r"all 264 timed configs failed to run; e\.g\. .*OutOfResources"):
        run("exhaustive", gpu=FakeGpu(landscape_ms, broken=CANDIDATES))


def test_the_gate_rule_decides_whether_the_best_is_really_better():
    # Runner-up 5% slower: significantly better. Runner-up identical: tied.
    clear, _ = run("exhaustive", confirm_runs=3)
    assert clear.significance.verdict == "better"
    assert clear.significance.ratio == pytest.approx(1 / 1.05, rel=0.01)
    assert clear.significance.runner_up is not None and landscape_ms(clear.significance.runner_up) == 1.05

    def flat(config):
        return 1.0 if config["num_stages"] in (2, 3) and config["A"] == 64 else 2.0

    tied, _ = run("exhaustive", gpu=FakeGpu(flat, noise=0.01))
    assert tied.significance.verdict == "tied"
    assert "tied: not significantly" in tied.significance.line()


def test_budgets_resolve_to_a_count_of_configs():
    assert resolve_budget(None, "exhaustive", 100) == 100
    assert resolve_budget(None, "random", 100) == 25
    assert resolve_budget(None, "random", 20) == 8  # at least 8
    assert resolve_budget(0.1, "bayesian", 100) == 10
    assert resolve_budget(500, "genetic", 100) == 100
    with pytest.raises(ValueError, match="at least 1"):
        resolve_budget(0, "random", 100)


def test_unknown_strategy_and_missing_optuna_are_one_line_each(monkeypatch):
    with pytest.raises(StrategyError, match="unknown strategy 'annealing'; choose one of exhaustive, random"):
        check_strategy("annealing")
    monkeypatch.setitem(sys.modules, "optuna", None)  # import optuna now raises ImportError
    with pytest.raises(StrategyError, match=r"Optuna's TPE sampler.*pip install 'pytest-tesserabench\[tune\]'"):
        check_strategy("bayesian")
    check_strategy("random")  # needs nothing
