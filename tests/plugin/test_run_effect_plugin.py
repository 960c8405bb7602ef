"""History mode's run-effect model through the plugin: five benchmarks on fake clocks whose runs
share a drift (as a real machine's runs do), a three-run baseline, then candidate runs."""

import shutil

import pytest

from pytest_tesserabench import cli
from pytest_tesserabench.measure import canary

# Every benchmark of a run is scaled by SHIFT (the run's shared drift) and by SLOWER_<name> (a
# change of its own); 1% round noise and 0.3% of benchmark-own drift, seeded per run.
WORKLOAD = """
import os, random, time, pytest
from pytest_tesserabench.machine import neighbours, run_queue

RUN = int(os.environ.get("RUN", "0"))
SHIFT = float(os.environ.get("SHIFT", "1"))

CALLS = {}  # name -> calls of its test so far in this process
WAITED = [0]  # WAIT: the share of each call's wall clock spent waiting for a CPU (another process's)

@pytest.fixture
def fake_clock(monkeypatch):
    now = [0]
    monkeypatch.setattr(time, "perf_counter_ns", lambda: now[0])
    # no real waits on a fake clock; a fake one when WAIT is set
    monkeypatch.setattr(run_queue, "wait_clock", lambda: (lambda: WAITED[0], lambda: None))
    # OTHERS: CPUs other processes keep busy beside the benchmark (none unless set)
    others = float(os.environ.get("OTHERS", "0"))
    monkeypatch.setattr(neighbours, "others_clock", lambda: (lambda: (int(others * now[0]), now[0]), lambda: None))
    return now

@pytest.mark.parametrize("name", ["a", "b", "c", "d", "e"])
def test_work(bench, name, fake_clock):
    rng = random.Random(f"{RUN}-{name}")
    own = 1 + rng.gauss(0, 0.003)
    scale = SHIFT * own * float(os.environ.get("SLOWER_" + name, "1"))

    wait = float(os.environ.get("WAIT", "0"))

    CALLS[name] = CALLS.get(name, 0) + 1  # which pass this is (each pass calls the test again)
    if str(CALLS[name]) in os.environ.get("SLOW_PASSES", "").split(","):
        scale *= 1.3  # the machine's slow state over this pass

    def kernel():
        ran = int(2e6 * scale * (1 + rng.gauss(0, 0.01)))
        fake_clock[0] += int(ran / (1 - wait))
        WAITED[0] += int(ran / (1 - wait)) - ran

    bench(kernel)
"""
ARGS = (
    "--bench-max-time=0.15",
    "--bench-warmup=0.02",
    "--bench-min-rounds=8",
    "-p",
    "no:randomly",
    "--bench-save-processes=0",
)


@pytest.fixture
def baseline(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")  # notes on one line
    pytester.makepyfile(test_kernels=WORKLOAD)
    save_runs(pytester, monkeypatch, "main")
    return pytester


def save_runs(pytester, monkeypatch, name, *options):
    """Three baseline runs whose shared drift differs (1.0, 1.03, 0.98), then a candidate's RUN;
    the last save's output."""
    for run, shift in enumerate((1.0, 1.03, 0.98)):
        monkeypatch.setenv("RUN", str(run))
        monkeypatch.setenv("SHIFT", str(shift))
        result = pytester.runpytest(f"--bench-save={name}", *options, *ARGS)
        result.assert_outcomes(passed=5)
    monkeypatch.setenv("RUN", "99")
    return result


def canary_reads(monkeypatch, ms):
    monkeypatch.setattr(canary, "measure_canary", lambda samples=canary.CANARY_SAMPLES: [ms] * samples)


def test_a_machine_slower_for_every_benchmark_fails_only_the_one_slowed_on_its_own(baseline, monkeypatch):
    # the whole run +30% (and the canary with it), e (measured last) +30% more on its own; in one
    # pass over the suite the first benchmarks are judged before others are measured
    save_runs(baseline, monkeypatch, "onepass", "--bench-passes=1")
    monkeypatch.setenv("SHIFT", "1.3")
    monkeypatch.setenv("SLOWER_e", "1.3")
    canary_reads(monkeypatch, 2.6)
    result = baseline.runpytest("--bench-compare=onepass", "--bench-passes=1", *ARGS)
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["e * REGRESSED (severe) *", "*shared shift +*% removed (4 other benchmarks*"])
    # the failure's own line says the shift was removed (else +30% reads against times +69% apart)
    result.stdout.fnmatch_lines(["*Failed: REGRESSED (severe), *, this run's shared shift +*% removed"])
    result.stdout.fnmatch_lines(["d * UNCHANGED *", "*shared shift +*% removed (3 other benchmarks*"])
    # a, b, c came before three others were measured: no shift to remove yet, and the canary's
    # +30% move since the baseline makes their +30% uncertain rather than a regression
    result.stdout.fnmatch_lines(
        ["a * INCONCLUSIVE *", "*no shared shift removed*the canary at the start of this run moved +30.0% since*"]
    )
    result.stdout.fnmatch_lines(["inconclusive test_kernels.py::test_work[[]a[]]: the machine's speed moved since*"])
    result.stdout.fnmatch_lines(
        # (three saves of five benchmarks leave the suite's own interval wider than 5%: it says so)
        [
            "suite-wide shift +*% over 5 benchmarks, the machine (canary) +30.0%: this run cannot tell whether the "
            "whole suite got +5.0% slower (*beyond the machine*"
        ]
    )
    assert "FAILED: suite-wide" not in result.stdout.str()


