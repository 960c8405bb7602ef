"""--bench-confirm: a benchmark about to fail in history mode is measured again in fresh processes;
a slowdown of the code stays REGRESSED, one process's own slowness does not fail the test."""

import json
import math
import re
import sys

import pytest
from snippets import FAKE_CLOCK

from pytest_tesserabench.processes import fresh as confirm
from pytest_tesserabench.record.results import BenchRecord, Sampling

# The kernel takes 2 ms of a fake clock. SLOWER_<name> slows it in every process (a change of the
# code); SLOWER_HERE_<name> only in the session's own process, not in the fresh ones --bench-confirm
# starts (they are served processes: they have the served-process key in their environment).
WORKLOAD = (
    """
import os, random, time, pytest
from pytest_tesserabench.machine import run_queue

RUN = int(os.environ.get("RUN", "0"))
FRESH = "TESSERABENCH_AB_AUTHKEY" in os.environ

"""
    + FAKE_CLOCK
    + """

@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_work(bench, name, fake_clock):
    rng = random.Random(f"{RUN}-{name}-{FRESH}")
    drift = 1 + rng.gauss(0, 0.005)
    scale = float(os.environ.get("SLOWER_" + name, "1"))
    if not FRESH:
        scale *= float(os.environ.get("SLOWER_HERE_" + name, "1"))

    calls = [0]

    def kernel():
        calls[0] += 1
        fake_clock[0] += int(2e6 * scale * drift * (1 + rng.gauss(0, 0.01)))

    bench(kernel)
    if os.environ.get("COUNT_CALLS"):  # the kernel's calls in this process (in this pass, here)
        with open(os.environ["COUNT_CALLS"], "a") as out:
            out.write(f"{'fresh' if FRESH else 'here'} {name} {calls[0]}\\n")
    assert not (FRESH and os.environ.get("FAIL_FRESH")), "fails in a fresh process"
    if FRESH and os.environ.get("SKIP_FRESH"):
        pytest.skip("need --runslow option to run")  # (a conftest's option the fresh process lacks)
    if FRESH and os.environ.get("DIE_FRESH_" + name):
        os._exit(3)  # the process dies with the test (a crash in a kernel)
"""
)
ARGS = ("--bench-max-time=0.15", "--bench-warmup=0.02", "--bench-min-rounds=8", "-p", "no:randomly")


def said(result) -> str:
    """The run's output with its lines joined (the table wraps a verdict's notes)."""
    return " ".join(result.stdout.str().split())


@pytest.fixture
def project(pytester, monkeypatch):
    pytester.makepyfile(test_kernels=WORKLOAD)
    for run in range(3):
        monkeypatch.setenv("RUN", str(run))
        pytester.runpytest("--bench-save=main", "--bench-save-processes=0", *ARGS).assert_outcomes(passed=3)
    monkeypatch.setenv("RUN", "99")
    return pytester


def test_a_slowdown_of_this_process_alone_is_not_confirmed_and_does_not_fail(project, monkeypatch):
    monkeypatch.setenv("SLOWER_HERE_b", "1.3")
    unconfirmed = project.runpytest("--bench-compare=main", "--bench-confirm=0", *ARGS)
    unconfirmed.assert_outcomes(passed=2, failed=1)  # what the gate alone says of such a process
    assert "fresh process" not in unconfirmed.stdout.str()

    result = project.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=3)
    assert re.search(
        r"measured again in 2 fresh process\(es\): [+-]\d\.\d%, [+-]\d\.\d% \(here \+[23]\d\.\d%; [\d.]+ s\); "
        r"judged on all 3",  # (centred on the median process: a fresh one)
        said(result),
    )
    result.stdout.fnmatch_lines(["1 benchmark(s) measured again in fresh processes (*s): 1 UNCHANGED (--bench-*"])


