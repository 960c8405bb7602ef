"""End to end: save a baseline three times, compare the same code, a slower one, a corrupt file."""

import json
import re

import pytest
from snippets import FAKE_CLOCK

from pytest_tesserabench import outputs
from pytest_tesserabench.machine import device as machine
from pytest_tesserabench.record.results import BenchRecord, Sampling

# A fake clock makes the "kernel" take 2 ms per call with 1% round noise and 0.5% run-to-run
# drift, seeded per run: the gate, the files and the hooks are exercised for real, and the
# outcome does not depend on how busy the shared CI machine is.
WORKLOAD = (
    """
import os, random, time, pytest
from pytest_tesserabench.machine import run_queue

RUN = int(os.environ.get("RUN", "0"))
CALLED = {}  # test -> times its function ran in this process (once per pass)

"""
    + FAKE_CLOCK
    + """

@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_work(bench, name, fake_clock):
    rng = random.Random(f"{RUN}-{name}")
    drift = 1 + rng.gauss(0, 0.005)
    scale = float(os.environ.get("SLOWER_" + name, "1"))
    CALLED[name] = CALLED.get(name, 0) + 1
    if os.environ.get("TWO_SPEEDS") and CALLED[name] % 2:  # a machine at two speeds: every other pass
        scale *= 1.5

    def kernel():
        fake_clock[0] += int(2e6 * scale * drift * (1 + rng.gauss(0, 0.01)))

    bench(kernel)
"""
)
ARGS = ("--bench-max-time=0.15", "--bench-warmup=0.02", "--bench-min-rounds=8", "--bench-save-processes=0")


@pytest.fixture
def project(pytester):
    pytester.makepyfile(test_kernels=WORKLOAD)
    return pytester


def baseline_file(pytester):
    return pytester.path / "baselines" / "main" / f"{machine.machine_key()}.json"


def save_three(pytester, monkeypatch, *options):
    for run in range(3):
        monkeypatch.setenv("RUN", str(run))
        pytester.runpytest("--bench-save=main", *options, *ARGS).assert_outcomes(passed=3)
    monkeypatch.setenv("RUN", "99")
    data = json.loads(baseline_file(pytester).read_text())
    assert len(data["runs"]) == 3 and data["name"] == "main"
    return data


def test_save_then_compare_unchanged_passes(project, monkeypatch):
    data = save_three(project, monkeypatch)
    run = data["runs"][0]
    assert set(run["benchmarks"]) == {f"test_kernels.py::test_work[{n}]" for n in "abc"}
    assert all("samples_ms" not in b and b["rounds_ms"] for b in run["benchmarks"].values())
    assert "canary_ms" in run and run["machine"]["python"] and "commit" in run
    result = project.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*compared with baseline main*", "*UNCHANGED*"])


def test_a_save_says_which_benchmarks_the_gate_cannot_judge_at_the_threshold(project, monkeypatch):
    # 0.5% drift between runs: 10% slowdowns are within reach (5% is at the edge once a later run's
    # own drift counts: GateConfig.later_run_drift), 1% ones are not; the save says so, naming
    # them and what each can be judged at.
    save_three(project, monkeypatch)
    out = " ".join(project.runpytest("--bench-save=main", "--bench-threshold=10", *ARGS).stdout.str().split())
    assert "the gate can catch slowdowns of" not in out
    strict = " ".join(project.runpytest("--bench-save=main", "--bench-threshold=1", *ARGS).stdout.str().split())
    assert "on this machine the gate can catch slowdowns of 1% in 0 of 3 timed benchmark(s); not in" in strict
    assert "`tesserabench show main` lists them all" in strict
    caught = re.findall(r"test_kernels.py::test_work\[\w\] \(it catches ([\d.]+)% or more\)", strict)
    assert len(caught) == 3 and all(float(size) > 1 for size in caught), strict


