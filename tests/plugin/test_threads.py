"""--bench-threads: one size for the torch, OpenMP and BLAS pools of every process that measures,
and a line when torch's pool outnumbers the CPUs the benchmarks got."""

import dataclasses

import pytest

from pytest_tesserabench import options
from pytest_tesserabench.machine import threads
from pytest_tesserabench.processes.served import measurement_args
from pytest_tesserabench.record.results import BenchRecord, Sampling
from pytest_tesserabench.report.terminal import cpu_sharing_line

POOLS_SEEN = """
import os, pytest
torch = pytest.importorskip("torch")

def test_pools(bench):
    seen = {}

    def step():
        seen["torch"] = torch.get_num_threads()
        seen["env"] = {pool: os.environ.get(pool) for pool in %r}
        return torch.ones(8).sum()

    bench(step)
    print("SEEN", seen["torch"], sorted(set(seen["env"].values()), key=str))
"""


def test_the_pools_are_sized_for_the_session_and_left_alone_without_it(pytester, monkeypatch):
    pytest.importorskip("torch")
    for pool in threads.POOLS:
        monkeypatch.delenv(pool, raising=False)
    pytester.makepyfile(test_pools=POOLS_SEEN % (threads.POOLS,))
    args = ("-s", "-p", "no:randomly", "--bench-max-time=0.02", "--bench-warmup=0")
    result = pytester.runpytest_subprocess("--bench", "--bench-threads=3", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*SEEN 3 [[]'3'[]]"])
    result.stdout.fnmatch_lines(["tesserabench: measuring; * thread pools 3 (--bench-threads)*"])
    # a conftest that loaded torch before the plugin configured: its pool is set directly
    pytester.makeconftest("import torch")
    result = pytester.runpytest_subprocess("--bench", "--bench-threads=3", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*SEEN 3 [[]'3'[]]"])
    (pytester.path / "conftest.py").unlink()
    result = pytester.runpytest_subprocess("--bench", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*SEEN * [[]None[]]"])  # not set: the libraries choose


def test_a_bad_thread_count_names_the_option():
    with pytest.raises(options.SettingsError, match=r"--bench-threads='0'.*whole number of threads from 1"):
        options.resolve({"bench_threads": "0"}, {}, __import__("pathlib").Path("."))


def test_fresh_and_served_processes_measure_with_the_same_pools():
    settings = options.Settings(enabled=True, threads=2)
    assert "--bench-threads=2" in measurement_args(settings)
    assert not any(arg.startswith("--bench-threads") for arg in measurement_args(options.Settings(enabled=True)))


def _record(others_cpu_s: float) -> BenchRecord:
    record = BenchRecord("t.py::test", None, "t.py::test", "cpu", [1.0], None)
    return dataclasses.replace(record, sampling=Sampling(others_cpu_s=others_cpu_s, others_wall_s=1.0))


def test_the_summary_says_when_torch_threads_outnumber_the_cpus_left():
    # two busy neighbours on two CPUs, torch's two threads: they wait for each other
    line = cpu_sharing_line([_record(1.8)], pool=2, cpus=2)
    assert "other processes kept 1.8 CPUs busy" in line
    assert "torch's pool has 2 threads for the 0.2 of 2 CPUs other processes left" in line
    assert "--bench-threads=1" in line
    # one thread, or room for the pool: nothing to say about threads
    assert "torch's pool" not in cpu_sharing_line([_record(1.8)], pool=1, cpus=2)
    assert "torch's pool" not in cpu_sharing_line([_record(0.6)], pool=2, cpus=4)
    # more threads than CPUs on a quiet machine: said on its own
    assert cpu_sharing_line([_record(0.0)], pool=8, cpus=2).startswith("Torch's pool has 8 threads")
    assert cpu_sharing_line([_record(0.0)], pool=2, cpus=2) is None


def _threaded(own_cpu_s: float, threads: int, name: str = "t.py::test") -> BenchRecord:
    record = BenchRecord(name, None, name, "cpu", [1.0], None)
    sampling = Sampling(own_cpu_s=own_cpu_s, others_wall_s=1.0, threads=threads)
    return dataclasses.replace(record, sampling=sampling)


def test_a_benchmark_that_kept_more_cpus_busy_than_bench_threads_gives_is_named():
    from pytest_tesserabench.report.rows import notes
    from pytest_tesserabench.report.terminal import report_notes, threads_beyond_line

    beyond = _threaded(1.7, 1, "t.py::test_fft")
    line = threads_beyond_line([beyond, _threaded(1.0, 1, "t.py::test_one")])
    assert line.startswith("1 benchmark(s) kept more CPUs busy than --bench-threads=1 gives them: test_fft (1.7 CPUs)")
    assert "workers=" in line and "--bench-ab=REF" in line
    assert "1.7 CPUs busy" in notes(beyond)
    assert line in report_notes([beyond])  # the reports' and `tesserabench compare`'s notes too
    # within half a CPU of the option, or no option given (pools as the process had them): nothing said
    assert threads_beyond_line([_threaded(1.4, 1), _threaded(1.9, 0), _threaded(2.3, 2)]) is None
    assert not any("CPUs busy" in note for note in notes(_threaded(1.9, 0)))


def test_the_summary_names_a_benchmark_past_bench_threads(pytester, monkeypatch):
    # what the CPUs read is the machine's: the record's reading is fixed here, the wiring is tested
    monkeypatch.setattr(BenchRecord, "own_cpus", lambda self: 1.8)
    pytester.makepyfile(test_one="def test_one(bench):\n    bench(sum, range(100))\n")
    args = ("-p", "no:randomly", "--bench-max-time=0.02", "--bench-warmup=0")
    result = pytester.runpytest("--bench", "--bench-threads=1", *args)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["1 benchmark(s) kept more CPUs busy than --bench-threads=1 gives them: test_one (1.8 CPUs)*"]
    )
    result = pytester.runpytest("--bench", *args)
    result.assert_outcomes(passed=1)
    assert "kept more CPUs busy" not in result.stdout.str()
