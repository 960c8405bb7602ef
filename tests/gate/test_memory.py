"""The memory canary as a covariate of history mode (pytest_tesserabench.gate.memory): a benchmark
that streams memory is judged at the baseline's memory speed, one that does not is left alone."""

from __future__ import annotations

import math
import re
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
CANARY = 1.4  # memory against cache, at the machine's fast memory speed
# The memory's slowness (log) in each process of the baseline: most at the fast speed, some not.
BASELINE_SPEEDS = np.log1p([0.0, 0.0, 0.1, 0.0, 0.2, 0.1])
SLOW_MEMORY = math.log1p(0.15)  # the candidate's every pass met the memory 15% slower


def _record(bench_id, level, memory_level, rng, *, canary=True) -> BenchRecord:
    """Rounds at ``level`` (log) with a little noise in every pass; the memory canary after each
    pass at ``memory_level`` (log)."""
    rounds = [float(math.exp(level + rng.normal(0, 0.004))) for _ in range(PASSES * ROUNDS)]
    readings = tuple(CANARY * math.exp(memory_level + rng.normal(0, 0.004)) for _ in range(PASSES)) if canary else ()
    sampling = Sampling(passes=PASSES, pass_rounds=(ROUNDS,) * PASSES, memory_canary=readings)
    return BenchRecord(bench_id, None, "t.py::test_w", "cpu", rounds, Stats.of(rounds), sampling=sampling)


def _run(rng, memory_level, *, slower: dict | None = None, canary=True) -> RunDocument:
    """One process: STREAM takes all of the memory's slowness, every other benchmark none."""
    benchmarks = {}
    for bench_id in IDS:
        level = math.log(2.0) + math.log1p((slower or {}).get(bench_id, 0.0))
        level += memory_level if bench_id == STREAM else 0.0
        benchmarks[bench_id] = _record(bench_id, level, memory_level, rng, canary=canary)
    return RunDocument(benchmarks=benchmarks, canary_ms=[1.0, 1.0])


def _baseline(rng, *, canary=True) -> list[RunDocument]:
    return [_run(rng, speed, canary=canary) for speed in BASELINE_SPEEDS]


def test_the_slope_is_how_much_of_the_memorys_slowness_a_benchmark_takes():
    model = memory.fit(_baseline(np.random.default_rng(1)), prior_sd=0.5)
    stream = model.slopes[STREAM]
    assert stream.value == pytest.approx(1.0, abs=0.1)
    assert model.slopes[CACHED].value == pytest.approx(0.0, abs=0.1)
    # The median of the baseline's readings: the correction takes each process there.
    assert stream.reference == pytest.approx(math.log(CANARY) + float(np.median(BASELINE_SPEEDS)), abs=0.01)


def test_a_slope_is_never_negative_and_a_still_canary_or_scattered_centres_teach_little():
    rng = np.random.default_rng(2)
    # A benchmark that read faster whenever the memory was slower: chance, not physics.
    runs = _baseline(rng)
    for run, speed in zip(runs, BASELINE_SPEEDS):
        run.benchmarks[CACHED] = _record(CACHED, math.log(2.0) - speed, speed, rng)
    assert memory.fit(runs, prior_sd=0.5).slopes[CACHED].value == 0.0
    # The canary read the same in every process: the slope is the prior's, 0.
    still = [_run(rng, 0.0) for _ in range(6)]
    for run in still:
        for bench_id, record in run.benchmarks.items():
            sampling = replace(record.sampling, memory_canary=(CANARY,) * PASSES)
            run.benchmarks[bench_id] = replace(record, sampling=sampling)
    assert memory.fit(still, prior_sd=0.5).slopes[STREAM].value == 0.0
    # Centres that scatter 20% for reasons of their own, one of them where the memory was slow:
    # the prior keeps the slope near 0 (a fit alone would read the scatter as the memory's doing).
    scattered = _baseline(rng)
    for run, speed, noise in zip(scattered, BASELINE_SPEEDS, np.log1p([0.0, 0.3, 0.25, -0.1, 0.2, -0.15])):
        run.benchmarks[CACHED] = _record(CACHED, math.log(2.0) + noise, speed, rng)
    assert memory.fit(scattered, prior_sd=0.5).slopes[CACHED].value < 0.25
    # Too few processes to fit a line and its residual: no slope.
    assert STREAM not in memory.fit(runs[: memory.MIN_PROCESSES - 1], prior_sd=0.5).slopes