def test_a_slowdown_of_the_code_is_confirmed_and_fails_even_with_compare_in_addopts(
    project, monkeypatch, tmp_path, capsys
):
    # The project compares in its addopts: the fresh processes read them too, and must measure
    # without judging (or confirming) anything themselves.
    project.makeini("[pytest]\naddopts = --bench-compare=main\n")
    monkeypatch.setenv("SLOWER_b", "1.3")
    out = tmp_path / "run.json"
    result = project.runpytest("--bench-confirm=1", f"--bench-json={out}", *ARGS)
    result.assert_outcomes(passed=2, failed=1)
    assert re.search(
        r"measured again in 1 fresh process\(es\): \+\d\d\.\d% \(here \+\d\d\.\d%; [\d.]+ s\); judged on all 2",
        said(result),
    )
    result.stdout.fnmatch_lines(
        [
            "1 benchmark(s) measured again in fresh processes (*s): 1 REGRESSED (--bench-confirm)",
            "FAILED test_kernels.py::test_work[[]b[]] - Failed: REGRESSED (severe)*",
        ]
    )
    benchmarks = json.loads(out.read_text())["benchmarks"]
    assert benchmarks["test_kernels.py::test_work[b]"]["sampling"]["confirm_s"] > 0
    assert benchmarks["test_kernels.py::test_work[a]"]["sampling"]["confirm_s"] == 0
    (fresh,) = benchmarks["test_kernels.py::test_work[b]"]["confirm"]  # the fresh process, kept
    assert (
        len(fresh["rounds_ms"]) >= 8
        and fresh["canary_ms"] > 0
        and len(fresh["memory_canary"]) == len(fresh["pass_rounds"])  # after each block, as after each pass
        and "confirm" not in benchmarks["test_kernels.py::test_work[a]"]
    )
    # judged again from the file, it is judged on both processes, as the plugin judged it
    from pytest_tesserabench import cli

    capsys.readouterr()
    assert cli.main(["compare", "main", str(out), "--dir", str(project.path / "baselines")]) == 1
    shown = " ".join(capsys.readouterr().out.split())
    assert "measured again in 1 fresh process(es) the run file kept" in shown
    assert "test_work[b]: REGRESSED" in shown


def test_a_save_measures_in_fresh_processes_so_one_process_bias_is_not_the_baseline(pytester, monkeypatch, capsys):
    # Every saving process draws a slow state of `b` (+30%) that fresh processes do not: the
    # baseline of the session's processes alone takes it for `b`'s speed, and an unchanged run
    # that does not draw it reads IMPROVED; measured in two fresh processes per save too, the
    # baseline's centre is the speed most processes see.
    pytester.makepyfile(test_kernels=WORKLOAD)
    only_b = ("-k", "work and b")
    monkeypatch.setenv("SLOWER_HERE_b", "1.3")
    for run in range(2):
        monkeypatch.setenv("RUN", str(run))
        pytester.runpytest("--bench-save=alone", "--bench-save-processes=0", *only_b, *ARGS).assert_outcomes(passed=1)
        pytester.runpytest("--bench-save=spread", *only_b, *ARGS).assert_outcomes(passed=1)
    (path,) = (pytester.path / "baselines" / "spread").glob("*.json")
    runs = json.loads(path.read_text())["runs"]
    assert [len(run["benchmarks"]["test_kernels.py::test_work[b]"]["confirm"]) for run in runs] == [2, 2]
    (alone,) = (pytester.path / "baselines" / "alone").glob("*.json")
    assert "confirm" not in json.loads(alone.read_text())["runs"][0]["benchmarks"]["test_kernels.py::test_work[b]"]

    monkeypatch.setenv("RUN", "99")
    monkeypatch.delenv("SLOWER_HERE_b")
    verdicts = {}
    for name in ("alone", "spread"):
        out = pytester.path / f"{name}.json"
        result = pytester.runpytest(f"--bench-compare={name}", f"--bench-json={out}", *only_b, *ARGS)
        result.assert_outcomes(passed=1)
        verdicts[name] = json.loads(out.read_text())["benchmarks"]["test_kernels.py::test_work[b]"]["verdict"]
    result.stdout.fnmatch_lines(
        ["*baseline spread (*, 2 run(s), measured in 6 processes; the timings of 1 benchmark(s))"]
    )
    assert verdicts["alone"]["status"] == "IMPROVED" and verdicts["alone"]["ratio"] < 0.8
    assert verdicts["spread"]["status"] != "IMPROVED" and verdicts["spread"]["ratio"] == pytest.approx(1, abs=0.03)
    assert (verdicts["alone"]["history"], verdicts["spread"]["history"]) == (2, 6)
    # judged again from the files, the baselines are read alike
    from pytest_tesserabench import cli

    for name, improved in (("alone", True), ("spread", False)):
        capsys.readouterr()
        cli.main(["compare", name, str(pytester.path / f"{name}.json"), "--dir", str(pytester.path / "baselines")])
        assert ("1 improved" in capsys.readouterr().out) == improved