def test_with_interleaved_passes_even_the_first_benchmark_has_the_shift_removed(baseline, monkeypatch):
    # as above, in the default passes (4 when comparing): the earlier passes measured every
    # benchmark before the reported pass judges the first
    monkeypatch.setenv("SHIFT", "1.3")
    monkeypatch.setenv("SLOWER_a", "1.3")
    canary_reads(monkeypatch, 2.6)
    result = baseline.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["a * REGRESSED (severe) *", "*shared shift +*% removed (4 other benchmarks*"])
    # The others cannot be told unchanged: under a shared shift, a's own regression is one more way
    # the benchmarks took it unalike (which benchmark took how much of it one run cannot say).
    result.stdout.fnmatch_lines(["b * INCONCLUSIVE *", "*shared shift +*% removed (4 other benchmarks*unalike)"])
    assert "UNCHANGED" not in result.stdout.str()


@pytest.mark.parametrize(
    "sharing, how",
    [
        # another process took the timing thread's CPU 30% of the time
        ({"WAIT": "0.3"}, "the timing thread waited 30% of the time for it"),
        # a spare CPU, so no wait, but another process kept one busy beside it (caches, memory
        # bandwidth, the core's SMT sibling)
        ({"OTHERS": "1"}, "other processes kept 1.0 CPUs busy beside it"),
    ],
)
def test_a_regression_timed_on_a_shared_cpu_stands_with_a_note(baseline, monkeypatch, capsys, sharing, how):
    monkeypatch.setenv("SLOWER_c", "1.3")
    monkeypatch.setenv("OTHERS", "0.4")  # below the bar: no note
    result = baseline.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=4, failed=1)
    assert "the CPU was shared" not in result.stdout.str() and "other processes shared" not in result.stdout.str()
    for name, value in sharing.items():
        monkeypatch.setenv(name, value)
    result = baseline.runpytest("--bench-compare=main", "--bench-json=shared.json", *ARGS)
    result.assert_outcomes(passed=4, failed=1)
    note = f"*timed on a CPU other processes shared ({how}): confirm it in one job with --bench-ab=REF*"
    noted = ["c * REGRESSED *", note]
    result.stdout.fnmatch_lines(noted)
    result.stdout.fnmatch_lines(["the CPU was shared: *"])
    assert "shared (" not in "".join(line for line in result.outlines if line.startswith(("a ", "b ", "d ", "e ")))
    # The saved run judged again from its file (`tesserabench compare`) is judged alike.
    capsys.readouterr()
    assert cli.main(["compare", "main", "shared.json", "--dir", str(baseline.path / "baselines")]) == 1
    pytest.LineMatcher(capsys.readouterr().out.splitlines()).fnmatch_lines([*noted, "the CPU was shared: *"])


