"""The memory canary as a covariate of history mode (pytest_tesserabench.gate.memory): a benchmark
that streams memory is judged at the baseline's memory speed, one that does not is left alone."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from pytest_tesserabench.gate import memory
from pytest_tesserabench.gate.config import GateConfig
from pytest_tesserabench.gate.pipeline import History, judge_run
from pytest_tesserabench.record.results import BenchRecord, RunDocument, Sampling, Stats

PASSES, ROUNDS = 4, 12
STREAM, CACHED = "t.py::test_w[stream]", "t.py::test_w[cached]"
IDS = (STREAM, CACHED, "t.py::test_w[a]", "t.py::test_w[b]", "t.py::test_w[c]")
CANARY_MS = 0.6


def _record(bench_id, levels, memory_levels, rng, *, canary=True) -> BenchRecord:
    """Rounds at ``levels`` (log, one per pass) with a little noise; the memory canary after each
    pass at ``memory_levels`` (log)."""
    rounds = [float(math.exp(level + rng.normal(0, 0.004))) for level in levels for _ in range(ROUNDS)]
    readings = tuple(CANARY_MS * math.exp(m + rng.normal(0, 0.004)) for m in memory_levels) if canary else ()
    sampling = Sampling(passes=PASSES, pass_rounds=(ROUNDS,) * PASSES, memory_canary_ms=readings)
    return BenchRecord(bench_id, None, "t.py::test_w", "cpu", rounds, Stats.of(rounds), sampling=sampling)


def _run(rng, memory_levels, *, slower: dict | None = None, canary=True) -> RunDocument:
    """One process: STREAM takes all of the memory's slowness, every other benchmark none."""
    memory_levels = np.asarray(memory_levels, dtype=float)
    benchmarks = {}
    for bench_id in IDS:
        base = math.log(2.0) + math.log1p((slower or {}).get(bench_id, 0.0))
        levels = base + (memory_levels if bench_id == STREAM else np.zeros(PASSES))
        benchmarks[bench_id] = _record(bench_id, levels, memory_levels, rng, canary=canary)
    return RunDocument(benchmarks=benchmarks, canary_ms=[1.0, 1.0])


def _baseline(rng, *, canary=True) -> list[RunDocument]:
    """Three saves, each of whose passes met the memory at one of its three speeds (0, +10%,
    +20%), each speed in every save."""
    speeds = np.log1p([0.0, 0.1, 0.2])
    return [_run(rng, rng.permutation([*speeds, rng.choice(speeds)]), canary=canary) for _ in range(3)]


SLOW_MEMORY = [math.log1p(0.15)] * PASSES  # every pass of the candidate met the memory 15% slower


def test_the_slope_is_how_much_of_the_memorys_slowness_a_benchmark_takes():
    model = memory.fit(_baseline(np.random.default_rng(1)), prior_sd=1.0)
    stream = model.slopes[STREAM]
    assert stream.value == pytest.approx(1.0, abs=0.1) and 0 < stream.variance < 0.01
    assert model.slopes[CACHED].value == pytest.approx(0.0, abs=0.1)
    # Its centre is its fastest pass, taken where the memory was fastest: the reference is there.
    assert stream.reference == pytest.approx(math.log(CANARY_MS), abs=0.02)


def test_a_slope_is_never_negative_and_a_still_canary_teaches_little():
    rng = np.random.default_rng(2)
    runs = _baseline(rng)
    # A benchmark that read faster whenever the memory was slower: chance, not physics.
    for run in runs:
        record = run.benchmarks[CACHED]
        canaries = memory.pass_canaries(record)
        levels = math.log(2.0) - (canaries - canaries.min())
        run.benchmarks[CACHED] = _record(CACHED, levels, canaries - math.log(CANARY_MS), rng)
    assert memory.fit(runs, prior_sd=1.0).slopes[CACHED].value == 0.0
    # The canary read the same in every pass of the baseline: the slope is the prior's, 0, and
    # as uncertain as the prior says.
    still = [_run(rng, [0.0] * PASSES) for _ in range(3)]
    for run in still:
        for bench_id, record in run.benchmarks.items():
            sampling = replace(record.sampling, memory_canary_ms=(CANARY_MS,) * PASSES)
            run.benchmarks[bench_id] = replace(record, sampling=sampling)
    for prior in (1.0, 0.5):
        slope = memory.fit(still, prior_sd=prior).slopes[STREAM]
        assert slope.value == 0.0 and slope.variance == pytest.approx(prior**2)


