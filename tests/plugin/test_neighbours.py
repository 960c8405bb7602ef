"""The CPU other processes use while a benchmark is timed (pytest_tesserabench.machine.neighbours)."""

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from pytest_tesserabench.machine import neighbours
from pytest_tesserabench.measure import sampling
from pytest_tesserabench.measure.timing import CpuTimer
from pytest_tesserabench.record.results import BenchRecord, Sampling
from pytest_tesserabench.report.terminal import cpu_sharing_line

TICK_NS = 1e9 / os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 1e7


def _stat(user, nice, system, idle, iowait, irq, softirq, steal) -> str:
    first = f"cpu  {user} {nice} {system} {idle} {iowait} {irq} {softirq} {steal} 0 0"
    return first + "\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n"


def test_others_are_the_machines_busy_time_less_this_process(tmp_path, monkeypatch):
    stat = tmp_path / "stat"
    stat.write_text(_stat(100, 0, 50, 900, 10, 0, 0, 5))
    monkeypatch.setattr(neighbours, "_STAT", str(stat))
    own = [0]
    monkeypatch.setattr(time, "process_time_ns", lambda: own[0])
    monkeypatch.setattr(time, "monotonic_ns", lambda: 0)
    read, close = neighbours.others_clock()
    before = read()
    # 40 ticks of user, 10 nice, 20 system, 5 irq, 5 softirq are busy; idle, iowait and steal
    # are not; this process used 30 ticks of it.
    stat.write_text(_stat(140, 10, 70, 2000, 50, 5, 5, 99))
    own[0] = int(30 * TICK_NS)
    after = read()
    close()
    assert (after[0] - before[0]) / TICK_NS == pytest.approx(80 - 30)


def test_where_there_is_no_proc_stat_no_neighbours_are_seen(tmp_path, monkeypatch):
    monkeypatch.setattr(neighbours, "_STAT", str(tmp_path / "absent"))
    read, close = neighbours.others_clock()
    assert read() == (0, 0)
    close()


def _burn(running) -> None:
    running.set()
    while True:
        pass


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="no /proc/stat here (Linux only)")
def test_a_busy_process_reads_as_at_least_most_of_a_cpu():
    read, close = neighbours.others_clock()
    context = multiprocessing.get_context("fork")
    running = context.Event()
    burner = context.Process(target=_burn, args=(running,), daemon=True)
    burner.start()
    try:
        running.wait(10)
        cpu0, wall0 = read()
        time.sleep(0.5)
        cpu1, wall1 = read()
    finally:
        burner.kill()
        burner.join()
        close()
    # Other load on a shared test machine can only add to it (that this process's own work is
    # not counted is shown above, on a /proc/stat of known figures).
    assert (cpu1 - cpu0) / (wall1 - wall0) >= 0.8


def test_a_timed_round_its_measurement_and_record_carry_the_neighbours(monkeypatch):
    now = [0]
    monkeypatch.setattr(time, "perf_counter_ns", lambda: now[0])
    # Another process keeps 1.5 CPUs busy: 1.5 ns of its CPU time per ns of wall clock.
    monkeypatch.setattr(neighbours, "others_clock", lambda: (lambda: (int(1.5 * now[0]), now[0]), lambda: None))
    # ...and the benchmark's own two threads two: 2 ns of this process's CPU time per ns.
    monkeypatch.setattr(time, "process_time_ns", lambda: 2 * now[0])

    def call():
        now[0] += 2_000_000

    timer = CpuTimer(call)
    plan = sampling.Plan(samples_per_round=5, warmup_calls=0, inner_loops=1)
    measurement = sampling.start_measurement(timer, plan)
    sampling.take_round(timer, plan, measurement)
    sampling.take_round(timer, plan, measurement)
    assert measurement.others_wall_s == pytest.approx(0.020)
    assert measurement.others_cpu_s == pytest.approx(0.030)
    assert measurement.own_cpu_s == pytest.approx(0.040)
    data = Sampling(
        others_cpu_s=measurement.others_cpu_s, others_wall_s=measurement.others_wall_s, own_cpu_s=measurement.own_cpu_s
    ).to_json()
    record = _record(Sampling.from_json(data, "sampling"))
    assert record.others_cpus() == pytest.approx(1.5)
    assert record.own_cpus() == pytest.approx(2.0)
    assert "other processes kept 1.5 CPUs busy while the benchmarks were timed" in cpu_sharing_line([record])
    quiet = _record(Sampling(others_cpu_s=0.04, others_wall_s=0.2))
    assert quiet.others_cpus() == pytest.approx(0.2) and cpu_sharing_line([quiet]) is None


def _record(how: Sampling) -> BenchRecord:
    return BenchRecord(
        nodeid="t.py::test_k",
        name=None,
        group="g",
        timer="cpu",
        rounds_ms=[2.0],
        stats=None,
        samples_ms=[2.0],
        sampling=how,
    )


def test_a_benchmarks_record_carries_the_cpu_its_own_process_used(pytester):
    # The fixture hands the measurement's own CPU to the record (the gate reads how many CPUs a
    # multi-threaded benchmark got from it).
    pytester.makepyfile(
        """
        def test_busy(bench):
            bench(lambda: sum(range(20000)))
        """
    )
    pytester.runpytest("--bench", "--bench-max-time=0.05", "--bench-json=run.json").assert_outcomes(passed=1)
    import json

    (record,) = json.loads((pytester.path / "run.json").read_text())["benchmarks"].values()
    assert record["sampling"]["own_cpu_s"] > 0