def test_a_record_is_scaled_from_the_memory_speed_of_its_centres_pass_to_the_baselines():
    rng = np.random.default_rng(3)
    model = memory.MemoryModel({STREAM: memory.Slope(0.5, math.log(CANARY))})
    record = _record(STREAM, math.log(2.0), 0.0, rng)
    readings = np.log1p([0.0, 0.2, 0.0, 0.2]) + math.log(CANARY)
    record = replace(record, sampling=replace(record.sampling, memory_canary=tuple(np.exp(readings))))
    adjusted = model.adjusted(record)
    # Its centre is its fastest pass; the canary after that pass says how fast the memory was then.
    pass_medians = np.median(np.reshape(record.rounds_ms, (PASSES, ROUNDS)), axis=1)
    moved = readings[int(np.argmin(pass_medians))] - math.log(CANARY)
    assert memory.centre_canary(record) == memory.centre_canary(adjusted) == pytest.approx(moved + math.log(CANARY))
    ratios = np.asarray(adjusted.rounds_ms) / np.asarray(record.rounds_ms)
    assert ratios == pytest.approx(np.full(len(ratios), math.exp(-0.5 * moved)))
    assert model.move(STREAM, [adjusted]) == pytest.approx(moved)
    # What has no slope, or no canary per pass, is left as it was.
    cached = _record(CACHED, 0.7, 0.2, rng)
    assert model.adjusted(cached) is cached
    bare = _record(STREAM, 0.7, 0.2, rng, canary=False)
    assert model.adjusted(bare) is bare
    assert memory.fit([RunDocument(benchmarks={STREAM: bare})] * 6, prior_sd=0.5) is memory.OFF


def test_a_benchmark_timed_while_the_memory_was_slow_is_not_a_slowdown():
    rng = np.random.default_rng(4)
    baseline = _baseline(rng)
    candidate = _run(rng, SLOW_MEMORY)
    without = judge_run(candidate, baseline, GateConfig(memory_slope_prior=0.0))[STREAM]
    assert without.status != "UNCHANGED"  # the verdict the canary exists to set right
    verdict = judge_run(candidate, baseline)[STREAM]
    assert verdict.status == "UNCHANGED", verdict
    said = [note for note in verdict.notes if note.startswith("the machine's memory read +")]
    assert said and said[0].endswith("removed"), verdict.notes
    assert judge_run(candidate, baseline)[CACHED].status == "UNCHANGED"


def test_a_slower_code_is_caught_whatever_the_memory_did():
    rng = np.random.default_rng(5)
    baseline = _baseline(rng)
    for memory_level in (0.0, SLOW_MEMORY):
        candidate = _run(rng, memory_level, slower={STREAM: 0.2, CACHED: 0.2})
        verdicts = judge_run(candidate, baseline)
        assert verdicts[STREAM].status == "REGRESSED" and verdicts[STREAM].ratio == pytest.approx(1.2, abs=0.03)
        assert verdicts[CACHED].status == "REGRESSED" and verdicts[CACHED].ratio == pytest.approx(1.2, abs=0.03)


def test_a_baseline_without_the_canary_is_judged_as_before():
    rng = np.random.default_rng(6)
    baseline = _baseline(rng, canary=False)
    candidate = _run(rng, SLOW_MEMORY)
    assert History.of(baseline).memory is memory.OFF
    before = judge_run(candidate, baseline, GateConfig(memory_slope_prior=0.0))[STREAM]
    assert judge_run(candidate, baseline)[STREAM] == before


def test_the_prior_is_a_gate_setting():
    with pytest.raises(ValueError, match="memory_slope_prior"):
        GateConfig(memory_slope_prior=-1.0)


@pytest.mark.parametrize("cpu", [1.0, 1.6])
def test_the_canary_reads_the_memory_against_the_cpu(monkeypatch, cpu):
    from pytest_tesserabench.measure import canary

    # The sums from memory take 1.4 times the sums from cache, on a fast CPU and on one 1.6x slower.
    times = iter([1.4, 1.0])

    class Timer:
        def __init__(self, call):
            self.ms = next(times) * cpu

        def round(self, samples):
            return [self.ms * 1.1] * (samples - 1) + [self.ms]

    monkeypatch.setattr(canary, "CpuTimer", Timer)
    assert canary.measure_memory_canary() == pytest.approx(1.4)


