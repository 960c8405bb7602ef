"""The wiring between the hooks, the session, the gate and the files: each test here fails when
one connection is cut (a deliberate mutation of the plugin survived none of them)."""

import json

import pytest
from snippets import FAKE_CLOCK

from pytest_tesserabench.machine import device as machine
from pytest_tesserabench.measure import canary

# A fake clock: the "kernel" takes 2 ms x SLOWER_<name> per call with 1% round noise and a
# seeded per-run drift, so verdicts do not depend on how busy the machine is.
WORKLOAD = (
    """
import math, os, random, time, pytest
from pytest_tesserabench.machine import run_queue

RUN = int(os.environ.get("RUN", "0"))

"""
    + FAKE_CLOCK
    + """

def kernel_for(name, fake_clock, noise=0.01):
    rng = random.Random(f"{RUN}-{name}")
    level = math.exp(rng.gauss(0, float(os.environ.get("DRIFT", "0.005"))))
    scale = float(os.environ.get("SLOWER_" + name, "1"))
    def kernel():
        fake_clock[0] += int(2e6 * scale * level * math.exp(rng.gauss(0, noise)))
    return kernel

@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_work(bench, name, fake_clock):
    bench(kernel_for(name, fake_clock))
    if os.environ.get("LABELLED"):
        bench(kernel_for(name + "x", fake_clock), name="twin")

@pytest.mark.bench(threshold=50)
def test_tolerant(bench, fake_clock):
    bench(kernel_for("t", fake_clock))
"""
)
ARGS = ("--bench-max-time=0.15", "--bench-warmup=0.02", "--bench-min-rounds=8", "--bench-save-processes=0")
ALL = 4  # benchmarks in the workload


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # tables unwrapped: these tests read lines, not layout
    pytester.makepyfile(test_w=WORKLOAD)
    return pytester


def baseline_file(pytester):
    return pytester.path / "baselines" / "main" / f"{machine.machine_key()}.json"


def save_runs(pytester, monkeypatch, n=3, *extra):
    for run in range(n):
        monkeypatch.setenv("RUN", str(run))
        pytester.runpytest("--bench-save=main", *ARGS, *extra).assert_outcomes(passed=ALL)
    monkeypatch.setenv("RUN", "99")


def run_json(pytester, tmp_path, *args):
    out = tmp_path / "run.json"
    result = pytester.runpytest(f"--bench-json={out}", *ARGS, *args)
    return result, json.loads(out.read_text())


def test_a_labelled_call_the_test_stopped_making_is_missing(project, monkeypatch, tmp_path):
    monkeypatch.setenv("LABELLED", "1")
    save_runs(project, monkeypatch)
    monkeypatch.delenv("LABELLED")
    result, run = run_json(project, tmp_path, "--bench-compare=main")
    result.assert_outcomes(passed=ALL)
    result.stdout.fnmatch_lines(["test_w.py::test_work*", "*a · twin *MISSING*in the baseline*"])
    result.stdout.fnmatch_lines(["*3 missing*"])


def test_alpha_is_split_over_the_selected_benchmarks(project, monkeypatch, tmp_path):
    save_runs(project, monkeypatch)
    _, run = run_json(project, tmp_path, "--bench-compare=main")
    assert [r["verdict"]["alpha_per_test"] for r in run["benchmarks"].values()] == [pytest.approx(0.01 / ALL)] * ALL
    _, alone = run_json(project, tmp_path, "--bench-compare=main", "test_w.py::test_work[a]")
    (record,) = alone["benchmarks"].values()
    assert record["verdict"]["alpha_per_test"] == pytest.approx(0.01)


def test_an_inconclusive_verdict_says_once_what_would_settle_it(project, monkeypatch):
    monkeypatch.setenv("DRIFT", "0.1")  # runs 10% apart: +25% is large, but within that drift
    save_runs(project, monkeypatch)
    monkeypatch.setenv("SLOWER_a", "1.25")
    result = project.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=ALL, warnings=0)  # (not a warning apiece besides)
    # a's noise alone left it undecided: the summary's one line names it with what it could catch
    # and what judges it, no line of its own (one whose interval is mostly the run's shift, a cause
    # of its own, would have one)
    result.stdout.fnmatch_lines(
        [
            "a * INCONCLUSIVE *",
            "* INCONCLUSIVE, not judged at their threshold: *test_work[[]a[]] (it could catch *% or more)*; to judge "
            "them: --bench-ab=REF *",
        ]
    )
    out = result.stdout.str()
    assert "inconclusive test_w.py::test_work[a]:" not in out and out.count("test_work[a] (it could catch") == 1
    assert all(out.count(f"inconclusive test_w.py::test_work[{name}]:") <= 1 for name in "bc")


