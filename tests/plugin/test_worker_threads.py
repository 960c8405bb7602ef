"""The wait of a benchmark's worker threads for a CPU (run_queue.workers_wait_clock): counted,
carried into the record, and a regression it may explain held back in history mode."""

import hashlib
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_tesserabench import run_conditions, run_queue, sampling
from pytest_tesserabench.passes import pooled
from pytest_tesserabench.report.terminal import cpu_sharing_line
from pytest_tesserabench.results import BenchRecord, Sampling, Verdict
from pytest_tesserabench.timing import CpuTimer

linux_only = pytest.mark.skipif(
    not Path("/proc/self/task").is_dir() or not hasattr(os, "sched_setaffinity"),
    reason="per-thread schedstat and CPU affinity are Linux's",
)
BUFFER = bytes(1 << 22)  # hashing it releases the GIL: threads of one process compete for a CPU


def _hash_until(stop: threading.Event, cpu: int) -> None:
    os.sched_setaffinity(0, {cpu})  # this thread only
    while not stop.is_set():
        hashlib.sha256(BUFFER)


def _busy_on(cpu: int, seconds: float) -> tuple[int, int]:
    """Hash on ``cpu`` for ``seconds`` in the calling thread; (workers' wait, wall) in ns."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpu})
    read, close = run_queue.workers_wait_clock()
    try:
        waited, start = read(), time.monotonic_ns()
        while time.monotonic_ns() - start < seconds * 1e9:
            hashlib.sha256(BUFFER)
        return read() - waited, time.monotonic_ns() - start
    finally:
        close()
        os.sched_setaffinity(0, before)


@linux_only
def test_a_worker_thread_kept_off_its_cpu_is_counted():
    cpu = min(os.sched_getaffinity(0))
    stop = threading.Event()
    worker = threading.Thread(target=_hash_until, args=(stop, cpu))
    worker.start()
    try:
        time.sleep(0.05)
        waited, wall = _busy_on(cpu, 0.3)  # the calling thread takes the worker's CPU half the time
    finally:
        stop.set()
        worker.join()
    assert waited / wall >= 0.2


@linux_only
def test_the_calling_threads_own_wait_and_other_processes_are_not_counted():
    cpu = min(os.sched_getaffinity(0))
    busy = subprocess.Popen([sys.executable, "-c", f"import os; os.sched_setaffinity(0, {{{cpu}}})\nwhile True: pass"])
    try:
        time.sleep(0.2)
        waited, wall = _busy_on(cpu, 0.3)  # the calling thread waits for the other process; no worker does
    finally:
        busy.kill()
        busy.wait()
    assert waited / wall < 0.05


@linux_only
def test_a_worker_that_ended_keeps_its_last_reading():
    stop = threading.Event()
    worker = threading.Thread(target=_hash_until, args=(stop, min(os.sched_getaffinity(0))))
    worker.start()
    time.sleep(0.02)
    read, close = run_queue.workers_wait_clock()
    try:
        before = read()
        stop.set()
        worker.join()
        assert read() >= before  # no error, nothing lost
    finally:
        close()


def test_a_timed_round_its_passes_and_its_record_carry_the_workers_wait(monkeypatch):
    now = [0]
    monkeypatch.setattr(time, "perf_counter_ns", lambda: now[0])
    monkeypatch.setattr(run_queue, "wait_clock", run_queue.unavailable)
    # the workers wait 0.25 ns per ns of wall clock
    monkeypatch.setattr(run_queue, "workers_wait_clock", lambda: (lambda: now[0] // 4, lambda: None))

    def call():
        now[0] += 2_000_000

    timer = CpuTimer(call)
    plan = sampling.Plan(samples_per_round=5, warmup_calls=0, inner_loops=1)
    passes = []
    for _ in range(2):
        measurement = sampling.start_measurement(timer, plan)
        sampling.take_round(timer, plan, measurement)
        passes.append(measurement)
    assert passes[0].workers_wait_s == pytest.approx(0.0025)
    both = pooled(passes, target_ci=0.01)
    assert both.workers_wait_s == pytest.approx(0.005)
    how = Sampling.from_json(Sampling(workers_wait_s=both.workers_wait_s).to_json(), "sampling")
    record = _record(how, samples=len(both.samples_ms))
    assert record.workers_waited() == pytest.approx(0.25)
    assert "the worker threads of 1 benchmark(s) waited for a CPU other processes held" in cpu_sharing_line([record])
    assert cpu_sharing_line([_record(Sampling(workers_wait_s=0.0004), samples=10)]) is None  # 2%: ordinary


@pytest.mark.parametrize(
    ("waited_s", "history", "status"),
    [
        (0.006, True, "INCONCLUSIVE"),  # 30% of 20 ms: held back
        (0.0008, True, "REGRESSED"),  # 4%: ordinary scheduling
        (0.006, False, "REGRESSED"),  # A/B: both sides measured under the same load
    ],
)
def test_a_regression_is_held_back_only_in_history_mode_and_past_the_bar(waited_s, history, status):
    record = _record(Sampling(workers_wait_s=waited_s), samples=10)
    verdict = Verdict(record.id, status="REGRESSED", severity="severe", ratio=1.3, threshold=0.05)
    judged = run_conditions.review(
        [record], {record.id: verdict}, start_canary_ms=[], threshold=0.05, baseline_runs=[] if history else None
    )[record.id]
    assert judged.status == status
    if status == "INCONCLUSIVE":
        assert "its worker threads waited 30% of the timed wall clock" in " ".join(judged.notes)
        assert "--bench-ab=REF" in judged.hint()


def _record(how: Sampling, samples: int = 1) -> BenchRecord:
    return BenchRecord(
        nodeid="t.py::test_k",
        name=None,
        group="g",
        timer="cpu",
        rounds_ms=[2.0],
        stats=None,
        samples_ms=[2.0] * samples,
        sampling=how,
    )