def test_every_benchmark_slower_while_the_machine_is_not_fails_the_run(baseline, monkeypatch, capsys):
    monkeypatch.setenv("SHIFT", "1.3")  # the code got slower everywhere; the canary did not move
    result = baseline.runpytest("--bench-compare=main", "--bench-json=run.json", "--bench-md=run.md", *ARGS)
    failed = "FAILED: suite-wide shift +*% over 5 benchmarks, the machine (canary) +0.0%: *does not explain it*"
    result.stdout.fnmatch_lines([failed])
    assert result.ret == 1
    in_summary = [f"- **{failed}**"]  # the CI summary says it, in bold
    summary = (baseline.path / "run.md").read_text()
    pytest.LineMatcher(summary.splitlines()).fnmatch_lines(in_summary)
    # the baseline as the repository names it, not where this runner's checkout lies
    assert "compared with baseline main (baselines/main/" in summary and str(baseline.path) not in summary
    # and so does `tesserabench compare` on the run's file, and its summary
    capsys.readouterr()
    args = ["compare", "main", "run.json", "--dir", str(baseline.path / "baselines"), "--md", "again.md"]
    assert cli.main(args) == 1
    pytest.LineMatcher(capsys.readouterr().out.splitlines()).fnmatch_lines([failed])
    pytest.LineMatcher((baseline.path / "again.md").read_text().splitlines()).fnmatch_lines(in_summary)


def test_a_suite_wide_slowdown_fails_the_run_even_when_no_single_test_fails(baseline, monkeypatch):
    # the code +50% everywhere while the machine moved +15%: the first benchmarks are uncertain by
    # that move, the later ones have the shared shift removed; the run itself must still fail
    monkeypatch.setenv("SHIFT", "1.5")
    canary_reads(monkeypatch, 2.3)
    result = baseline.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=5)
    result.stdout.fnmatch_lines(
        ["FAILED: suite-wide shift +*% over 5 benchmarks, the machine (canary) +15.0%*does not explain it*"]
    )
    assert result.ret == 1


def canary_during_the_run(monkeypatch, start_ms, local_ms):
    """The canary reads ``start_ms`` at the start and end of the run, ``local_ms`` right before
    each compared benchmark."""
    monkeypatch.setattr(
        canary,
        "measure_canary",
        lambda samples=canary.CANARY_SAMPLES: [start_ms if samples == canary.CANARY_SAMPLES else local_ms] * samples,
    )


def test_a_regression_is_judged_on_the_benchmarks_whatever_the_canary_read_during_the_run(baseline, monkeypatch):
    # The canary (a sort) read the machine +30% slower while the benchmarks ran; the benchmarks
    # themselves did not move, and the one slowed on its own still fails.
    monkeypatch.setenv("SLOWER_b", "1.25")
    canary_during_the_run(monkeypatch, 2.0, 2.6)
    result = baseline.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=4, failed=1)
    result.stdout.fnmatch_lines(["b * REGRESSED (severe) *"])


def test_a_whole_run_in_a_slower_machine_state_does_not_fail_when_the_canaries_before_the_benchmarks_show_it(
    baseline, monkeypatch, capsys
):
    # On the CI VM whole runs sat in the slow speed state while the canary at the start and end
    # caught the fast one: every benchmark +37%, the start canary +0%, those before the benchmarks
    # +37% (the baseline's read 2 ms before its benchmarks, as here at start and end).
    monkeypatch.setenv("SHIFT", "1.37")
    canary_during_the_run(monkeypatch, 2.0, 2.74)
    result = baseline.runpytest("--bench-compare=main", "--bench-json=run.json", *ARGS)
    result.stdout.fnmatch_lines(
        ["suite-wide shift +3?.?% over 5 benchmarks, the machine (canary) +37.0%: this run cannot tell*"]
    )
    assert "FAILED: suite-wide" not in result.stdout.str() and result.ret == 0
    # the summary's canary line says what the suite-wide line says, not what the start canary read
    result.stdout.fnmatch_lines(["canary: 1.370x the baseline's*"])
    capsys.readouterr()
    cli.main(["compare", "main", "run.json", "--dir", str(baseline.path / "baselines")])
    pytest.LineMatcher(capsys.readouterr().out.splitlines()).fnmatch_lines(["canary: 1.370x the baseline's*"])


def test_a_slow_stretch_over_some_passes_is_not_a_suite_wide_slowdown(baseline, monkeypatch):
    # every benchmark 1.3x slower in passes 1 and 2 of 4 (the canary, timed before each benchmark
    # in the last pass, saw nothing); a slower code would slow every pass
    monkeypatch.setenv("SLOW_PASSES", "1,2")
    result = baseline.runpytest("--bench-compare=main", "--bench-passes=4", *ARGS)
    result.stdout.fnmatch_lines(["suite-wide shift * over 5 benchmarks, *: this run cannot tell whether*"])
    assert "FAILED: suite-wide" not in result.stdout.str() and result.ret == 0
    monkeypatch.setenv("SLOW_PASSES", "1,2,3,4")
    result = baseline.runpytest("--bench-compare=main", "--bench-passes=4", *ARGS)
    result.stdout.fnmatch_lines(
        ["FAILED: suite-wide shift +*% over 5 benchmarks, *does not explain it (three quarters of them at least +*"]
    )