def test_a_fresh_process_measures_a_benchmark_with_as_many_calls_as_its_passes_here(pytester, monkeypatch):
    # A save measures in 4 passes here, each sizing its rounds to its share of --bench-max-time;
    # a fresh process measures as many blocks of as many rounds, so its rounds must hold as many
    # calls (sized to the whole budget they held 4 times as many: each fresh block cost a whole
    # measurement, and its round medians were steadier readings than the passes').
    pytester.makepyfile(test_kernels=WORKLOAD)
    counts = pytester.path / "calls.txt"
    monkeypatch.setenv("COUNT_CALLS", str(counts))
    args = [arg.replace("--bench-warmup=0.02", "--bench-warmup=0") for arg in ARGS]  # (warm-up is by real time)
    pytester.runpytest("--bench-save=main", "--bench-save-processes=1", *args).assert_outcomes(passed=3)
    lines = [line.split() for line in counts.read_text().splitlines()]
    for name in "abc":
        here = [int(n) for who, of, n in lines if (who, of) == ("here", name)]
        (fresh,) = (int(n) for who, of, n in lines if (who, of) == ("fresh", name))
        assert len(here) == 4  # (one line per pass)
        assert 0.6 * sum(here) <= fresh <= 1.5 * sum(here)


TURNS_LOG = """
import os

def pytest_configure(config):
    if "TESSERABENCH_AB_AUTHKEY" in os.environ:  # a fresh process: log the CPU turn of each block
        from pytest_tesserabench.processes import serve

        def logged(turn, timer):
            with open(os.environ["TURNS_LOG"], "a") as log:
                log.write(f"{turn}:{timer} ")

        serve.start_on_cpu = logged
"""


def test_a_fresh_process_starts_each_block_on_the_next_cpu_as_the_passes_here(pytester, monkeypatch):
    # (machine/cpu_turns.py: else a fresh process that landed on a slow vCPU reads slow for life)
    pytester.makepyfile(test_kernels=WORKLOAD)
    pytester.makeconftest(TURNS_LOG)
    turns = pytester.path / "turns.txt"
    monkeypatch.setenv("TURNS_LOG", str(turns))
    pytester.runpytest("--bench-save=main", "--bench-save-processes=1", *ARGS).assert_outcomes(passed=3)
    assert turns.read_text().split() == ["0:cpu", "1:cpu", "2:cpu", "3:cpu"] * 3  # each benchmark's four blocks


def test_a_run_that_compares_and_saves_confirms_on_the_processes_it_saves(project, monkeypatch):
    monkeypatch.setenv("SLOWER_b", "1.3")
    result = project.runpytest("--bench-compare=main", "--bench-save=main", "--bench-save-processes=1", *ARGS)
    result.assert_outcomes(passed=2, failed=1)
    # one fresh process per benchmark, not --bench-confirm's two on top for the one that fails
    assert re.search(r"measured again in 1 fresh process\(es\) of this save: \+\d\d\.\d% .*on all 2", said(result))
    (path,) = (project.path / "baselines" / "main").glob("*.json")
    saved = json.loads(path.read_text())["runs"][-1]["benchmarks"]
    assert sorted(saved) == ["test_kernels.py::test_work[a]", "test_kernels.py::test_work[c]"]  # (b failed)
    assert all(len(record["confirm"]) == 1 for record in saved.values())


