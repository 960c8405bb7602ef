"""What a run's conditions do to its verdicts (pytest_tesserabench.gate.conditions): they may
soften a verdict, never make one."""

from __future__ import annotations

import math

import pytest

from pytest_tesserabench.gate import conditions
from pytest_tesserabench.gate.config import GateConfig
from pytest_tesserabench.gate.pipeline import judge_run
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


def test_a_baseline_saved_beside_busy_processes_still_knows_the_benchmark_is_multithreaded():
    # Its three saves got 1.99, 1.40 and 1.08 CPUs (the load's doing; median 1.40): its code runs
    # two threads, so crowded out now it is not judged by its time.
    baseline = [RunDocument(benchmarks={ID: _record(cpus, 1.0)}) for cpus in (1.08, 1.99, 1.40)]
    assert conditions.multi_threaded(ID, baseline, GateConfig())
    verdict = Verdict(ID, status="REGRESSED", ratio=1.3, threshold=0.05, stage="rule")
    judged = conditions.review([_record(1.0, 1.0)], {ID: verdict}, baseline, GateConfig())[ID]
    assert judged.status == "INCONCLUSIVE" and judged.hint_text == conditions.CROWDED


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


def test_a_crowded_out_benchmark_has_no_say_in_the_run_s_shift():
    # Two multi-threaded benchmarks crowded out (+60%, +40%: the scheduler's doing), one real
    # regression (+30%), three unchanged: the shift removed from the unchanged ones is the
    # machine's (about nothing), not the median of what the crowded ones did (+30% or more), which
    # read them 20% faster and the regression as no change.
    pattern = [math.exp(0.01 * (k % 5 - 2)) for k in range(12)]
    ids = [f"t.py::test_{name}" for name in ("mt_a", "mt_b", "slow", "x", "y", "z")]
    threads = {ids[0]: 2.0, ids[1]: 2.0}

    def run(jitter, moves=None, own=None, others=0.0):
        benchmarks = {}
        for k, bench_id in enumerate(ids):
            cpus = (own or threads).get(bench_id, 1.0)
            level = (1.0 + k) * math.exp(jitter[k] + math.log1p((moves or {}).get(bench_id, 0.0)))
            sampling = Sampling(own_cpu_s=2 * cpus, others_cpu_s=2 * others, others_wall_s=2.0)
            rounds = [level * p for p in pattern]
            benchmarks[bench_id] = BenchRecord(bench_id, None, bench_id, "cpu", rounds, None, sampling=sampling)
        return RunDocument(benchmarks=benchmarks, measured_order=list(ids))

    baseline = [run([0.004 * ((j + k) % 3 - 1) for k in range(6)]) for j in range(3)]
    crowded = {ids[0]: 1.0, ids[1]: 1.0}
    candidate = run([0.0] * 6, {ids[0]: 0.6, ids[1]: 0.4, ids[2]: 0.3}, own=crowded, others=1.0)
    verdicts = judge_run(candidate, baseline)
    for bench_id in ids[3:]:
        assert abs(verdicts[bench_id].shift or 0.0) < 0.02, verdicts[bench_id].line()
        assert verdicts[bench_id].ratio == pytest.approx(1.0, abs=0.02), verdicts[bench_id].line()
    assert verdicts[ids[2]].status == "REGRESSED" and verdicts[ids[2]].ratio == pytest.approx(1.3, abs=0.03)
    assert {verdicts[i].status for i in ids[:2]} == {"INCONCLUSIVE"}


