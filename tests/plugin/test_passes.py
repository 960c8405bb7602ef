"""Interleaved passes over the suite (--bench-passes): every benchmark test runs in each pass,
alternating direction; only the last pass is reported, with every pass's rounds pooled."""

import json

import pytest
from snippets import FAKE_CLOCK, TRITON_WORKLOAD

WORKLOAD = (
    """
import os, time, pytest
from pytest_tesserabench.machine import run_queue

LOG = os.environ["PASSES_LOG"]

def log(word):
    with open(LOG, "a") as f:
        f.write(word + " ")

"""
    + FAKE_CLOCK
    + """

@pytest.fixture
def prepared():
    log("setup")

@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_work(bench, name, fake_clock, prepared):
    log(name)
    def kernel():
        fake_clock[0] += 2_000_000
    bench(kernel)

def test_plain():
    log("plain")
"""
)
ARGS = (
    "--bench-max-time=0.1",
    "--bench-warmup=0",
    "--bench-min-rounds=4",
    "-p",
    "no:randomly",
    "--bench-save-processes=0",
)


@pytest.fixture
def project(pytester, monkeypatch, tmp_path):
    log = tmp_path / "log.txt"
    monkeypatch.setenv("PASSES_LOG", str(log))
    pytester.makepyfile(test_kernels=WORKLOAD)
    return pytester, log


def words(log):
    text = log.read_text() if log.exists() else ""
    log.unlink(missing_ok=True)
    return [w for w in text.split() if w != "setup"]


def test_every_benchmark_test_runs_in_every_pass_alternating_and_is_reported_once(project):
    pytester, log = project
    result = pytester.runpytest("--bench", "--bench-passes=3", "--bench-json=out.json", *ARGS)
    result.assert_outcomes(passed=4)  # three benchmarks and the plain test, each reported once
    result.stdout.fnmatch_lines(["*3 interleaved passes over the benchmark tests*", "*pass 2 of 3 over 3*"])
    # forwards, backwards, then the reported pass forwards; the plain test only there
    assert words(log) == ["a", "b", "c", "c", "b", "a", "a", "b", "c", "plain"]
    records = json.loads((pytester.path / "out.json").read_text())["benchmarks"]
    assert len(records) == 3
    for record in records.values():
        assert record["sampling"]["passes"] == 3
        assert len(record["sampling"]["pass_rounds"]) == 3 and sum(record["sampling"]["pass_rounds"]) == len(
            record["rounds_ms"]
        )
        assert min(record["sampling"]["pass_rounds"]) >= 3  # a pass's centre is a median: 3 rounds at least
        assert len(record["sampling"]["memory_canary"]) == 3  # the machine's memory after each pass (gate/memory.py)
        assert record["stats"]["median_ms"] == pytest.approx(2.0)


def test_each_pass_starts_its_measurements_on_the_next_cpu(project, monkeypatch):
    # (machine/cpu_turns.py: a slow vCPU then touches some passes of a process, not all of them)
    from pytest_tesserabench.measure import passes

    pytester, _ = project
    turns = []
    monkeypatch.setattr(passes, "start_on_cpu", lambda turn, timer: turns.append((turn, timer)))
    pytester.runpytest("--bench", "--bench-passes=3", *ARGS).assert_outcomes(passed=4)
    assert turns == [(k, "cpu") for k in (0, 0, 0, 1, 1, 1, 2, 2, 2)]  # pass by pass, each of its three benchmarks
    turns.clear()
    pytester.runpytest("--bench", *ARGS).assert_outcomes(passed=4)
    assert turns == []  # one pass: measured where the scheduler puts it


def test_only_the_reported_pass_times_the_canary_beside_a_benchmark(project, monkeypatch):
    # (an earlier pass's record is not kept: its canary would be thrown away, 60 ms a benchmark)
    from pytest_tesserabench.measure import canary

    pytester, log = project
    calls = []
    real = canary.measure_canary

    def counted(samples=canary.CANARY_SAMPLES):
        calls.append(samples)
        return real(2)

    monkeypatch.setattr(canary, "measure_canary", counted)
    result = pytester.runpytest_inprocess(*ARGS, "--bench-passes=3", "--bench-save=main")
    result.assert_outcomes(passed=4)
    assert calls.count(canary.LOCAL_SAMPLES) == 3  # one per benchmark, in the last pass
    saved = json.loads(next((pytester.path / "baselines" / "main").glob("*.json")).read_text())
    assert all(record["canary_ms"] for record in saved["runs"][0]["benchmarks"].values())