@pytest.mark.parametrize(
    "environment, why",
    [
        ("FAIL_FRESH", "the test failed there: AssertionError: fails in a fresh process"),
        (
            "SKIP_FRESH",  # (a conftest's --runslow: an option of the command line, which does not reach it)
            "the test skipped there: Skipped: need --runslow option to run; options given on this run's command "
            "line do not reach a fresh process",
        ),
    ],
)
def test_a_save_whose_fresh_processes_cannot_measure_it_is_saved_without_them_and_says_why(
    pytester, monkeypatch, environment, why
):
    pytester.makepyfile(test_kernels=WORKLOAD)
    monkeypatch.setenv(environment, "1")
    result = pytester.runpytest("--bench-save=main", "--bench-save-processes=2", "test_kernels.py::test_work[a]", *ARGS)
    result.assert_outcomes(passed=1, warnings=1)
    assert (
        "test_kernels.py::test_work[a]: saved as measured in 0 of 2 fresh processes: "
        f"--bench-save-processes: fresh process 1 of 2: {why}" in said(result)
    )
    (path,) = (pytester.path / "baselines" / "main").glob("*.json")
    assert "confirm" not in json.loads(path.read_text())["runs"][0]["benchmarks"]["test_kernels.py::test_work[a]"]


FRESH_LOG = """
import os

def pytest_configure(config):
    if "TESSERABENCH_AB_AUTHKEY" in os.environ:  # a served process: log that one started
        with open(config.rootpath / "fresh.log", "a") as log:
            log.write(f"{os.getpid()}\\n")
"""


def test_a_save_starts_its_fresh_processes_once_and_replaces_one_that_dies(pytester, monkeypatch):
    # Each fresh process runs every test of the save (one start-up each, not one per test); the
    # two that die in test b are replaced for c, and b is saved as the session measured it.
    pytester.makepyfile(test_kernels=WORKLOAD)
    pytester.makeconftest(FRESH_LOG)
    started = lambda: (pytester.path / "fresh.log").read_text().split()  # noqa: E731
    pytester.runpytest("--bench-save=main", "--bench-save-processes=2", *ARGS).assert_outcomes(passed=3)
    assert len(started()) == 2
    (path,) = (pytester.path / "baselines" / "main").glob("*.json")
    saved = json.loads(path.read_text())["runs"][-1]["benchmarks"]
    assert [len(saved[f"test_kernels.py::test_work[{n}]"]["confirm"]) for n in "abc"] == [2, 2, 2]

    monkeypatch.setenv("DIE_FRESH_b", "1")
    (pytester.path / "fresh.log").unlink()
    result = pytester.runpytest("--bench-save=main", "--bench-save-processes=2", *ARGS)
    result.assert_outcomes(passed=3, warnings=1)
    assert len(started()) == 4  # two, both died in b, both replaced for c
    assert (
        "test_work[b]: saved as measured in 0 of 2 fresh processes: --bench-save-processes: fresh process 1 of 2 "
        "exited with status 3; its output:" in said(result)
    )
    saved = json.loads(path.read_text())["runs"][-1]["benchmarks"]
    assert [len(saved[f"test_kernels.py::test_work[{n}]"].get("confirm") or []) for n in "abc"] == [2, 0, 2]


def test_a_save_measures_in_fresh_processes_only_while_the_baseline_lacks_process_draws(pytester, monkeypatch):
    # Enough draws (here 4 processes per benchmark): a save is then one more draw of its own, and
    # starts no fresh process. One fresh process per save: 2 draws, then 4, then the third save
    # (its own process and the two saves before: 5) needs none.
    from pytest_tesserabench.history import baseline

    monkeypatch.setattr(baseline, "SAVE_DRAWS", 4)
    pytester.makepyfile(test_kernels=WORKLOAD)
    pytester.makeconftest(FRESH_LOG)
    log = pytester.path / "fresh.log"
    started, said, cost = [], [], []
    for _ in range(3):
        log.write_text("")
        result = pytester.runpytest("--bench-save=main", "--bench-save-processes=1", *ARGS)
        result.assert_outcomes(passed=3)
        started.append(len(log.read_text().split()))
        said.append("also measured in 1 fresh process(es)" in result.stdout.str())
        saved_line = next(line for line in result.stdout.lines if line.startswith("tesserabench: saved "))
        cost.append(bool(re.search(r"; 3 of them measured in 1 fresh process\(es\) too, [\d.]+ s$", saved_line)))
    assert started == [1, 1, 0]
    assert said == [True, True, False]  # the header says what the save will cost before it measures
    assert cost == [True, True, False]  # ... and its last line what they measured and cost
    result.stdout.fnmatch_lines(["*the baseline holds at least 4 process draws of each of its benchmarks*"])
    (path,) = (pytester.path / "baselines" / "main").glob("*.json")
    runs = json.loads(path.read_text())["runs"]
    assert [len(runs[k]["benchmarks"]["test_kernels.py::test_work[a]"].get("confirm") or []) for k in range(3)] == [
        1,
        1,
        0,
    ]