def test_the_suite_line_and_the_canary_line_read_the_machine_from_the_same_canaries():
    # A crowded-out benchmark has no say in the suite's shift, but the canary timed before it read
    # the machine as any other: the suite line's "the machine (canary)" and the summary's "canary:"
    # must be one figure, not two that disagree.
    from dataclasses import replace

    from pytest_tesserabench.gate.model import machine_ratio
    from pytest_tesserabench.gate.pipeline import History

    ids = [f"t.py::test_{name}" for name in ("mt_a", "mt_b", "w", "x", "y", "z")]
    pattern = [math.exp(0.01 * (k % 5 - 2)) for k in range(12)]

    def run(jitter, own, others, canaries):
        benchmarks = {}
        for k, bench_id in enumerate(ids):
            sampling = Sampling(own_cpu_s=2 * own.get(bench_id, 1.0), others_cpu_s=2 * others, others_wall_s=2.0)
            rounds = [(1.0 + k) * math.exp(jitter[k]) * p for p in pattern]
            record = BenchRecord(bench_id, None, bench_id, "cpu", rounds, None, sampling=sampling)
            benchmarks[bench_id] = replace(record, canary_ms=canaries[k])
        return RunDocument(benchmarks=benchmarks, measured_order=list(ids))

    two = {ids[0]: 2.0, ids[1]: 2.0}
    baseline = [run([0.004 * ((j + k) % 3 - 1) for k in range(6)], two, 0.0, [1.0] * 6) for j in range(3)]
    crowded = {ids[0]: 1.0, ids[1]: 1.0}
    candidate = run([0.0] * 6, crowded, 1.0, [0.8, 0.8, 0.9, 1.0, 1.0, 1.1])
    history = History.of(baseline)
    assert history.crowded_out(candidate.benchmarks[ids[0]])  # (the case: left out of the shift)
    suite = history.suite_shift(candidate.benchmarks.values(), None)
    assert suite is not None and suite.benchmarks == 4
    assert suite.canary == pytest.approx(math.log(machine_ratio([candidate], baseline)))
    assert suite.canary == pytest.approx((math.log(0.9) + math.log(1.0)) / 2)


def _saves_and_a_run(
    cpus: float,
    move: float,
    pool_moved: float | None,
    *,
    baseline_pool: bool = True,
    kinds: tuple[str, str] = ("pool_canary_ms", "pool_canary_ms"),
    pool_levels: tuple[float, float, float] = (1.0, 1.0, 1.0),
):
    """Three saves of five benchmarks, the first keeping ``cpus`` CPUs busy and its pool canary
    read after each of its four passes (7 µs; none at all without ``baseline_pool``), then a
    candidate run reading it ``move`` slower, its pool canary ``pool_moved`` slower at its fastest
    (None: not timed), the others unchanged. ``kinds``: the Sampling field each side's pool
    canary is kept in (the baseline's, the candidate's); ``pool_levels``: each save's pool canary
    as a multiple of 7 µs (its own drift between runs)."""
    ids = [f"t.py::test_{name}" for name in ("softmax_2t", "a", "b", "c", "d")]
    pattern = [math.exp(0.01 * (k % 5 - 2)) for k in range(12)]

    def run(save, moved, pool, kind):
        benchmarks = {}
        for k, bench_id in enumerate(ids):
            jitter = 0.004 * ((save + k) % 3 - 1)
            canaries = pool if k == 0 and pool is not None else ()
            sampling = Sampling(
                own_cpu_s=2 * (cpus if k == 0 else 1.0),
                others_wall_s=2.0,
                passes=4,
                pass_rounds=(3, 3, 3, 3),
                **{kind: tuple(canaries)},
            )
            rounds = [(1.0 + k) * math.exp(jitter + math.log1p(moved if k == 0 else 0.0)) * p for p in pattern]
            benchmarks[bench_id] = BenchRecord(bench_id, None, bench_id, "cpu", rounds, None, sampling=sampling)
        return RunDocument(benchmarks=benchmarks, measured_order=list(ids))

    steady = (0.0071, 0.007, 0.0075, 0.0072) if baseline_pool else None
    baseline = [run(s, 0.0, steady and tuple(t * pool_levels[s] for t in steady), kinds[0]) for s in range(3)]
    slow = None if pool_moved is None else tuple(0.007 * (1 + pool_moved) * f for f in (1.1, 1.0, 1.3, 1.05))
    return ids[0], baseline, run(0, move, slow, kinds[1])


