"""The bench fixture: a plain call without --bench, a measurement with it."""

import importlib.util
import json

import pytest

from pytest_tesserabench.machine import device as machine


def test_without_bench_calls_once_and_returns(pytester):
    pytester.makepyfile("""
        calls = []
        def f(x, *, y):
            calls.append(1)
            return x + y
        def test_a(bench):
            assert bench(f, 1, y=2, flops=10, name="n") == 3
            assert calls == [1]
            assert not bench.enabled and bench.records == {}
    """)
    pytester.runpytest().assert_outcomes(passed=1)


def test_with_bench_measures_and_records(pytester, fast, tmp_path):
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        calls = []
        def f(n):
            calls.append(1)
            return sum(range(n))
        def test_a(bench):
            assert bench(f, 1000, flops=2000, bytes=8000) == 499500
            bench(f, 10, name="small")
            bench.extra_info["note"] = "kept"
            assert len(calls) > 10
    """)
    result = pytester.runpytest("--bench", f"--bench-json={out}", *fast)
    result.assert_outcomes(passed=1)
    run = json.loads(out.read_text())
    assert run["schema"] == 1 and run["machine"] and run["started"].endswith("Z")
    ids = sorted(run["benchmarks"])
    assert ids == [
        "test_with_bench_measures_and_records.py::test_a",
        "test_with_bench_measures_and_records.py::test_a::small",
    ]
    rec = run["benchmarks"][ids[0]]
    stats = rec["stats"]
    for key in ("median_ms", "ci95_ms", "mean_ms", "min_ms", "max_ms", "iqr_ms", "stdev_ms", "cv", "rounds", "noisy"):
        assert key in stats
    assert stats["rounds"] == len(rec["rounds_ms"]) >= 3
    assert len(rec["samples_ms"]) >= stats["rounds"]
    assert stats["ci95_ms"][0] <= stats["median_ms"] <= stats["ci95_ms"][1]
    assert rec["timer"] == "cpu" and rec["flops"] == 2000 and rec["bytes"] == 8000
    assert rec["tflops"] == pytest.approx(2000 / (stats["median_ms"] / 1e3) / 1e12)
    assert rec["gbps"] == pytest.approx(8000 / (stats["median_ms"] / 1e3) / 1e9)
    assert rec["extra_info"] == {"note": "kept"}
    assert rec["group"] == "test_with_bench_measures_and_records.py::test_a"
    assert rec["function"] == "f"
    # the table's row of the unlabelled call names the function it measured
    result.stdout.fnmatch_lines(
        ["test_with_bench_measures_and_records.py::test_a*", "benchmark*", "*", "f *", "small *"]
    )


def test_an_unlabelled_call_of_a_lambda_or_a_local_function_has_a_row_that_says_so(pytester, fast):
    pytester.makepyfile("""
        def test_local(bench):
            def work():
                return sum(range(100))
            bench(work)
        def test_lambda(bench):
            bench(lambda: sum(range(100)))
    """)
    result = pytester.runpytest("--bench", *fast)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*::test_lambda", "benchmark*", "*", "(unlabelled) *"])
    result.stdout.fnmatch_lines(["*::test_local", "benchmark*", "*", "work *"])


def test_two_unlabelled_calls_are_refused(pytester, fast):
    pytester.makepyfile("""
        def test_a(bench):
            bench(sum, [1])
            bench(sum, [2])
    """)
    result = pytester.runpytest("--bench", *fast)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*already called with name=None*give each measured call its own name=*"])


def test_non_callable_is_refused_with_a_hint(pytester):
    pytester.makepyfile("""
        def test_a(bench):
            bench(sum([1, 2]))
    """)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*expects a function to measure*got int 3*not bench(fn(*args))*"])
    assert "def __call__" not in result.stdout.str()  # the test's line, not the plugin's source


def test_bad_flops_is_refused(pytester, fast):
    pytester.makepyfile("""
        def test_a(bench):
            bench(sum, [1], flops=-5)
    """)
    result = pytester.runpytest("--bench", *fast)
    result.stdout.fnmatch_lines(["*bench(flops=-5): expected a non-negative number of flops*"])


@pytest.mark.parametrize("measure", [False, True])
def test_a_misspelt_bench_keyword_is_named(pytester, fast, measure):
    pytester.makepyfile("""
        def add(a, b):
            return a + b

        def test_a(bench):
            bench(add, 1, 2, flop=3)
    """)
    result = pytester.runpytest(*(("--bench", *fast) if measure else ()))
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*flop= was passed on to the function; did you mean bench(..., flops=...)?*"])


def test_a_function_that_raises_errors_the_test_and_records_nothing(pytester, fast, tmp_path):
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        def boom():
            raise KeyError("kernel exploded")
        def test_ok(bench):
            bench(sum, [1])
        def test_bad(bench):
            bench(boom)
    """)
    result = pytester.runpytest("--bench", f"--bench-json={out}", *fast)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(
        ["*KeyError: 'kernel exploded'*", "*tesserabench: raised by boom during its first call; nothing was recorded*"]
    )
    assert list(json.loads(out.read_text())["benchmarks"]) == [
        "test_a_function_that_raises_errors_the_test_and_records_nothing.py::test_ok"
    ]