def test_every_pass_of_a_multi_threaded_benchmark_keeps_its_pool_canary(pytester, monkeypatch):
    # (measure/canary.py: the gate reads torch's thread pool at its fastest over the passes, as it
    # reads the benchmark's centre, so each pass's reading must reach the record; real clocks: the
    # CPUs a benchmark kept busy are read from them)
    from pytest_tesserabench.measure import canary

    pytester.makepyfile(
        "import pytest\n"
        "@pytest.mark.parametrize('n', [10, 20, 30])\n"
        "def test_work(bench, n):\n"
        "    bench(sum, range(n))\n"
        "def test_plain():\n"
        "    pass\n"
    )
    readings = iter(0.007 + 0.001 * k for k in range(100))
    monkeypatch.setattr(canary, "POOL_CPUS", 0.0)  # (every benchmark counts as multi-threaded here)
    monkeypatch.setattr(canary, "measure_pool_canary", lambda threads: next(readings))
    result = pytester.runpytest("--bench", "--bench-passes=3", "--bench-json=out.json", *ARGS)
    result.assert_outcomes(passed=4)
    records = json.loads((pytester.path / "out.json").read_text())["benchmarks"]
    by_pass = sorted(r["sampling"]["pool_canary_ms"] for r in records.values())
    assert [len(p) for p in by_pass] == [3, 3, 3]  # one per pass
    assert sorted(x for p in by_pass for x in p) == pytest.approx([0.007 + 0.001 * k for k in range(9)])


def test_auto_makes_passes_when_saving_or_comparing_and_one_otherwise(project):
    pytester, log = project
    pytester.runpytest("--bench", "--bench-json=one.json", *ARGS).assert_outcomes(passed=4)
    assert words(log) == ["a", "b", "c", "plain"]
    one = json.loads((pytester.path / "one.json").read_text())["benchmarks"]
    assert {r["sampling"]["passes"] for r in one.values()} == {1}
    pytester.runpytest("--bench-save=main", *ARGS).assert_outcomes(passed=4)
    assert words(log).count("a") == 4
    saved = json.loads(next((pytester.path / "baselines" / "main").glob("*.json")).read_text())
    assert {r["sampling"]["passes"] for r in saved["runs"][0]["benchmarks"].values()} == {4}


def test_a_test_failing_in_an_earlier_pass_is_judged_by_its_reported_run_only(pytester, monkeypatch, tmp_path):
    monkeypatch.setenv("COUNT_DIR", str(tmp_path))
    pytester.makepyfile(
        test_flaky="""
        import os
        from pathlib import Path

        def runs(name):
            path = Path(os.environ["COUNT_DIR"]) / name
            count = int(path.read_text()) + 1 if path.exists() else 1
            path.write_text(str(count))
            return count

        def test_fails_first_time_only(bench):
            assert runs("flaky") > 1, "the first pass"
            bench(lambda: None)

        def test_always_fails(bench):
            runs("broken")
            bench(lambda: None)
            assert False, "broken in every pass"
        """
    )
    result = pytester.runpytest("--bench", "--bench-passes=3", *ARGS)
    result.assert_outcomes(passed=1, failed=1)
    # one failure section (its E line) and one summary line: the earlier passes report nothing
    assert result.stdout.str().count("AssertionError: broken in every pass") == 2
    assert "E       AssertionError: the first pass" not in result.stdout.str()  # not a failure reported...
    result.stdout.fnmatch_lines(  # ...but said: a flaky test must not pass unnoticed
        ["*test_flaky.py::test_fails_first_time_only failed in pass 1 of 3 (AssertionError: the first pass*"
         "unreported; the reported run passed*"]
    )  # fmt: skip
    assert (tmp_path / "broken").read_text() == "3" and (tmp_path / "flaky").read_text() == "3"


def test_one_pass_under_xdist_and_the_header_says_why(project):
    pytester, log = project
    result = pytester.runpytest("--bench", "--bench-passes=3", "-n", "2", *ARGS)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*one pass over the benchmark tests: under pytest-xdist*"])
    assert sorted(words(log)) == ["a", "b", "c", "plain"]


def test_a_bad_number_of_passes_is_one_line(project):
    pytester, _ = project
    result = pytester.runpytest("--bench", "--bench-passes=0", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["ERROR: --bench-passes='0' (command line): must be auto or a whole number from 1 to 20"]
    )  # noqa: E501