def test_each_pass_is_scaled_to_the_baselines_memory_speed():
    rng = np.random.default_rng(3)
    model = memory.MemoryModel({STREAM: memory.Slope(0.5, 0.01, math.log(CANARY_MS))})
    record = _record(STREAM, [math.log(2.0)] * PASSES, np.log1p([0.0, 0.2, 0.0, 0.2]), rng)
    adjusted = model.adjusted(record)
    ratios = np.asarray(adjusted.rounds_ms) / np.asarray(record.rounds_ms)
    canaries = memory.pass_canaries(record)
    expected = np.repeat(np.exp(-0.5 * (canaries - math.log(CANARY_MS))), ROUNDS)
    assert ratios == pytest.approx(expected)
    assert model.move(STREAM, [record]) == pytest.approx(memory.centre_canary(record) - math.log(CANARY_MS))
    assert model.variance(STREAM, [record]) == pytest.approx(0.01 * model.move(STREAM, [record]) ** 2)
    # What has no slope, or no canary per pass, is left as it was.
    cached = _record(CACHED, [0.7] * PASSES, [0.2] * PASSES, rng)
    assert model.adjusted(cached) is cached
    bare = _record(STREAM, [0.7] * PASSES, [0.2] * PASSES, rng, canary=False)
    assert model.adjusted(bare) is bare
    assert memory.fit([RunDocument(benchmarks={STREAM: bare})], prior_sd=1.0) is memory.OFF


def _judged(baseline, candidate, config=None):
    return judge_run(candidate, baseline, config)


def test_a_benchmark_timed_while_the_memory_was_slow_is_not_a_slowdown():
    rng = np.random.default_rng(4)
    baseline = _baseline(rng)
    candidate = _run(rng, SLOW_MEMORY)
    without = _judged(baseline, candidate, GateConfig(memory_slope_prior=0.0))[STREAM]
    assert without.status == "REGRESSED"  # the failure the canary exists to prevent
    verdict = _judged(baseline, candidate)[STREAM]
    assert verdict.status == "UNCHANGED", verdict
    said = [note for note in verdict.notes if note.startswith("the machine's memory read +1")]
    assert said and said[0].endswith("removed"), verdict.notes
    assert _judged(baseline, candidate)[CACHED].status == "UNCHANGED"


def test_a_slower_code_is_caught_whatever_the_memory_did():
    rng = np.random.default_rng(5)
    baseline = _baseline(rng)
    for memory_levels in ([0.0] * PASSES, SLOW_MEMORY):
        candidate = _run(rng, memory_levels, slower={STREAM: 0.2, CACHED: 0.2})
        verdicts = _judged(baseline, candidate)
        assert verdicts[STREAM].status == "REGRESSED" and verdicts[STREAM].ratio == pytest.approx(1.2, abs=0.03)
        assert verdicts[CACHED].status == "REGRESSED" and verdicts[CACHED].ratio == pytest.approx(1.2, abs=0.03)


def test_a_baseline_without_the_canary_is_judged_as_before():
    rng = np.random.default_rng(6)
    baseline = _baseline(rng, canary=False)
    candidate = _run(rng, SLOW_MEMORY)
    assert History.of(baseline).memory is memory.OFF
    assert _judged(baseline, candidate)[STREAM].status == "REGRESSED"


def test_the_prior_is_a_gate_setting():
    with pytest.raises(ValueError, match="memory_slope_prior"):
        GateConfig(memory_slope_prior=-1.0)