def test_check_accuracy_records_and_asserts(pytester, fast, tmp_path):
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        import numpy as np
        def test_close(bench):
            x = bench(np.add, np.ones(8), 1e-6)
            bench.check_accuracy(x, np.ones(8), "fp32")
        def test_far(bench):
            x = bench(np.add, np.ones(8), 0.5)
            bench.check_accuracy(x, np.ones(8), "bf16")
    """)
    result = pytester.runpytest("--bench", f"--bench-json={out}", *fast)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*accuracy check failed for precision bf16: 8 of 8 elements*max abs error 0.5*"])
    rec = json.loads(out.read_text())["benchmarks"]["test_check_accuracy_records_and_asserts.py::test_close"]
    assert rec["accuracy"]["max_abs"] == pytest.approx(1e-6, rel=1e-3)


def test_check_accuracy_also_runs_without_bench(pytester):
    pytester.makepyfile("""
        def test_far(bench):
            bench.check_accuracy([1.0, 2.0], [1.0, 3.0], "fp16")
    """)
    result = pytester.runpytest()
    result.assert_outcomes(failed=1)
    # shown at the test's line, as an assert would be, not in the plugin's frames
    failure = result.stdout.str().split("FAILURES")[1].split("short test summary")[0]
    assert "AccuracyError" in failure and "bench.check_accuracy(" in failure
    assert "pytest_tesserabench/" not in failure


def test_marker_overrides_budget_and_group(pytester, tmp_path):
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        import pytest
        @pytest.mark.bench(min_rounds=7, max_time=0.01, warmup=0, group="sums")
        def test_a(bench):
            bench(sum, [1, 2, 3])
    """)
    pytester.runpytest("--bench", f"--bench-json={out}").assert_outcomes(passed=1)
    rec = json.loads(out.read_text())["benchmarks"]["test_marker_overrides_budget_and_group.py::test_a"]
    assert rec["stats"]["rounds"] >= 7 and rec["group"] == "sums"


def test_bad_marker_argument_fails_with_its_name(pytester, fast):
    pytester.makepyfile("""
        import pytest
        @pytest.mark.bench(max_tim=3)
        def test_a(bench):
            bench(sum, [1])
    """)
    result = pytester.runpytest("--bench", *fast)
    result.stdout.fnmatch_lines(["*@pytest.mark.bench on *test_a: unknown argument(s) max_tim*"])