def test_what_a_run_could_not_judge_is_said_and_fails_with_bench_unresolved_fail(project, monkeypatch, tmp_path):
    monkeypatch.setenv("DRIFT", "0.1")  # runs 10% apart: +25% is large, but within that drift
    save_runs(project, monkeypatch)
    monkeypatch.setenv("SLOWER_a", "1.25")
    result, run = run_json(project, tmp_path, "--bench-compare=main")
    result.assert_outcomes(passed=ALL)  # warn (the default): passes with a warning
    record = run["benchmarks"]["test_w.py::test_work[a]"]["verdict"]
    assert record["status"] == "INCONCLUSIVE" and record["detectable"] > 0.25 and record["threshold"] == 0.05
    undecided = [v for r in run["benchmarks"].values() if (v := r["verdict"])["status"] == "INCONCLUSIVE"]
    timed = [r for r in run["benchmarks"].values() if r["verdict"]["ratio"] is not None]
    line = (
        f"NOTHING JUDGED: all {len(timed)} timed benchmark(s) are INCONCLUSIVE*"
        if len(undecided) == len(timed)
        else f"{len(undecided)} of {len(timed)} timed benchmark(s) INCONCLUSIVE, not judged at their threshold: *"
    )
    result.stdout.fnmatch_lines(
        [line + "test_work[[]a[]] (it could catch *% or more)*--bench-unresolved=fail fails them"]
    )
    strict = project.runpytest("--bench-compare=main", "--bench-unresolved=fail", *ARGS)
    strict.assert_outcomes(passed=ALL - len(undecided), failed=len(undecided))
    strict.stdout.fnmatch_lines(["FAILED test_w.py::test_work[[]a[]] - Failed: INCONCLUSIVE*"])
    assert "(--bench-unresolved=fail)" in strict.stdout.str()


def test_the_canary_is_timed_at_start_and_end(project, tmp_path):
    _, run = run_json(project, tmp_path, "--bench")
    assert len(run["canary_ms"]) == 2 * canary.CANARY_SAMPLES


def test_saved_baselines_hold_no_verdicts_while_the_run_file_does(project, monkeypatch, tmp_path):
    save_runs(project, monkeypatch)
    _, run = run_json(project, tmp_path, "--bench-compare=main", "--bench-save=main")
    assert all(r["verdict"]["status"] == "UNCHANGED" for r in run["benchmarks"].values())
    saved = json.loads(baseline_file(project).read_text())["runs"][-1]["benchmarks"]
    assert len(saved) == ALL and all(r["verdict"] is None for r in saved.values())


def test_a_per_test_threshold_from_the_marker_is_applied_and_shown(project, monkeypatch, tmp_path):
    save_runs(project, monkeypatch)
    monkeypatch.setenv("SLOWER_t", "1.3")
    monkeypatch.setenv("SLOWER_a", "1.3")
    result, run = run_json(project, tmp_path, "--bench-compare=main")
    result.assert_outcomes(passed=ALL - 1, failed=1)  # test_work[a] fails; test_tolerant does not
    tolerant = run["benchmarks"]["test_w.py::test_tolerant"]["verdict"]
    assert tolerant["status"] == "UNCHANGED" and tolerant["threshold"] == pytest.approx(0.5)
    assert run["benchmarks"]["test_w.py::test_work[a]"]["verdict"]["threshold"] == pytest.approx(0.05)


def test_a_software_change_is_shown_from_the_baselines_version_to_this_ones(project, monkeypatch):
    save_runs(project, monkeypatch, 1)
    path = baseline_file(project)
    data = json.loads(path.read_text())
    data["runs"][-1]["machine"]["python"] = "3.0.1"
    path.write_text(json.dumps(data))
    result = project.runpytest("--bench-compare=main", *ARGS)
    result.stdout.fnmatch_lines(
        [f"*software differs from the baseline: python 3.0.1 -> {machine.machine_info()['python']}*"]
    )


def test_baseline_benchmarks_whose_tests_did_not_run_are_counted(project, monkeypatch):
    save_runs(project, monkeypatch, 1)
    result = project.runpytest("--bench-compare=main", *ARGS, "-k", "tolerant")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["3 baseline benchmark(s) belong to tests that did not run in this session*"])


def test_a_benchmark_that_ran_out_of_time_is_marked_noisy(project, tmp_path):
    # 30% round noise and a target interval of 0.1%: the budget runs out first.
    noisy = WORKLOAD.replace("noise=0.01", "noise=0.3")
    project.makepyfile(test_w=noisy)
    result, run = run_json(project, tmp_path, "--bench", "--bench-target-ci=0.1", "-k", "tolerant")
    assert run["benchmarks"]["test_w.py::test_tolerant"]["stats"]["noisy"] is True
    result.stdout.fnmatch_lines(["test_w.py::test_tolerant", "kernel *noisy"])  # (the row: the function measured)