def test_a_machine_that_got_faster_during_the_run_is_not_said(baseline, monkeypatch):
    # the start canary ran on a CPU still clocking up: every later canary reads faster
    canary_during_the_run(monkeypatch, 2.6, 2.0)
    result = baseline.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=5)
    assert "the machine was" not in result.stdout.str()


def test_tesserabench_compare_judges_a_run_file_as_the_plugin_did(baseline, monkeypatch, tmp_path, capsys):
    import json

    from pytest_tesserabench.cli import main

    monkeypatch.setenv("SHIFT", "1.3")
    monkeypatch.setenv("SLOWER_e", "1.3")
    canary_reads(monkeypatch, 2.6)
    out = tmp_path / "run.json"
    baseline.runpytest("--bench-compare=main", f"--bench-json={out}", *ARGS)
    run = json.loads(out.read_text())["benchmarks"]
    e = run["test_kernels.py::test_work[e]"]
    # "now" is what was measured (2 ms x 1.3 x 1.3), the change the shift-corrected one
    assert e["verdict"]["candidate_ms"] == pytest.approx(e["stats"]["median_ms"], rel=0.02)
    assert e["verdict"]["ratio"] == pytest.approx(1.3, rel=0.05)
    capsys.readouterr()
    assert main(["compare", "main", str(out), "--dir", str(baseline.path / "baselines")]) == 1
    text = capsys.readouterr().out
    for bench_id, record in run.items():
        name = bench_id.split("[")[1].rstrip("]")
        assert any(line.startswith(f"{name} ") and record["verdict"]["status"] in line for line in text.splitlines()), (
            bench_id,
            text,
        )


def _git(path, *args):
    import subprocess

    return subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, text=True).stdout.strip()