def test_a_call_that_never_returns_fails_its_test_and_the_run_goes_on(pytester, fast, tmp_path):
    """--bench-timeout: a hang in the first call or in the measurement fails that test, naming the
    call; the other tests are measured; @pytest.mark.bench(timeout=0) lifts the limit for one
    test. (A subprocess: the limit is a SIGALRM timer, which needs the main thread.)"""
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        import time
        import pytest
        import scipy.stats  # (the first measurement's imports, out of the limited window on a loaded machine)
        import pytest_tesserabench.record.stats
        calls = []
        def hangs_later():
            calls.append(1)
            if len(calls) > 3:
                time.sleep(3600)
        def test_hangs_in_measurement(bench):
            bench(hangs_later)
        def test_hangs_at_once(bench):
            bench(time.sleep, 3600, name="sleepy")
        def test_fine(bench):
            bench(sum, [1, 2, 3])
        @pytest.mark.bench(timeout=0)
        def test_no_limit(bench):
            bench(time.sleep, 0.002)
    """)
    result = pytester.runpytest_subprocess(
        "--bench", "--bench-timeout=5", f"--bench-json={out}", "-p", "no:randomly", *fast, timeout=300
    )
    result.assert_outcomes(passed=2, failed=2)
    result.stdout.fnmatch_lines(
        [
            "*bench(hangs_later) did not return within 5 s (its timeout, 5 s, past its measuring budget of * s): "
            "the test fails here and the rest*raise the limit (@pytest.mark.bench(timeout=SECONDS) on the test, "
            "or --bench-timeout=SECONDS for every test; 0 for none)",
            "*bench(sleep, name='sleepy') did not return within 5 s (its timeout, 5 s, past *",
        ]
    )
    measured = json.loads(out.read_text())["benchmarks"]
    assert sorted(i.split("::")[1] for i in measured) == ["test_fine", "test_no_limit"]


def test_a_budget_longer_than_the_limit_is_not_a_hang(pytester, fast):
    """Two seconds of measuring (a target interval it never reaches) under a 1 s limit: the limit
    counts past the budget, so the test passes. (A subprocess: SIGALRM needs the main thread.)"""
    pytester.makepyfile("def test_a(bench):\n    bench(sum, range(100))\n")
    result = pytester.runpytest_subprocess(
        "--bench", "--bench-timeout=1", *fast, "--bench-max-time=2", "--bench-target-ci=0.0001", timeout=300
    )
    result.assert_outcomes(passed=1)


def test_the_time_limit_counts_past_what_the_call_may_take_by_design():
    """A budget larger than --bench-timeout is not a hang: the limit counts past it (under A/B,
    past the settling and every served process's warm-up too)."""
    from pytest_tesserabench.measure.time_limit import ab_waits_s, budget_s
    from pytest_tesserabench.options import Settings

    plain = Settings(max_time=3600.0, warmup=1.0)
    assert budget_s(plain) == 1.0 + 2 * 3600.0
    ab = Settings(max_time=1.0, warmup=0.1, ab="main", ab_processes=8, settle_time=2.0)
    assert ab_waits_s(ab) == 2.0 + 16 * 0.1 and budget_s(ab) == 0.1 + 2.0 + ab_waits_s(ab)


def test_the_time_limit_leaves_an_earlier_timer_to_fire_and_rearms_a_later_one():
    """pytest-timeout's signal method arms the same timer: the earlier of the two speaks."""
    import signal

    from pytest_tesserabench.measure.time_limit import time_limit

    fired = []
    previous = signal.signal(signal.SIGALRM, lambda *_: fired.append(1))
    try:
        signal.setitimer(signal.ITIMER_REAL, 1000)  # a later timer: ours replaces it, then it is back
        with time_limit(5, "bench(f)"):
            assert 4 < signal.getitimer(signal.ITIMER_REAL)[0] <= 5
        assert 990 < signal.getitimer(signal.ITIMER_REAL)[0] <= 1000
        signal.setitimer(signal.ITIMER_REAL, 2)  # an earlier one: left as it is
        with time_limit(5, "bench(f)"):
            assert signal.getitimer(signal.ITIMER_REAL)[0] <= 2
        with time_limit(0, "bench(f)"):  # no limit: nothing armed
            assert signal.getitimer(signal.ITIMER_REAL)[0] <= 2
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    assert fired == []


def test_require_is_a_noop_on_cpu_timers_but_recorded(pytester, fast, tmp_path):
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        import time
        def test_a(bench):
            bench(time.sleep, 0.001)
            bench(sum, [1], name="fast")
            bench.require(at_least=0.9, relative_to="fast")   # far slower, but timed on the CPU
    """)
    pytester.runpytest("--bench", f"--bench-json={out}", *fast).assert_outcomes(passed=1)
    rec = json.loads(out.read_text())["benchmarks"]["test_require_is_a_noop_on_cpu_timers_but_recorded.py::test_a"]
    (target,) = rec["targets"]
    assert target["checked"] is False and target["met"] is False and target["ratio"] < 0.1


def test_require_names_a_missing_call(pytester, fast):
    pytester.makepyfile("""
        def test_a(bench):
            bench(sum, [1])
            bench.require(at_least=1, relative_to="torch")
    """)
    result = pytester.runpytest("--bench", *fast)
    result.stdout.fnmatch_lines(["*no measured call named 'torch'*"])


@pytest.mark.skipif(machine.cuda_capability() is not None, reason="needs a machine without a CUDA GPU")
def test_forcing_a_cuda_timer_without_a_gpu_is_one_usage_error(pytester, fast):
    pytester.makepyfile("""
        def test_a(bench):
            bench(sum, [1])
        def test_b(bench):
            bench(sum, [2])
    """)
    result = pytester.runpytest("--bench", "--bench-timer=cuda_event", *fast)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --bench-timer=cuda_event: no CUDA GPU is usable here*--bench-timer=auto*"])
    assert "Traceback" not in result.stdout.str() + result.stderr.str()


def test_bench_trace_writes_a_chrome_trace_per_benchmark(pytester, fast, tmp_path):
    """(A process of its own: torch's profiler aborts a process in which the Triton interpreter
    ran a kernel earlier, as another test's in-process run may have; that crash is not this
    test's subject.)"""
    pytest.importorskip("torch")
    traces = tmp_path / "traces"
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        import torch
        def test_a(bench):
            x = torch.ones(64, 64)
            bench(torch.mm, x, x)
    """)
    result = pytester.runpytest_subprocess(f"--bench-trace={traces}", f"--bench-json={out}", *fast, timeout=300)
    result.assert_outcomes(passed=1)
    (trace,) = traces.iterdir()
    assert trace.name.endswith(".trace.json") and "traceEvents" in trace.read_text()
    rec = json.loads(out.read_text())["benchmarks"]["test_bench_trace_writes_a_chrome_trace_per_benchmark.py::test_a"]
    assert rec["trace"] == str(trace)


def test_bench_ncu_without_ncu_is_a_clear_skip(pytester, fast, tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no ncu on this PATH
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        def test_a(bench):
            bench(sum, [1, 2])
    """)
    result = pytester.runpytest("--bench-ncu", f"--bench-json={out}", *fast)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*--bench-ncu: hardware counters skipped:*"])
    rec = json.loads(out.read_text())["benchmarks"]["test_bench_ncu_without_ncu_is_a_clear_skip.py::test_a"]
    assert rec["ncu"]["available"] is False and rec["ncu"]["reason"]


def test_bench_ncu_gives_each_benchmark_of_a_test_its_own_kernels(pytester, fast, tmp_path, monkeypatch):
    import stat
    import sys

    from pytest_tesserabench.machine import device as machine
    from pytest_tesserabench.machine import profiling

    header = '"ID","Kernel Name","Metric Name","Metric Unit","Metric Value"'
    rows = [(0, "spin_kernel(long)", 1000), (1, "ours", 2000), (2, "spin_kernel(long)", 1000), (3, "theirs", 5000)]
    sample = tmp_path / "ncu.csv"
    sample.write_text(
        "\n".join([header, *(f'"{i}","{n}","gpu__time_duration.sum","nsecond","{t}"' for i, n, t in rows)])
    )
    fake = tmp_path / "ncu"  # writes the CSV where the command asks for it
    fake.write_text(
        f"#!{sys.executable}\nimport sys\nargs = sys.argv[1:]\n"
        f"open(args[args.index('--log-file') + 1], 'w').write(open({str(sample)!r}).read())\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(machine, "gpu_plausibly_present", lambda: True)
    monkeypatch.setattr(profiling, "ncu_available", lambda: str(fake))
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        def test_a(bench):
            bench(sum, [1, 2])
            bench(sum, [3, 4], name="theirs")
    """)
    result = pytester.runpytest("--bench-ncu", f"--bench-json={out}", *fast)
    result.assert_outcomes(passed=1)
    records = json.loads(out.read_text())["benchmarks"].values()
    assert [[k["name"] for k in r["ncu"]["kernels"]] for r in records] == [["ours"], ["theirs"]]


def test_under_ncu_each_benchmark_marks_its_profiled_call(pytester, fast, monkeypatch):
    import contextlib

    from pytest_tesserabench.machine import profiling

    events = []
    monkeypatch.setenv(profiling.NCU_ENV_VAR, "1")  # the child pytest that --bench-ncu starts
    monkeypatch.setattr(profiling, "ncu_region", lambda: contextlib.nullcontext(events.append("region")))
    monkeypatch.setattr(profiling, "mark_benchmark", lambda: events.append("marker"))
    pytester.makepyfile("""
        def test_a(bench):
            bench(sum, [1, 2])
            bench(sum, [3, 4], name="theirs")
    """)
    pytester.runpytest("--bench", *fast).assert_outcomes(passed=1)
    assert events == ["region", "marker"] * 2


def test_a_function_that_fails_while_measured_is_explained(pytester, fast, tmp_path):
    pytester.makepyfile("""
        calls = []
        def flaky():
            calls.append(1)
            if len(calls) > 3:
                raise MemoryError("out of memory")
        def test_a(bench):
            bench(flaky)
    """)
    result = pytester.runpytest("--bench", *fast)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(
        ["*MemoryError: out of memory*", "*raised by flaky during measurement (it passed its first call)*"]
    )
    # the traceback goes from the test's bench() line to the raise, not through the plugin's frames
    assert "pytest_tesserabench/" not in result.stdout.str().split("FAILURES")[1].split("short test summary")[0]


def test_a_triton_launch_without_a_gpu_driver_names_the_interpreter(pytester, fast):
    pytester.makepyfile("""
        def launch():
            raise RuntimeError("0 active drivers ([]). There should only be one.")  # Triton's words
        def test_a(bench):
            bench(launch)
    """)
    result = pytester.runpytest("--bench", *fast)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*0 active drivers*", "*no GPU driver here*--bench-interpret=auto*"])


def test_a_numpy_arrays_dtype_is_recorded_too(pytester, fast, tmp_path):
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        import numpy as np

        def test_np(bench):
            bench(np.negative, np.ones(8, dtype=np.float32))
            bench(np.negative, np.ones(8), name="double")
            bench(np.negative, np.ones(8, dtype=np.int64), name="ints")
    """)
    pytester.runpytest("--bench", f"--bench-json={out}", *fast).assert_outcomes(passed=1)
    records = json.loads(out.read_text())["benchmarks"]
    assert {i.split("::", 1)[1]: r["dtype"] for i, r in records.items()} == {
        "test_np": "fp32",
        "test_np::double": "fp64",
        "test_np::ints": None,
    }


def test_a_tensors_dtype_is_recorded_as_a_precision_policy_names_it(pytester, fast, tmp_path):
    # A record's dtype reads alike whether a bench_precision marker or a tensor named it (the CSV's
    # column, the run file): fp32, not float32 beside fp32. (In a subprocess: torch cannot be
    # imported again in a process whose earlier in-process pytest runs imported and dropped it.)
    if importlib.util.find_spec("torch") is None:
        pytest.skip("needs torch")
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        import pytest, torch

        def test_plain(bench):
            bench(torch.neg, torch.ones(8))
            bench(torch.neg, torch.ones(8, dtype=torch.bfloat16), name="half")

        @pytest.mark.bench_precision("fp32")
        def test_marked(bench, precision):
            bench(torch.neg, torch.ones(8, dtype=precision.dtype))
    """)
    pytester.runpytest_subprocess("--bench", f"--bench-json={out}", *fast).assert_outcomes(passed=2)
    records = json.loads(out.read_text())["benchmarks"]
    assert {i.split("::", 1)[1]: r["dtype"] for i, r in records.items()} == {
        "test_plain": "fp32",
        "test_plain::half": "bf16",
        "test_marked[fp32]": "fp32",
    }