def test_the_canary_times_its_two_kinds_of_sum_in_turn(monkeypatch):
    from pytest_tesserabench.measure import canary

    # Each kind's sums meet the moments of the CPU the other's meet: a core waking up slows the
    # first sums of each kind, not the whole of one kind.
    order, kinds = [], iter(["memory", "cache"])  # the canary makes the memory's timer first

    class Timer:
        def __init__(self, call):
            self.kind = next(kinds)

        def round(self, samples):
            order.extend([self.kind] * samples)
            return [1.0] * samples

    monkeypatch.setattr(canary, "CpuTimer", Timer)
    canary.measure_memory_canary()
    assert order == ["memory", "cache"] * canary.MEMORY_CALLS


@pytest.mark.parametrize("cached_first", [True, False])
def test_the_runs_shift_is_read_from_corrected_centres(cached_first):
    # Four benchmarks that stream memory and one that does not: uncorrected, the four would read
    # the slow memory as this run's shared shift, and removing it would make the fifth faster.
    # Measured first, its shift comes from the others' earlier passes; last, from their centres.
    rng = np.random.default_rng(7)

    def run(memory_level):
        benchmarks = {}
        for bench_id in IDS:
            streams = bench_id != CACHED
            level = math.log(2.0) + (memory_level if streams else 0.0)
            benchmarks[bench_id] = _record(bench_id, level, memory_level, rng)
        others = [i for i in IDS if i != CACHED]
        order = [CACHED, *others] if cached_first else [*others, CACHED]
        return RunDocument(benchmarks=benchmarks, canary_ms=[1.0, 1.0], measured_order=order)

    baseline = [run(speed) for speed in BASELINE_SPEEDS]
    candidate = run(SLOW_MEMORY)
    verdict = judge_run(candidate, baseline)[CACHED]
    assert verdict.status == "UNCHANGED" and verdict.ratio == pytest.approx(1.0, abs=0.02), verdict
    assert abs(verdict.shift) < 0.02
    # Nor is the slow memory a slowdown of the whole suite.
    suite = History.of(baseline).suite_shift(candidate.benchmarks.values(), math.log(1.0))
    assert abs(suite.shift) < 0.02 and not suite.failed


def test_a_fresh_processs_reading_is_said_at_the_baselines_memory_speed():
    from pytest_tesserabench.gate.pipeline import Processes, _processes_note
    from pytest_tesserabench.record.results import Verdict

    # This process met the memory at its fast speed; the fresh one met it 15% slower and read
    # 15% slower. Corrected as the verdict is, the fresh process read what this one did.
    rng = np.random.default_rng(8)
    model = memory.MemoryModel({STREAM: memory.Slope(1.0, math.log(CANARY))})
    here = _record(STREAM, math.log(2.0), 0.0, rng)
    fresh = _record(STREAM, math.log(2.0) + SLOW_MEMORY, SLOW_MEMORY, rng)
    first = Verdict(id=STREAM, status="REGRESSED", ratio=1.2)
    said = _processes_note(here, first, Processes([{STREAM: fresh}], seconds=1.0), model)
    assert said.startswith("measured again in 1 fresh process(es): +20.") and "(here +20.0%" in said, said
    # Uncorrected, it would have read 1.2 x 1.15.
    assert _processes_note(here, first, Processes([{STREAM: fresh}]), memory.OFF).startswith(
        "measured again in 1 fresh process(es): +38."
    )


def test_a_slowdown_timed_past_the_slowest_memory_the_baseline_met_says_its_correction_is_a_guess():
    rng = np.random.default_rng(9)
    baseline = _baseline(rng)  # the memory at most 20% slow in any of its processes
    past = math.log1p(0.35)
    verdicts = judge_run(_run(rng, past, slower={CACHED: 0.2}), baseline)
    said = [n for n in verdicts[CACHED].notes if "past the slowest any process of the baseline met" in n]
    assert verdicts[CACHED].status == "REGRESSED" and said, verdicts[CACHED]
    # +35% against the fast memory is +29% against the baseline's median reading, +12.5% past its slowest.
    moved, beyond = (float(x) for x in re.match(r"the memory read \+([\d.]+)%, \+([\d.]+)% past", said[0]).groups())
    assert moved == pytest.approx(28.7, abs=1.5) and beyond == pytest.approx(12.5, abs=1.5), said
    assert "--bench-ab=REF" in said[0]
    # Not for a verdict that is no slowdown, nor where the memory was as slow as the baseline met.
    assert not any("past the slowest" in n for n in verdicts["t.py::test_w[a]"].notes)
    within = judge_run(_run(rng, SLOW_MEMORY, slower={CACHED: 0.2}), baseline)[CACHED]
    assert within.status == "REGRESSED" and not any("past the slowest" in n for n in within.notes)