@pytest.mark.parametrize(
    "recorded_on", ["a clean commit", "a modified checkout", "a commit this clone lacks", "run from a subdirectory"]
)
def test_inconclusive_verdicts_are_given_the_ab_command_that_settles_them(
    pytester, monkeypatch, capsys, tmp_path, recorded_on
):
    monkeypatch.setenv("COLUMNS", "300")
    pytester.makeini("[pytest]\n")  # the rootdir, whichever directory pytest runs in
    pytester.mkdir("sub")
    (pytester.path / "sub" / "test_kernels.py").write_text(WORKLOAD)
    _git(pytester.path, "init", "-q")
    _git(pytester.path, "add", "sub", "tox.ini")
    _git(pytester.path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "kernels")
    sha = _git(pytester.path, "rev-parse", "HEAD")
    if recorded_on == "a modified checkout":
        (pytester.path / "sub" / "test_kernels.py").write_text(WORKLOAD + "\n# edited\n")
    saved_by = save_runs(pytester, monkeypatch, "main", "--bench-passes=1")
    modified = f"tesserabench: saved from a modified checkout of {sha[:12]} (uncommitted changes to tracked files)*"
    if recorded_on == "a modified checkout":  # the save says so when it happens, not only a compare
        saved_by.stdout.fnmatch_lines([modified + "save baselines from clean commits"])
    else:
        saved_by.stdout.no_fnmatch_line(modified)
    if recorded_on == "a commit this clone lacks":  # as in a shallow CI clone
        (path,) = (pytester.path / "baselines" / "main").glob("*.json")
        path.write_text(path.read_text().replace(sha, "f" * 40))
        sha = "f" * 40
    if recorded_on == "run from a subdirectory":
        monkeypatch.chdir(pytester.path / "sub")
    monkeypatch.setenv("SHIFT", "1.3")  # a, b, c are INCONCLUSIVE (as in the test above)
    canary_reads(monkeypatch, 2.6)
    summary, saved = pytester.path / "summary.md", pytester.path / "run.json"
    result = pytester.runpytest(
        "--bench-compare=main", "--bench-passes", "1", "--bench-threshold", "6", f"--bench-md={summary}",
        f"--bench-json={saved}", *ARGS,
    )  # fmt: skip
    result.stdout.fnmatch_lines(["a * INCONCLUSIVE *"])
    if recorded_on == "a modified checkout":  # the commit is not what was measured: no command
        said = (
            "3 of 5 timed benchmark(s) INCONCLUSIVE*; to judge them, the baseline's newest run was recorded "
            f"on a modified checkout of {sha[:12]}, *"
        )
        result.stdout.fnmatch_lines([said])
        result.stdout.no_fnmatch_line("*measure them beside the baseline's commit*")
        pytest.LineMatcher(summary.read_text().splitlines()).fnmatch_lines(["- " + said])  # the CI summary too
        return
    # this run's measuring and judging options carried (--bench-passes, --bench-compare are not),
    # the tests as they are named from where pytest ran
    path = "test_kernels.py" if recorded_on == "run from a subdirectory" else "sub/test_kernels.py"
    result.stdout.fnmatch_lines(
        [
            "3 of 5 timed benchmark(s) INCONCLUSIVE, *; to judge them, measure them beside the baseline's commit "
            f"in one job, which cancels the machine's drift: `pytest --bench-ab={sha[:12]} --bench-threshold=6 "
            "--bench-max-time=0.15 "
            f"--bench-warmup=0.02 --bench-min-rounds=8 '{path}::test_work[[]a[]]' '{path}::test_work[[]b[]]' "
            f"'{path}::test_work[[]c[]]'`"
            + (f" (this clone lacks that commit*git fetch origin {sha}* first)" if "lacks" in recorded_on else "")
            + "; --bench-unresolved=fail fails them"
        ]
    )
    assert result.stdout.str().count("INCONCLUSIVE, not judged") == 1  # one line says it, under the table
    # and a line under the comparison says, for each, what would settle it (not a warning apiece)
    assert [line.split(": ")[0] for line in result.stdout.lines if line.startswith("inconclusive ")] == [
        f"inconclusive sub/test_kernels.py::test_work[{name}]"
        for name in "abc"  # (ids, as the rows name them)
    ]
    # the CI summary a pull request shows says it too
    pytest.LineMatcher(summary.read_text().splitlines()).fnmatch_lines(
        [
            "- 3 of 5 timed benchmark(s) INCONCLUSIVE, *; to judge them, measure them beside the baseline's "
            "commit in one job, *: "
            f"`pytest --bench-ab={sha[:12]} *`*"
        ]
    )
    if recorded_on in ("a clean commit", "run from a subdirectory"):  # and `tesserabench compare`,
        capsys.readouterr()  # the tests named from where it runs
        cli.main(["compare", "main", str(saved), "--dir", str(pytester.path / "baselines")])
        pytest.LineMatcher(capsys.readouterr().out.splitlines()).fnmatch_lines(
            [
                f"3 of 5 timed benchmark(s) INCONCLUSIVE, *measure them beside *: `pytest --bench-ab={sha[:12]} "
                f"'{path}::test_work[[]a[]]' '{path}::test_work[[]b[]]' *`*"
            ]
        )
        # files copied elsewhere: no project to name the tests in, so no command rather than a wrong one
        shutil.copytree(pytester.path / "baselines", tmp_path / "baselines")
        monkeypatch.chdir(tmp_path)
        cli.main(["compare", "main", str(saved)])
        out = capsys.readouterr().out
        assert "a " in out and "INCONCLUSIVE" in out and "measure them beside" not in out, out


@pytest.mark.parametrize("passes", ["1", "4"])
def test_a_saved_run_judged_again_from_its_file_gets_the_plugins_verdicts(baseline, monkeypatch, passes):
    # The case where order matters: in one pass a, b, c are judged before three others are
    # measured (INCONCLUSIVE, the canary moved), d and e after (the shift removed); the file's
    # keys are sorted, so the order comes from measured_order. In four passes the plugin knew the
    # earlier passes only while judging; the file's pass_rounds give them back.
    import json

    from pytest_tesserabench.gate.pipeline import judge_run
    from pytest_tesserabench.history import baseline as baselines

    name = "main" if passes == "4" else "onepass"  # (a baseline in other passes judges nothing)
    if passes == "1":
        save_runs(baseline, monkeypatch, "onepass", "--bench-passes=1")
    monkeypatch.setenv("SHIFT", "1.3")
    monkeypatch.setenv("SLOWER_a", "1.25")
    canary_reads(monkeypatch, 2.6)
    result = baseline.runpytest(  # measured in reverse id order: sorting the keys reorders them
        f"--bench-compare={name}", f"--bench-passes={passes}", "--bench-json=run.json", "-p", "no:randomly",
        "test_kernels.py::test_work[e]", "test_kernels.py::test_work[d]", "test_kernels.py::test_work[c]",
        "test_kernels.py::test_work[b]", "test_kernels.py::test_work[a]", *ARGS,
    )  # fmt: skip
    data = json.loads((baseline.path / "run.json").read_text())
    assert data["measured_order"] == [f"test_kernels.py::test_work[{n}]" for n in "edcba"]
    in_run = {i: r["verdict"]["status"] for i, r in data["benchmarks"].items()}
    assert len(set(in_run.values())) > 1, result.stdout.str()  # a mixed run, not a trivial one
    (path,) = (baseline.path / "baselines" / name).glob("*.json")
    run = baselines.load_runs(baseline.path / "run.json")[0]
    again = judge_run(run, baselines.load_runs(path))
    assert {i: v.status for i, v in again.items()} == in_run


