"""What a run's conditions do to its verdicts (pytest_tesserabench.gate.conditions): they may
soften a verdict, never make one."""

from __future__ import annotations

import pytest

from pytest_tesserabench.gate import conditions
from pytest_tesserabench.gate.config import GateConfig
from pytest_tesserabench.record.results import BenchRecord, RunDocument, Sampling, Verdict

ID = "t.py::test_conv"


def _record(own_cpus: float, others_cpus: float) -> BenchRecord:
    wall = 2.0
    sampling = Sampling(own_cpu_s=own_cpus * wall, others_cpu_s=others_cpus * wall, others_wall_s=wall)
    return BenchRecord(ID, None, ID, "cpu", [1.0], None, samples_ms=[1.0], sampling=sampling)


def _judged(status: str, *, had: float | None, got: float, others: float) -> Verdict:
    baseline = [RunDocument(benchmarks={ID: _record(had, 0.0)})] if had is not None else []
    verdict = Verdict(ID, status=status, ratio=1.3 if status == "REGRESSED" else 0.7, threshold=0.05, stage="rule")
    return conditions.review([_record(got, others)], {ID: verdict}, baseline, GateConfig())[ID]


@pytest.mark.parametrize("status", ["REGRESSED", "IMPROVED"])
def test_a_multithreaded_benchmark_crowded_out_by_other_processes_is_not_judged_by_its_time(status):
    # Two threads had two CPUs in the baseline; beside two busy processes they got one.
    judged = _judged(status, had=2.0, got=1.0, others=1.0)
    assert judged.status == "INCONCLUSIVE" and judged.stage == conditions.STAGE and judged.severity is None
    assert "its threads got 1.0 CPUs, 2.0 in the baseline, while other processes kept 1.0 busy" in judged.notes
    assert judged.hint_text == conditions.CROWDED


def test_a_single_threaded_benchmark_under_the_same_load_keeps_its_verdict():
    # Its wait for a CPU is left out of its samples: the run's shared shift covers the rest.
    judged = _judged("REGRESSED", had=1.0, got=0.6, others=1.0)
    assert judged.status == "REGRESSED"


def test_a_benchmark_that_lost_its_parallelism_on_a_quiet_machine_keeps_its_verdict():
    # Nobody took the CPUs: the code itself runs on fewer threads now, which is a regression.
    judged = _judged("REGRESSED", had=2.0, got=1.0, others=0.1)
    assert judged.status == "REGRESSED"


def test_a_multithreaded_benchmark_that_got_its_cpus_keeps_its_verdict():
    judged = _judged("REGRESSED", had=2.0, got=1.8, others=0.7)
    assert judged.status == "REGRESSED"


def test_without_the_figure_in_the_baseline_nothing_is_softened():
    # Baselines saved before the figure was recorded (own_cpu_s 0) say nothing about threads.
    assert _judged("REGRESSED", had=0.0, got=1.0, others=1.0).status == "REGRESSED"
    assert _judged("REGRESSED", had=None, got=1.0, others=1.0).status == "REGRESSED"


def test_an_unchanged_verdict_stays_unchanged():
    verdict = Verdict(ID, status="UNCHANGED", ratio=1.0, threshold=0.05, stage="rule")
    baseline = [RunDocument(benchmarks={ID: _record(2.0, 0.0)})]
    assert conditions.review([_record(1.0, 1.0)], {ID: verdict}, baseline)[ID].status == "UNCHANGED"


def test_the_margin_is_a_gate_setting():
    with pytest.raises(ValueError, match="crowded_cpus"):
        GateConfig(crowded_cpus=0.0)
    verdict = Verdict(ID, status="REGRESSED", ratio=1.3, threshold=0.05, stage="rule")
    baseline = [RunDocument(benchmarks={ID: _record(2.0, 0.0)})]
    wide = conditions.review([_record(1.0, 1.0)], {ID: verdict}, baseline, GateConfig(crowded_cpus=1.5))
    assert wide[ID].status == "REGRESSED"  # a multi-threaded benchmark is one of 2.5 CPUs or more then