def test_a_save_on_a_machine_whose_speed_moves_within_the_run_says_so(project, monkeypatch):
    # every other pass 1.5x slower: the passes of one process read 50% apart, which more saves
    # cannot average out; the save's word on what the gate cannot judge says why, and points at A/B
    save_three(project, monkeypatch)
    monkeypatch.setenv("TWO_SPEEDS", "1")
    out = " ".join(project.runpytest("--bench-save=main", "--bench-threshold=2", *ARGS).stdout.str().split())
    said = re.search(r"This machine's speed moved within the run: .* read a median (\d+)% apart", out)
    assert said and 45 <= int(said.group(1)) <= 55, out
    assert "--bench-ab=REF pairs blocks 50 ms apart" in out


def test_the_speed_moved_within_a_run_is_said_only_past_the_threshold():
    # (a unit test: the steady fake's passes read 0-2% apart, too near any threshold a warning
    # can be made at for a pytester run to say which side it falls)
    def record(levels):
        rounds = [level * f for level in levels for f in (0.99, 1.0, 1.01)]
        sampling = Sampling(pass_rounds=(3,) * len(levels), passes=len(levels))
        return BenchRecord("t", None, "t", "cpu", rounds, None, sampling=sampling)

    steady = [record([1.0, 1.01, 1.0, 1.005]) for _ in range(3)]
    assert outputs.speed_moved(steady, 0.05) is None
    two_speeds = [record([1.0, 1.5, 1.0, 1.5]), record([1.0, 1.3, 1.0, 1.0]), record([1.0, 1.0, 1.0, 1.01])]
    assert outputs.speed_moved(two_speeds, 0.05) == pytest.approx(0.3)
    assert outputs.speed_moved(two_speeds, 0.35) is None
    assert outputs.speed_moved([record([1.0])], 0.05) is None  # one pass: nothing to compare


def test_a_compare_says_upfront_what_the_baseline_lets_it_judge_on_this_machine(project, monkeypatch):
    save_three(project, monkeypatch)
    lenient = " ".join(project.runpytest("--bench-compare=main", "--bench-threshold=10", *ARGS).stdout.str().split())
    assert "against it the gate catches" not in lenient
    strict = " ".join(project.runpytest("--bench-compare=main", "--bench-threshold=1", *ARGS).stdout.str().split())
    said = re.search(
        r"against it the gate catches 1% slowdowns in 0 of 3 timed benchmark\(s\) on this machine, ([\d-]+)% ones",
        strict,
    )
    assert said and int(said.group(1).split("-")[0]) > 1, strict
    assert "--bench-ab=REF judges them at 1% in one job" in strict


def test_a_thirty_percent_slowdown_fails_exactly_its_test(project, monkeypatch):
    save_three(project, monkeypatch)
    monkeypatch.setenv("SLOWER_b", "1.3")
    result = project.runpytest("--bench-compare=main", *ARGS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "*_ test_work[[]b[]] _*",
            "REGRESSED (severe), *.** ms -> 2.[56]* ms, +*% [[]+*%, +*%[]], p=*, threshold 5.0%",
        ]
    )
    result.stdout.fnmatch_lines(["FAILED test_kernels.py::test_work[[]b[]]*"])


def test_a_failed_test_is_not_saved(project, monkeypatch):
    save_three(project, monkeypatch)
    before = json.loads(baseline_file(project).read_text())
    monkeypatch.setenv("SLOWER_b", "1.5")
    result = project.runpytest("--bench-compare=main", "--bench-save=main", *ARGS)
    result.assert_outcomes(passed=2, failed=1)
    after = json.loads(baseline_file(project).read_text())
    assert len(after["runs"]) == 4
    assert "test_kernels.py::test_work[b]" not in after["runs"][-1]["benchmarks"]
    assert after["runs"][:3] == before["runs"]