def test_nsight_compute_reruns_a_test_once_not_once_a_pass(project, monkeypatch):
    from pytest_tesserabench.machine import profiling

    pytester, _ = project
    reruns = []
    monkeypatch.setattr(profiling, "run_ncu", lambda nodeid, args, cwd: reruns.append(nodeid) or {})
    pytester.runpytest("--bench-ncu", "--bench-passes=3", *ARGS).assert_outcomes(passed=4)
    assert sorted(reruns) == [f"test_kernels.py::test_work[{name}]" for name in "abc"]


def test_a_profiler_trace_is_taken_once_not_once_a_pass(project, monkeypatch, tmp_path):
    from pytest_tesserabench.machine import profiling

    pytester, _ = project
    traced = []
    monkeypatch.setattr(profiling, "trace_call", lambda fn, args, kwargs, path: traced.append(path) or path)
    result = pytester.runpytest_inprocess("--bench", f"--bench-trace={tmp_path / 'traces'}", "--bench-passes=3", *ARGS)
    result.assert_outcomes(passed=4)
    assert len(traced) == 3  # one per benchmark, in the reported pass


def test_a_test_timed_in_the_triton_interpreter_takes_one_earlier_pass_then_measures_once(pytester, tmp_path):
    pytest.importorskip("triton")
    from pytest_tesserabench.machine import device as machine

    if machine.gpu_plausibly_present():
        pytest.skip("the interpreter path: needs a machine without a GPU")
    log = tmp_path / "calls.txt"
    workload = TRITON_WORKLOAD.replace(
        "def test_add(bench):\n", f"def test_add(bench):\n    open({str(log)!r}, 'a').write('x')\n"
    )
    pytester.makepyfile(test_t=workload)
    # saved, too: timings the gate never compares are not measured again in fresh processes
    save = ("--bench-save=main", "--bench-save-processes=1")
    result = pytester.runpytest_subprocess("--bench", "--bench-passes=4", "--bench-json=out.json", *ARGS, *save)
    result.assert_outcomes(passed=1)
    assert log.read_text() == "xx"  # the first pass found it interpreted; then only the reported pass
    result.stdout.fnmatch_lines(
        ["*pass 1 of 4 over 1 benchmark test(s)*", "*pass 4 of 4, the one pytest runs and reports*"]
    )
    assert "pass 2 of 4" not in result.stdout.str()  # no pass is announced with nothing to run
    record = next(iter(json.loads((pytester.path / "out.json").read_text())["benchmarks"].values()))
    assert record["timer"] == "interpreter" and record["sampling"]["passes"] == 1 and "confirm" not in record
    # three rounds of one call, not the budget: the timing is shown, never gated, and not "noisy"
    assert len(record["rounds_ms"]) == 3 and record["sampling"]["samples_per_round"] == 1
    assert not record["stats"]["noisy"]
    # compared in the default passes: a record never gated decides nothing about the passes, so
    # no warning that the baseline measured in another number, and its verdict is not undecided
    compared = pytester.runpytest_subprocess("--bench-compare=main", *ARGS)
    compared.assert_outcomes(passed=1)
    assert "pass(es), this run in" not in compared.stdout.str()
    assert "INCONCLUSIVE" not in compared.stdout.str() and "centred differently" not in compared.stdout.str()


def test_a_pass_gets_its_share_of_the_budget_and_a_test_measured_once_all_of_it():
    from pytest_tesserabench.measure import passes, sampling

    plan = passes.Passes(4)
    budget = sampling.Budget(max_time=1.0, min_rounds=5, warmup=0.1)
    plan.nodeid = "t.py::test_a"
    assert plan.budget(budget) == sampling.Budget(max_time=0.25, min_rounds=3, warmup=0.025)
    plan.earlier[("t.py::test_a", None)] = [sampling.Measurement(timer="cpu")]
    plan.measure_once("t.py::test_a")
    assert plan.budget(budget) == budget and plan.earlier == {}