def test_the_processes_that_measure_again_start_once_per_run(project, monkeypatch):
    # Two tests about to fail: measured again in the same two processes, each started once and
    # running both tests in turn (not a start-up and a collection per test and process).
    project.makeconftest(FRESH_LOG)
    monkeypatch.setenv("SLOWER_b", "1.3")
    monkeypatch.setenv("SLOWER_c", "1.3")
    result = project.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=1, failed=2)
    assert len((project.path / "fresh.log").read_text().split()) == 2
    result.stdout.fnmatch_lines(["2 benchmark(s) measured again in fresh processes (*s): 2 REGRESSED (--bench-*"])


def test_a_test_that_fails_in_a_fresh_process_keeps_its_verdict_and_says_why(project, monkeypatch):
    monkeypatch.setenv("SLOWER_b", "1.3")
    monkeypatch.setenv("FAIL_FRESH", "1")
    result = project.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=2, failed=1)
    assert (
        "not measured again: --bench-confirm: fresh process 1 of 2: the test "
        "failed there: AssertionError: fails in a fresh process" in said(result)
    )


def _record(pass_rounds, rounds):
    sampling = Sampling(passes=max(len(pass_rounds), 1), pass_rounds=tuple(pass_rounds))
    return BenchRecord(
        nodeid="t.py::x", name=None, group="g", timer="cpu", rounds_ms=[1.0] * rounds, stats=None, sampling=sampling
    )


def test_fresh_processes_measure_in_blocks_like_the_passes_of_this_one():
    assert confirm.blocks_like(_record([10, 12, 11, 12], 45)) == [12, 12, 12, 12]
    assert confirm.blocks_like(_record([], 20)) == [20]  # measured in one go
    assert confirm.blocks_like(_record([1, 2], 3)) == [confirm.MIN_BLOCK_ROUNDS] * 2


def test_a_fresh_record_reads_as_a_run_measured_in_passes_one_per_block():
    from pytest_tesserabench.gate.centres import log_centre
    from pytest_tesserabench.processes.served import Block

    main = _record([3, 3], 6)
    blocks = [Block([2.0, 2.1, 2.2], [2.0, 2.1, 2.2], 0.5), Block([1.0, 1.1, 1.2], [1.0, 1.1, 1.2], 0.25)]
    fresh = confirm._fresh_record(main, blocks)
    assert fresh.rounds_ms == [2.0, 2.1, 2.2, 1.0, 1.1, 1.2] and fresh.stats.rounds == 6
    assert (fresh.sampling.passes, fresh.sampling.pass_rounds, fresh.sampling.run_queue_wait_s) == (2, (3, 3), 0.75)
    assert log_centre(fresh) == pytest.approx(math.log(1.1))  # the faster block's median, as for passes
    assert main.rounds_ms == [1.0] * 6  # (the session's record is left as it was)


def test_a_slowdown_is_judged_on_its_timings_whatever_the_canary_read_before_it(project, monkeypatch):
    # The canary times a moment of the machine, and a sort is not the benchmark: read +30% slow
    # right before every benchmark, it holds no real slowdown back (the run's shared shift, from
    # the benchmarks themselves, is what the gate removes).
    from pytest_tesserabench.measure import canary

    monkeypatch.setenv("SLOWER_b", "1.25")

    def canary_reads(samples=canary.CANARY_SAMPLES):
        return [2.6 if samples != canary.CANARY_SAMPLES else 2.0] * samples

    monkeypatch.setattr(canary, "measure_canary", canary_reads)
    result = project.runpytest("--bench-compare=main", *ARGS)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_kernels.py::test_work[[]b[]] - Failed: REGRESSED (severe)*"])