def test_a_multithreaded_benchmark_slowed_with_torch_s_pool_is_not_failed():
    # The machine's slow moment for parallel work: the benchmark reads +27%, and torch's pool,
    # timed after each pass, read +45% even at its fastest.
    bench_id, baseline, candidate = _saves_and_a_run(2.0, 0.27, 0.45)
    verdict = judge_run(candidate, baseline)[bench_id]
    assert verdict.status == "INCONCLUSIVE" and verdict.stage == conditions.STAGE, verdict.line()
    assert "torch's thread pool ran +45.0% slower than in any run of the baseline" in " ".join(verdict.notes)
    assert verdict.hint_text == conditions.POOL_SLOW and verdict.severity is None


def test_a_slowdown_past_the_pool_s_own_move_is_not_failed_while_the_pool_was_slow():
    # A two-thread BLAS matmul read a slow moment +50-58% (all three processes) while torch's pool
    # read it +38%: each parallel benchmark reads such a moment at a strength of its own, so a
    # pool slower by the threshold or more leaves any slowdown of it undecided.
    bench_id, baseline, candidate = _saves_and_a_run(2.0, 0.58, 0.38)
    verdict = judge_run(candidate, baseline)[bench_id]
    assert verdict.ci[0] > 1.38 and verdict.status == "INCONCLUSIVE", verdict.line()
    assert verdict.hint_text == conditions.POOL_SLOW


def test_without_torch_the_blas_canary_reads_the_slow_moment_like_with_like():
    blas = ("blas_canary_ms", "blas_canary_ms")
    bench_id, baseline, candidate = _saves_and_a_run(2.0, 0.58, 0.38, kinds=blas)
    verdict = judge_run(candidate, baseline)[bench_id]
    assert verdict.status == "INCONCLUSIVE" and verdict.hint_text == conditions.POOL_SLOW, verdict.line()
    assert "numpy's BLAS threads ran +38.0% slower than in any run of the baseline" in " ".join(verdict.notes)
    # torch's pool in the baseline, BLAS's now (torch no longer loaded): no like to compare with
    mixed = ("pool_canary_ms", "blas_canary_ms")
    bench_id, baseline, candidate = _saves_and_a_run(2.0, 0.58, 0.38, kinds=mixed)
    assert judge_run(candidate, baseline)[bench_id].status == "REGRESSED"


def test_a_pool_canary_within_its_own_drift_between_runs_softens_nothing():
    # BLAS's canary read 0.052-0.058 ms at its fastest in the saves, 0.059 ms in this run: +5%
    # over their median, +2% over their slowest. Its own drift, not a slow moment: a +22% of
    # Python threads hashing stands.
    blas = ("blas_canary_ms", "blas_canary_ms")
    levels = (0.93, 1.0, 1.03)
    bench_id, baseline, candidate = _saves_and_a_run(2.0, 0.22, 0.05, kinds=blas, pool_levels=levels)
    assert judge_run(candidate, baseline)[bench_id].status == "REGRESSED"
    # Past the slowest of them by the threshold: the machine's slow moment.
    bench_id, baseline, candidate = _saves_and_a_run(2.0, 0.22, 0.09, kinds=blas, pool_levels=levels)
    assert judge_run(candidate, baseline)[bench_id].hint_text == conditions.POOL_SLOW


@pytest.mark.parametrize(
    "cpus, move, pool_moved, baseline_pool",
    [
        (2.0, 0.27, 0.0, True),  # a slower code: the pool ran as fast as ever
        (2.0, 0.27, 0.03, True),  # the pool 3% slower: less than the threshold and the slowdown
        (1.0, 0.27, 0.45, True),  # single-threaded: it dodges a slow CPU, and the pool is not its business
        (2.0, 0.27, None, True),  # no pool canary in this run (torch not loaded, one thread)
        (2.0, 0.27, 0.45, False),  # a baseline saved before the pool canary
    ],
)
def test_a_slowdown_the_pool_canary_does_not_explain_fails(cpus, move, pool_moved, baseline_pool):
    bench_id, baseline, candidate = _saves_and_a_run(cpus, move, pool_moved, baseline_pool=baseline_pool)
    verdict = judge_run(candidate, baseline)[bench_id]
    assert verdict.status == "REGRESSED", verdict.line()
