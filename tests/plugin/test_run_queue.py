"""Time spent waiting for a CPU is left out of CPU samples (pytest_tesserabench.machine.run_queue)."""

import json
import multiprocessing
import os
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_tesserabench.machine import run_queue
from pytest_tesserabench.measure import canary, sampling
from pytest_tesserabench.measure.timing import CpuTimer
from pytest_tesserabench.record.results import BenchRecord, Sampling
from pytest_tesserabench.report.terminal import cpu_sharing_line

# The real canary: tests/plugin/conftest.py replaces canary.measure_canary in every test here.
MEASURE_CANARY = canary.measure_canary

has_schedstat = pytest.mark.skipif(
    not Path("/proc/thread-self/schedstat").exists(), reason="no per-thread schedstat here (Linux only)"
)


class FakeMachine:
    """A fake wall clock and a fake run-queue wait: each call takes 3 ms, of which 1 ms waiting."""

    def __init__(self, monkeypatch):
        self.now_ns = 0
        self.waited_ns = 0
        self.reads_open = 0
        monkeypatch.setattr(time, "perf_counter_ns", lambda: self.now_ns)
        monkeypatch.setattr(run_queue, "wait_clock", self.wait_clock)

    def wait_clock(self):
        self.reads_open += 1

        def close():
            self.reads_open -= 1

        return (lambda: self.waited_ns), close

    def call(self):
        self.now_ns += 3_000_000
        self.waited_ns += 1_000_000


def test_a_cpu_sample_leaves_out_the_wait_for_a_cpu(monkeypatch):
    machine = FakeMachine(monkeypatch)
    timer = CpuTimer(machine.call)
    assert timer.round(4) == [2.0, 2.0, 2.0, 2.0]
    assert timer.run_queue_wait_ns == 4_000_000
    assert machine.reads_open == 0  # the schedstat file is closed after every round


def test_a_measurement_and_its_record_carry_the_wait(monkeypatch):
    machine = FakeMachine(monkeypatch)
    timer = CpuTimer(machine.call)
    plan = sampling.Plan(samples_per_round=5, warmup_calls=0, inner_loops=1)
    measurement = sampling.start_measurement(timer, plan)
    sampling.take_round(timer, plan, measurement)
    sampling.take_round(timer, plan, measurement)
    assert measurement.run_queue_wait_s == pytest.approx(0.010)
    # bench()'s own path: rounds until the stopping rule (every sample 2 ms: converged at 5 rounds)
    measured = sampling.measure(timer, sampling.Budget(min_rounds=5), plan=plan)
    assert measured.rounds_ms == [2.0] * 5 and measured.run_queue_wait_s == pytest.approx(0.025)
    data = Sampling(run_queue_wait_s=measurement.run_queue_wait_s).to_json()
    assert Sampling.from_json(data, "sampling").run_queue_wait_s == pytest.approx(0.010)


def test_the_canary_leaves_out_the_wait_too(monkeypatch):
    machine = FakeMachine(monkeypatch)
    import numpy as np

    real_sort = np.sort

    def sort(*args, **kwargs):
        machine.call()
        return real_sort(*args, **kwargs)

    monkeypatch.setattr(np, "sort", sort)
    assert MEASURE_CANARY(3) == [2.0, 2.0, 2.0]
    assert machine.now_ns == 4 * 3_000_000  # the warm-up and three samples: the real canary ran


def test_where_there_is_no_schedstat_nothing_is_left_out(monkeypatch):
    def refuse(*args, **kwargs):
        raise FileNotFoundError("/proc/thread-self/schedstat")

    monkeypatch.setattr(os, "open", refuse)
    read, close = run_queue.wait_clock()
    assert read() == 0
    close()


def _burn(cpu: int, running) -> None:
    os.sched_setaffinity(0, {cpu})
    running.set()
    while True:
        pass