def refused(project, options: list[str], line: str) -> None:
    """A run with ``options`` is a usage error saying ``line`` (a pattern) before it measures anything."""
    pytester, log = project
    words(log)
    result = pytester.runpytest(*options, *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([line])
    assert words(log) == []  # nothing measured


def test_a_comparison_across_different_numbers_of_passes_is_refused_before_measuring(project):
    # The two sides are centred differently (lowest pass against all rounds): no timing verdict
    # could be given, so the run stops before minutes of measuring, and says how to fix it.
    pytester, log = project
    pytester.runpytest("--bench-save=main", *ARGS).assert_outcomes(passed=4)  # auto: 4 passes
    refused(
        project,
        ["--bench-compare=main", "--bench-passes=1"],
        "ERROR: --bench-compare=main: this run would be measured in 1 pass(es), the baseline's runs in 4: the two "
        "are centred differently, so no timing could be judged against them. To gate: record the baseline and "
        "compare with the same --bench-passes (a run under -n makes one pass: *",
    )
    # a save of it would leave a baseline whose runs judge none
    refused(project, ["--bench-save=main", "--bench-passes=1"], "ERROR: --bench-save=main: this run would be *name")
    saved = json.loads(next((pytester.path / "baselines" / "main").glob("*.json")).read_text())
    assert len(saved["runs"]) == 1
    pytester.runpytest("--bench-save=other", "--bench-passes=1", *ARGS).assert_outcomes(passed=4)  # a new name
    result = pytester.runpytest("--bench-compare=main", *ARGS)  # alike: judged, nothing said
    assert "the baseline's runs in" not in result.stdout.str() and "WARNING" not in result.stdout.str()
    result.stdout.fnmatch_lines(["a * UNCHANGED *"])


def test_a_run_under_xdist_against_a_baseline_saved_without_it_is_refused_naming_why(project):
    # A project whose addopts say -n: each worker measures in one pass, so against a baseline of
    # four no timing could be judged; said before measuring, with the reason for the one pass.
    pytest.importorskip("xdist")
    pytester, log = project
    pytester.runpytest("--bench-save=main", *ARGS).assert_outcomes(passed=4)
    refused(
        project, ["-n", "2", "--bench-compare=main"], "ERROR: --bench-compare=main: *(one pass: under pytest-xdist *"
    )


def test_a_run_file_measured_in_other_passes_reads_inconclusive_with_the_fix(project, capsys):
    # `tesserabench compare` of a run measured otherwise (the plugin refuses the run itself) gives
    # no timing verdict, each with the fix as its hint.
    from pytest_tesserabench.cli import main

    pytester, _ = project
    pytester.runpytest("--bench-save=main", *ARGS).assert_outcomes(passed=4)
    pytester.runpytest("--bench", "--bench-passes=1", "--bench-json=run.json", *ARGS).assert_outcomes(passed=4)
    baseline = next((pytester.path / "baselines" / "main").glob("*.json"))
    capsys.readouterr()
    assert main(["compare", str(baseline), str(pytester.path / "run.json")]) == 0
    out = capsys.readouterr().out
    assert out.count("INCONCLUSIVE") >= 3 and "measured in 1 pass(es), the baseline's runs in 4" in out
    assert "record the baseline and compare with the same --bench-passes" in out


def test_an_undecided_verdict_across_different_numbers_of_passes_is_given_that_cause():
    # Whatever else the rule saw (drift, the canary), the passes are why no timing is judged.
    from pytest_tesserabench.gate import conditions as run_conditions
    from pytest_tesserabench.record.results import BenchRecord, RunDocument, Sampling, Verdict

    def record(passes):
        return BenchRecord("t.py::test_a", None, "t.py::test_a", "cpu", [1.0], None, sampling=Sampling(passes=passes))

    baseline_run = RunDocument(benchmarks={"t.py::test_a": record(4)})
    mine = record(1)
    undecided = Verdict(mine.id, status="INCONCLUSIVE", hint_text="re-run on a quieter machine")
    judged = run_conditions.passes_differ([mine], {mine.id: undecided}, [baseline_run])[mine.id]
    assert judged.status == "INCONCLUSIVE" and judged.hint_text == run_conditions.SAME_PASSES


def test_a_comparison_under_another_bench_threads_is_refused_before_measuring(project):
    # One thread where the baseline had the process's pools runs other code for a multi-threaded
    # benchmark: measured otherwise, as in other passes.
    pytester, log = project
    pytester.runpytest("--bench-save=main", *ARGS).assert_outcomes(passed=4)
    saved = json.loads(next((pytester.path / "baselines" / "main").glob("*.json")).read_text())
    assert {b["sampling"]["threads"] for b in saved["runs"][0]["benchmarks"].values()} == {0}
    refused(
        project,
        ["--bench-compare=main", "--bench-threads=1"],
        "ERROR: --bench-compare=main: this run would be measured with thread pools at 1 (--bench-threads), the "
        "baseline's runs as the process had them, so no timing could be judged against them. To gate: record "
        "the baseline and compare with the same --bench-threads",
    )
    result = pytester.runpytest("--bench-compare=main", *ARGS)  # alike: nothing said
    assert "thread pools at" not in result.stdout.str() and "WARNING" not in result.stdout.str()
    assert "against it the gate catches" in result.stdout.str()  # (here it is said, as the baseline is noisy)
