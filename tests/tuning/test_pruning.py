"""Static pruning with real ahead-of-time compiles (no GPU): each rule, its reasons and costs,
the analysis cache, worker processes, and the project's own kernels."""

import dataclasses

import pytest
from tuning_kernels import RING_DOT, ROWMAX, rowmax_config

from pytest_tesserabench.tuning import Config, PruneRules, prune
from pytest_tesserabench.tuning.pruning import RULES, default_min_occupancy
from pytest_tesserabench.tuning.tunable import load_tunable

ROWMAX_CONFIGS = ROWMAX.space(ROWMAX.default_problems[0]).enumerate().legal


def _prune_rowmax(analysis_cache, **kwargs):
    return prune(
        kwargs.pop("tunable", ROWMAX),
        ROWMAX.default_problems[0],
        ROWMAX_CONFIGS,
        "sm_80",
        rules=PruneRules(min_occupancy=0.75),
        analysis_cache=analysis_cache,
        **kwargs,
    )


def test_each_rule_removes_its_configs_with_the_reason(analysis_cache):
    report = _prune_rowmax(analysis_cache)
    assert [c.config for c in report.kept] == [rowmax_config(256, 4)]
    reasons = {(r.config["BLOCK"], r.config["num_warps"]): (r.rule, r.reason) for r in report.removed}
    assert reasons[48, 1] == ("compile", "CompilationError: arange's range must be a power of 2")
    assert reasons[48, 4][0] == "compile"
    assert reasons[8192, 1][0] == "spills" and "255 registers per thread" in reasons[8192, 1][1]
    assert reasons[256, 1] == (
        "occupancy",
        "occupancy 50.00% (32 warps per SM, limited by blocks) is below the floor 75.00%",
    )
    # Per rule: how many configs it removed and the analysis time spent on them.
    assert {rule: report.rules[rule].removed for rule in RULES} == {
        "compile": 2,
        "shared_memory": 0,
        "spills": 1,
        "occupancy": 2,
    }
    assert all(report.rules[rule].seconds > 0 for rule in ("compile", "spills", "occupancy"))
    assert report.rules["shared_memory"].seconds == 0
    assert report.lines()[0].startswith("static pruning for sm_80: 1 of 6 configs kept")


def test_a_warm_run_reads_the_analysis_cache_and_decides_alike(analysis_cache):
    cold = _prune_rowmax(analysis_cache)
    warm = _prune_rowmax(analysis_cache)
    # The analysis never caches a failed compile (it may come from the process state), so the
    # two configs that fail are compiled again; the four that compile are read back.
    assert (warm.cached, warm.compiled) == (4, 2)
    assert [(r.config, r.rule) for r in warm.removed] == [(r.config, r.rule) for r in cold.removed]
    assert [c.config for c in warm.kept] == [c.config for c in cold.kept]


def test_shared_memory_overflow_is_removed():
    report = prune(RING_DOT, RING_DOT.default_problems[0], RING_DOT.space(None).enumerate().legal, "sm_80")
    (removed,) = report.removed
    assert removed.config["BK"] == 1024 and removed.rule == "shared_memory"
    assert removed.reason == "needs 192.0 KiB of shared memory; sm_80 allows 163 KiB per block"
    assert [c.config["BK"] for c in report.kept] == [32]


def test_rules_can_be_relaxed(analysis_cache):
    report = prune(
        ROWMAX,
        ROWMAX.default_problems[0],
        [rowmax_config(256, 1), rowmax_config(8192, 1)],
        "sm_80",
        rules=PruneRules(spills=False, min_occupancy=0.0),
        analysis_cache=analysis_cache,
    )
    assert len(report.kept) == 2 and not report.removed


def test_default_occupancy_floor_is_one_warp_per_scheduler():
    assert default_min_occupancy("sm_90") == default_min_occupancy("sm_80") == 4 / 64
    assert default_min_occupancy("sm_86") == 4 / 48
    with pytest.raises(ValueError, match="min_occupancy=1.5 must be a fraction"):
        PruneRules(min_occupancy=1.5)


def test_worker_processes_give_the_same_verdicts(analysis_cache):
    serial = _prune_rowmax(analysis_cache)
    parallel = _prune_rowmax(analysis_cache, tunable=load_tunable("tests/tuning/tuning_kernels.py:ROWMAX"), jobs=2)
    assert [(r.config, r.rule, r.reason) for r in parallel.removed] == [
        (r.config, r.rule, r.reason) for r in serial.removed
    ]
    with pytest.raises(ValueError, match="no import reference"):
        prune(dataclasses.replace(ROWMAX, ref=None), ROWMAX.default_problems[0], ROWMAX_CONFIGS, "sm_80", jobs=2)


def test_the_project_kernels_prune_for_real(analysis_cache):
    from kernels import attention, matmul

    problem = matmul.TUNABLE.default_problems[0]
    small = Config(
        {"BLOCK_SIZE_M": 64, "BLOCK_SIZE_N": 64, "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, "num_warps": 4, "num_stages": 2}
    )
    deep = Config({**small, "BLOCK_SIZE_K": 128, "num_stages": 7})  # 6 x 32 KiB of operand ring
    report = prune(matmul.TUNABLE, problem, [small, deep], "sm_80", analysis_cache=analysis_cache)
    (kept,) = report.kept
    assert kept.config == small and kept.record["tensor_core_instructions"] > 0 and kept.record["spill_bytes"] == 0
    assert [(r.config, r.rule) for r in report.removed] == [(deep, "shared_memory")]

    problem = attention.TUNABLE.default_problems[0]
    config = Config({"BLOCK_M": 64, "BLOCK_N": 32, "num_warps": 4, "num_stages": 2})
    report = prune(attention.TUNABLE, problem, [config], "sm_80", analysis_cache=analysis_cache)
    assert [c.config for c in report.kept] == [config]