@has_schedstat
def test_busy_processes_on_the_same_cpu_are_seen_and_left_out():
    cpu = min(os.sched_getaffinity(0))
    previous = os.sched_getaffinity(0)
    context = multiprocessing.get_context("fork")
    burners = []
    try:
        for _ in range(2):  # two, so that the wait (about 2/3) differs from the time it ran (1/3)
            running = context.Event()
            burners.append(context.Process(target=_burn, args=(cpu, running), daemon=True))
            burners[-1].start()
            assert running.wait(10), "a busy process did not start"
        os.sched_setaffinity(0, {cpu})
        timer = CpuTimer(lambda: sum(range(20_000)))
        timer.calibrate(1e-3)
        wall, ran = time.perf_counter(), time.thread_time()
        samples = timer.round(300)  # a few hundred ms: many of the scheduler's slices
        wall, ran = time.perf_counter() - wall, time.thread_time() - ran
    finally:
        os.sched_setaffinity(0, previous)
        for burner in burners:
            burner.kill()
            burner.join()
    assert timer.run_queue_wait_ns / 1e9 > 0.3 * wall  # it waited, a good part of the time
    # What is left is the time the (single-threaded) code ran: its thread's CPU time. (Within 30%:
    # a CI worker beside it on a 2-CPU machine moves the scheduler's slices; without the wait left
    # out the samples read about three times the time it ran.)
    assert sum(samples) * timer.inner / 1e3 == pytest.approx(ran, rel=0.3)


def _record(samples_ms, wait_s, inner=1):
    return BenchRecord(
        nodeid="t.py::test",
        name=None,
        group="t.py::test",
        params={},
        timer="cpu",
        stats=None,
        rounds_ms=samples_ms,
        samples_ms=samples_ms,
        sampling=Sampling(inner_loops=inner, run_queue_wait_s=wait_s),
    )


def test_the_summary_says_when_the_cpu_was_shared():
    shared = [_record([100.0] * 10, 0.5), _record([10.0] * 10, 0.0, inner=10)]  # 2 s timed, 0.5 s waited
    line = cpu_sharing_line(shared)
    assert line is not None and "500 ms (20% of the timed wall clock)" in line
    assert cpu_sharing_line([_record([100.0] * 10, 0.01)]) is None  # 1%: ordinary scheduling
    assert cpu_sharing_line([]) is None
    assert cpu_sharing_line([BenchRecord("t.py::test", None, "t.py::test", "cpu", [1.0], None)]) is None


def test_a_baselines_record_without_samples_reads_its_wait_against_its_rounds_wall_clock():
    # A baseline keeps rounds, not samples: its wait was once read as all of its timed wall clock
    # (100%), as `tesserabench compare` printed for a baseline's run given as the one judged.
    kept = replace(_record([100.0] * 10, 0.05), samples_ms=[])
    kept = replace(kept, sampling=replace(kept.sampling, others_wall_s=1.0))
    assert kept.cpu_wait() == (0.05, 1.0)
    assert cpu_sharing_line([kept]) is not None and "(5% of the timed wall clock)" in cpu_sharing_line([kept])
    assert replace(kept, sampling=replace(kept.sampling, others_wall_s=0.0)).cpu_wait() == (0.0, 0.0)


SHARED_CPU_TEST = """
import time, pytest
from pytest_tesserabench.machine import run_queue

@pytest.fixture
def shared_cpu(monkeypatch):
    state = {"now": 0, "waited": 0}
    monkeypatch.setattr(time, "perf_counter_ns", lambda: state["now"])
    monkeypatch.setattr(run_queue, "wait_clock", lambda: (lambda: state["waited"], lambda: None))
    def kernel():  # 3 ms on the wall clock, 1 ms of it waiting for the CPU
        state["now"] += 3_000_000
        state["waited"] += 1_000_000
    return kernel

def test_shared(bench, shared_cpu):
    bench(shared_cpu)
"""


def test_the_record_and_the_summary_carry_the_wait(pytester):
    pytester.makepyfile(test_shared=SHARED_CPU_TEST)
    result = pytester.runpytest("--bench", "--bench-json=out.json", "--bench-warmup=0", "-p", "no:randomly", "-q")
    result.assert_outcomes(passed=1)
    record = next(iter(json.loads((pytester.path / "out.json").read_text())["benchmarks"].values()))
    assert record["stats"]["median_ms"] == pytest.approx(2.0)
    rounds = len(record["samples_ms"])
    assert record["sampling"]["run_queue_wait_s"] == pytest.approx(rounds * 0.001)
    result.stdout.fnmatch_lines(
        ["*the CPU was shared: the timing thread waited for it * (33% of the timed wall clock)*"]
    )