def test_which_verdicts_are_measured_again():
    from pytest_tesserabench.gate.pipeline import worth_measuring_again
    from pytest_tesserabench.record.results import Verdict

    verdicts = {
        "regressed": Verdict(id="", status="REGRESSED", ratio=1.3, threshold=0.05, stage="rule"),
        "kernel": Verdict(
            id="", status="REGRESSED", ratio=1.3, threshold=0.05, reasons=("registers 96 -> 128",), stage="rule"
        ),
        "undecided past the threshold": Verdict(id="", status="INCONCLUSIVE", ratio=1.06, threshold=0.05, stage="rule"),
        "undecided, mostly the shift": Verdict(id="", status="INCONCLUSIVE", ratio=1.3, threshold=0.05, stage="shift"),
        "undecided below it": Verdict(id="", status="INCONCLUSIVE", ratio=1.04, threshold=0.05, stage="rule"),
        "below a noisy one's": Verdict(id="", status="INCONCLUSIVE", ratio=1.06, threshold=0.08, stage="rule"),
        "passes differ": Verdict(id="", status="INCONCLUSIVE", ratio=1.3, threshold=0.05, stage="conditions"),
        "unchanged": Verdict(id="", status="UNCHANGED", ratio=1.01, threshold=0.05, stage="rule"),
    }
    picked = [name for name, verdict in verdicts.items() if worth_measuring_again(verdict)]
    assert picked == ["regressed", "undecided past the threshold", "undecided, mostly the shift"]


def test_a_run_file_keeps_the_fresh_processes_and_gives_them_back_as_runs():
    from pytest_tesserabench.gate.centres import log_centre
    from pytest_tesserabench.record.results import FreshProcess, RunDocument, fresh_runs, with_processes

    here = _record([3, 3], 6)
    here = __import__("dataclasses").replace(
        here, sampling=__import__("dataclasses").replace(here.sampling, memory_canary=(0.9, 0.9))
    )
    fresh = confirm._fresh_record(here, [_block([2.0, 2.1, 2.2], 0.6), _block([1.0, 1.1, 1.2], 0.7)])
    fresh = __import__("dataclasses").replace(fresh, canary_ms=1.9)
    here = __import__("dataclasses").replace(here, confirm=(confirm.as_kept(fresh),))
    data = RunDocument(benchmarks={here.id: here}).to_json()
    assert data["benchmarks"][here.id]["confirm"] == [
        {
            "rounds_ms": [2.0, 2.1, 2.2, 1.0, 1.1, 1.2],
            "pass_rounds": [3, 3],
            "canary_ms": 1.9,
            "memory_canary": [0.6, 0.7],
        }
    ]
    run = RunDocument.from_json(data)  # (through the file)
    kept = FreshProcess((2.0, 2.1, 2.2, 1.0, 1.1, 1.2), (3, 3), 1.9, (0.6, 0.7))
    assert run.benchmarks[here.id].confirm == (kept,)
    (again,) = fresh_runs(run)
    rebuilt = again.benchmarks[here.id]
    assert (rebuilt.rounds_ms, rebuilt.sampling.pass_rounds, rebuilt.canary_ms) == (fresh.rounds_ms, (3, 3), 1.9)
    assert rebuilt.sampling.memory_canary == (0.6, 0.7)  # the fresh process's own, not this one's
    assert log_centre(rebuilt) == pytest.approx(log_centre(fresh)) and rebuilt.confirm is None
    assert fresh_runs(RunDocument(benchmarks={"t.py::y": _record([], 5)})) == []
    # a baseline keeps them, and the gate reads each as a run of the history after its own
    kept = run.for_baseline()
    assert kept.benchmarks[here.id].confirm == run.benchmarks[here.id].confirm
    first, process = with_processes([kept])
    assert first is kept and process.benchmarks[here.id].rounds_ms == fresh.rounds_ms
    assert with_processes([RunDocument(benchmarks={"t.py::y": _record([], 5)})])[0].benchmarks


def _block(rounds, memory_canary=None):
    from pytest_tesserabench.processes.served import Block

    return Block(rounds, rounds, 0.0, memory_canary)