def test_a_corrupt_baseline_is_a_clear_error_and_stays_as_it_was(project):
    path = baseline_file(project)
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"schema": 1, "runs": [')
    for option in ("--bench-compare=main", "--bench-save=main"):
        result = project.runpytest(option, *ARGS)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([f"*{path}*"])
        assert path.read_bytes() == b'{"schema": 1, "runs": ['


def test_a_foreign_machine_key_is_refused(project):
    path = baseline_file(project)
    path.parent.mkdir(parents=True)
    original = json.dumps({"schema": 1, "name": "main", "machine_key": "nvidia-h100-sm90", "runs": []})
    path.write_text(original)
    result = project.runpytest("--bench-save=main", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*nvidia-h100-sm90*"])
    assert path.read_text() == original


def test_an_unknown_baseline_name_is_a_usage_error_listing_the_recorded_ones(project, monkeypatch):
    result = project.runpytest("--bench-compare=main", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bench-compare=main: no baseline 'main' (recorded: none yet under *baselines)*"])
    save_three(project, monkeypatch)
    result = project.runpytest("--bench-compare=mian", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no baseline 'mian' (recorded: main); record one with `pytest --bench-save=mian`*"])
    # Comparing with the name being saved for the first time is how a history starts: allowed.
    project.runpytest("--bench-compare=first", "--bench-save=first", *ARGS).assert_outcomes(passed=3)


def test_no_baseline_for_this_machine_is_a_warning_not_a_failure(project):
    other = project.path / "baselines" / "main" / "nvidia-h100-80gb-hbm3-sm90.json"
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps({"schema": 1, "name": "main", "machine_key": other.stem, "runs": []}))
    result = project.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines([f"*no baseline for this machine ({machine.machine_key()})*--bench-save=main*"])
    # said again under the results, where a green job's reader looks
    result.stdout.fnmatch_lines(["NOTHING JUDGED: --bench-compare=main: no baseline for this machine*"])
    # and refused before measuring where CI asks to fail what it cannot judge
    result = project.runpytest("--bench-compare=main", "--bench-unresolved=fail", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*no baseline for this machine*a run that can judge nothing is refused*"])


def test_the_gate_under_xdist(project, monkeypatch):
    save_three(project, monkeypatch, "-n", "2")  # (one pass under -n: a baseline saved alike)
    monkeypatch.setenv("SLOWER_c", "1.3")
    result = project.runpytest("-n", "2", "--bench-compare=main", "--bench-save=main", *ARGS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*_ test_work[[]c[]] _*", "REGRESSED (severe)*", "*1 regressed, 2 unchanged*"])
    after = json.loads(baseline_file(project).read_text())  # saved once, by the controller
    assert len(after["runs"]) == 4
    assert sorted(after["runs"][-1]["benchmarks"]) == ["test_kernels.py::test_work[a]", "test_kernels.py::test_work[b]"]


def test_bench_dir_and_threshold_options(project, monkeypatch, tmp_path):
    store = tmp_path / "elsewhere"
    for run in range(3):
        monkeypatch.setenv("RUN", str(run))
        project.runpytest("--bench-save=nightly", f"--bench-dir={store}", *ARGS).assert_outcomes(passed=3)
    assert (store / "nightly" / f"{machine.machine_key()}.json").is_file()
    assert not (project.path / "baselines").exists()
    monkeypatch.setenv("RUN", "99")
    monkeypatch.setenv("SLOWER_a", "1.3")
    # A 30% slowdown is below a 50% threshold: reported, not failed.
    result = project.runpytest("--bench-compare=nightly", f"--bench-dir={store}", "--bench-threshold=50", *ARGS)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*UNCHANGED*+[23]?.?% [[]+*"])


def test_a_saved_figure_far_from_the_baselines_earlier_runs_is_warned_about_and_kept(project, monkeypatch):
    for run in range(2):
        monkeypatch.setenv("RUN", str(run))
        project.runpytest("--bench-save=main", *ARGS).assert_outcomes(passed=3)
        assert "earlier runs" not in project.runpytest("--bench-save=other", *ARGS).stdout.str()
    monkeypatch.setenv("RUN", "2")
    monkeypatch.setenv("SLOWER_b", "3")  # one run of one benchmark on a busy machine
    result = project.runpytest("--bench-save=main", *ARGS)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        [
            "tesserabench: test_kernels.py::test_work[[]b[]]: *.* ms in this run, *x its runs' median (*.* ms); "
            "unless its code changed, the machine was busy during this run: record again on a quiet one "
            "(`tesserabench show main` lists the runs)"
        ]
    )
    assert "test_work[[]a[]]: " not in result.stdout.str()
    assert len(json.loads(baseline_file(project).read_text())["runs"]) == 3  # saved all the same