# Two benchmarks per test, and one ("a") that streams memory: its time follows the memory canary.
TWINS = """
import os, random, time, pytest

@pytest.fixture
def fake_clock(monkeypatch):
    now = [0]
    monkeypatch.setattr(time, "perf_counter_ns", lambda: now[0])
    return now

@pytest.mark.parametrize("name", ["a", "b", "c", "d"])
def test_work(bench, name, fake_clock):
    rng = random.Random(f"{os.environ['RUN']}-{name}-{os.environ.get('PASSES_SEEN', '')}")
    scale = float(os.environ["SHIFT"]) * (1 + rng.gauss(0, 0.01))
    if name == "a":
        scale *= float(os.environ["MEMORY"])

    def kernel():
        fake_clock[0] += int(2e6 * scale * (1 + rng.gauss(0, 0.01)))

    def twin():
        fake_clock[0] += int(1e6 * scale * (1 + rng.gauss(0, 0.02)))

    bench(kernel)
    bench(twin, name="twin")
"""


@pytest.mark.parametrize("passes", ["1", "4"])
def test_a_run_file_is_judged_to_the_digit_as_the_plugin_judged_it(pytester, monkeypatch, passes):
    # Every number of every verdict, not only its status: each benchmark's shift as the plugin knew
    # it (a test's benchmarks judged together; earlier passes' centres as measured, before the
    # memory's correction, whose canary the plugin had not yet), the memory's correction and all.
    import os

    from pytest_tesserabench.gate.pipeline import judge_run
    from pytest_tesserabench.history import baseline

    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setattr(canary, "measure_memory_canary", lambda: 1.3 * float(os.environ["MEMORY"]))
    pytester.makepyfile(test_kernels=TWINS)
    args = (*ARGS, f"--bench-passes={passes}")
    for run, (shift, memory) in enumerate(((1.0, 1.0), (1.03, 1.15), (0.98, 0.95), (1.01, 1.08), (0.99, 1.03))):
        monkeypatch.setenv("RUN", str(run))
        monkeypatch.setenv("SHIFT", str(shift))
        monkeypatch.setenv("MEMORY", str(memory))
        pytester.runpytest("--bench-save=main", *args).assert_outcomes(passed=4)
    monkeypatch.setenv("RUN", "99")
    monkeypatch.setenv("SHIFT", "1.1")
    monkeypatch.setenv("MEMORY", "1.25")
    pytester.runpytest("--bench-compare=main", "--bench-json=run.json", *args)
    (path,) = (pytester.path / "baselines" / "main").glob("*.json")
    runs = baseline.load_runs(pytester.path / "run.json")
    live = {i: r.verdict for i, r in runs[0].benchmarks.items()}
    again = judge_run(runs[0], baseline.load_runs(path))
    assert len(live) == 8 and any("memory" in note for v in live.values() for note in v.notes)
    for bench_id, verdict in live.items():
        judged = again[bench_id]
        notes = tuple(n.replace("process(es) the run file kept:", "process(es):") for n in judged.notes)
        assert (judged.status, judged.stage, notes) == (verdict.status, verdict.stage, verdict.notes), bench_id
        assert judged.ratio == pytest.approx(verdict.ratio, rel=1e-9), bench_id
        assert judged.ci == pytest.approx(verdict.ci, rel=1e-9), bench_id
        assert judged.p_value == pytest.approx(verdict.p_value, rel=1e-9, abs=1e-12), bench_id