def test_fresh_processes_read_the_ini_file_named_with_c(pytester, monkeypatch):
    # The project's ini lives where pytest would not find it on its own, and only it makes
    # `check_work` a test: a fresh process that did not get `-c` would not collect the test.
    pytester.makepyfile(test_kernels=WORKLOAD.replace("def test_work(", "def check_work("))
    (pytester.path / "ci").mkdir()
    (pytester.path / "ci" / "bench.ini").write_text("[pytest]\npython_functions = check_*\n")
    ini = ("-c", "ci/bench.ini", f"--rootdir={pytester.path}")
    for run in range(3):
        monkeypatch.setenv("RUN", str(run))
        pytester.runpytest("--bench-save=main", "--bench-save-processes=0", *ini, *ARGS).assert_outcomes(passed=3)
    monkeypatch.setenv("RUN", "99")
    monkeypatch.setenv("SLOWER_HERE_b", "1.3")
    result = pytester.runpytest("--bench-compare=main", *ini, *ARGS)
    result.assert_outcomes(passed=3)
    assert "UNCHANGED" in said(result) and "judged on all 3" in said(result)


@pytest.mark.parametrize("initialized", [True, False])
def test_a_served_process_gives_the_gpu_memory_its_test_cached_back(monkeypatch, initialized):
    # (it waits while the session's process, and the other fresh ones, run their tests)
    from types import SimpleNamespace

    from pytest_tesserabench.processes import serve

    emptied = []
    cuda = SimpleNamespace(
        is_available=lambda: True, is_initialized=lambda: initialized, empty_cache=lambda: emptied.append(1)
    )
    monkeypatch.setitem(sys.modules, "torch", SimpleNamespace(cuda=cuda))
    serve.release_device_memory()
    assert emptied == ([1] if initialized else [])


def test_a_save_names_the_processes_its_baseline_leaves_out(pytester, monkeypatch):
    # save 2's own process read b 30% slower (a busy moment): once the baseline holds enough
    # processes to leave it out, the save says so, since a compare that reads b there fails it.
    # It read c 3% slower: left out too, but a compare that reads c there fails nothing (below the
    # 5% threshold), so unsaid.
    pytester.makepyfile(test_kernels=WORKLOAD)
    outputs = []
    for run in range(3):
        monkeypatch.setenv("RUN", str(run))
        for name, factor in (("b", "1.3"), ("c", "1.03")):
            if run == 1:
                monkeypatch.setenv("SLOWER_HERE_" + name, factor)
            else:
                monkeypatch.delenv("SLOWER_HERE_" + name, raising=False)
        result = pytester.runpytest("--bench-save=main", *ARGS)
        result.assert_outcomes(passed=3)
        outputs.append(result.stdout.str())
    assert "left out of it" not in outputs[0]  # (three processes: too few to leave one out)
    # said at every save while the baseline keeps it; by the save that measured it, as its own: if
    # its code is slower, another save would not mend it
    (line,) = [line for line in outputs[1].splitlines() if "left out of it" in line]
    assert line.startswith("tesserabench: test_kernels.py::test_work[b]: this save's process read 2.")
    assert "is left out of it: a compare that reads it there fails it. If this code is slower, fix it" in line
    assert "save under a new name" in line and "record again" not in line
    (line,) = [line for line in outputs[2].splitlines() if "left out of it" in line]
    assert line.startswith("tesserabench: test_kernels.py::test_work[b]: 1 of the baseline's processes read 2.")
    assert "is left out of it: a compare that reads it there fails it; unless the machine was busy then" in line


def test_a_multithreaded_benchmark_left_out_of_its_baseline_gets_the_thread_advice():
    from pytest_tesserabench.gate.pipeline import LeftOut
    from pytest_tesserabench.outputs import _left_out_line

    sampling = Sampling(own_cpu_s=2.0, others_wall_s=1.0)  # two threads' CPU time over the rounds' wall time
    two = BenchRecord("t.py::x", None, "t.py::x", "cpu", [0.007], None, sampling=sampling)
    line = _left_out_line("t.py::x", LeftOut([0.00866, 0.00836], 0.00688, False), two)
    assert line.startswith(
        "t.py::x: 2 of the baseline's processes read 8.66 µs, 8.36 µs, far from its others (6.88 µs)"
    )
    assert "It kept 2.0 CPUs busy" in line and "--bench-threads=1" in line
    assert "--bench-threads" not in _left_out_line("t.py::x", LeftOut([0.00866], 0.00688, False), None)
