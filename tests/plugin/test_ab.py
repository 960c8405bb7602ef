"""Same-job A/B against a git ref (--bench-ab), on throwaway git repositories. The workload runs
on a fake clock (2 ms a call, 1% noise), so verdicts do not depend on the machine's load; what is
real is everything else: the worktree, the reference process, the protocol, the pairing."""

import json
import os
import signal
import subprocess

import pytest
from snippets import FAKE_CLOCK, TRITON_WORKLOAD

WORKLOAD = (
    """
import math, os, random, time, pytest
from pytest_tesserabench.machine import run_queue

SCALE = {"a": 1.0, "b": 1.0, "c": 1.0}

"""
    + FAKE_CLOCK
    + """

def kernel_for(name, fake_clock):
    rng = random.Random(f"{os.getpid()}-{name}")
    def kernel():
        fake_clock[0] += int(2e6 * SCALE[name] * math.exp(rng.gauss(0, 0.01)))
    return kernel

@pytest.mark.parametrize("name", ["a", "b", "c"])
def test_work(bench, name, fake_clock):
    bench(kernel_for(name, fake_clock))
"""
)
ARGS = ("--bench-max-time=0.1", "--bench-warmup=0", "--bench-ab-processes=1", "-p", "no:randomly")


def git(path, *args):
    return subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, text=True).stdout


def commit(path, message="change"):
    git(path, "add", "-A")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", message)


@pytest.fixture
def repo(pytester, monkeypatch):
    monkeypatch.setenv("COLUMNS", "250")
    git(pytester.path, "init", "-q", "-b", "main")
    pytester.makepyfile(test_w=WORKLOAD)
    (pytester.path / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n")
    commit(pytester.path, "base")
    return pytester


def slow_down(pytester, name, factor):
    path = pytester.path / "test_w.py"
    path.write_text(path.read_text().replace(f'"{name}": 1.0', f'"{name}": {factor}'))


def worktrees(pytester):
    return [line for line in git(pytester.path, "worktree", "list").splitlines() if "ab-" in line]


def test_a_slowdown_fails_exactly_its_test_and_both_sides_are_recorded(repo, tmp_path):
    slow_down(repo, "b", 1.3)
    out = tmp_path / "run.json"
    sigterm = signal.getsignal(signal.SIGTERM)
    result = repo.runpytest("--bench-ab=main", f"--bench-json={out}", *ARGS, "--bench-ab-processes=4")
    result.assert_outcomes(passed=2, failed=1)
    assert signal.getsignal(signal.SIGTERM) is sigterm  # the lead gives SIGTERM back (in-process run here)
    result.stdout.fnmatch_lines(
        [
            "tesserabench: A/B, the working tree (1 uncommitted change(s), untracked files included) vs main (*), "
            "4 served processes per side*",
            "tesserabench: A/B measures every served process on CPU *, OMP_NUM_THREADS/OPENBLAS_NUM_THREADS/"
            "MKL_NUM_THREADS/* at 1 thread: multi-threaded code runs single-threaded there, or with the threads it "
            "sizes itself (set_num_threads, workers=) on that one CPU, *",
            "REGRESSED (severe), ?.?? ms -> 2.?? ms, +*% [[]+*%, +*%[]], p=*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*1 regressed, 2 unchanged*", "A/B: 3 benchmark(s) compared in * pairs of blocks from 4 process pairs*"]
    )
    result.stdout.fnmatch_lines(["benchmark  verdict * change ?CI95? * ref * now * p * pairs"])  # not "runs"
    run = json.loads(out.read_text())["benchmarks"]
    b = run["test_w.py::test_work[b]"]
    assert b["verdict"]["status"] == "REGRESSED" and 1.25 < b["verdict"]["ratio"] < 1.35
    assert len(b["ab"]["log_ratios"]) >= 6 and b["ab"]["reference"]["timer"] == "cpu"
    # both sides from 4 served processes each, round robin; the reference's record is its first process's
    assert sorted(set(b["ab"]["processes"])) == [0, 1, 2, 3] and b["verdict"]["history"] == len(b["ab"]["processes"])
    assert b["ab"]["decision"]["processes"] == 4  # judged over the process pairs
    first = [ms for ms, process in zip(b["ab"]["reference_rounds_ms"], b["ab"]["processes"]) if process == 0]
    assert b["ab"]["reference"]["rounds_ms"] == first
    assert run["test_w.py::test_work[a]"]["verdict"]["status"] == "UNCHANGED"
    assert worktrees(repo) == []  # removed at the end


WARM_LOG = """
import os
from pytest_tesserabench.measure import sampling

def _logged(kind, warm):
    def logged(*args, **kwargs):
        with open(os.environ["WARM_LOG"], "a") as log:
            log.write(f"{kind}\\n")
        return warm(*args, **kwargs)
    return logged

sampling.warm_up = _logged("full", sampling.warm_up)
sampling.warm_up_like = _logged("like", sampling.warm_up_like)
"""


def test_each_side_s_first_process_sizes_the_rounds_and_the_others_warm_up_briefly(repo, tmp_path, monkeypatch):
    log = tmp_path / "warm.log"
    monkeypatch.setenv("WARM_LOG", str(log))
    repo.makeconftest(WARM_LOG)
    commit(repo.path, "log the warm-ups")
    # (in a subprocess: the conftest patches the sampling module of the process that imports it)
    result = repo.runpytest_subprocess("--bench-ab=main", *ARGS, "--bench-ab-processes=4")
    result.assert_outcomes(passed=3)
    warm = log.read_text().split()
    assert (warm.count("full"), warm.count("like")) == (3 * 2, 3 * 6)  # per call: 1 + 3 on each side


def test_new_missing_and_a_test_that_fails_on_the_reference(repo):
    path = repo.path / "test_w.py"
    path.write_text(
        path.read_text()
        + """
def test_labelled(bench, fake_clock):
    bench(kernel_for("a", fake_clock))
    bench(kernel_for("c", fake_clock), name="old")

def test_broken_at_ref(bench, fake_clock):
    assert False, "broken at the reference"

def test_fails_late_at_ref(bench, fake_clock):
    bench(kernel_for("a", fake_clock))
    assert False, "late failure at the reference"
"""
    )
    commit(repo.path, "reference with a labelled call and a broken test")
    path.write_text(
        path.read_text().replace('    bench(kernel_for("c", fake_clock), name="old")\n', "")
        .replace('    assert False, "broken at the reference"\n', '    bench(kernel_for("b", fake_clock))\n')
        .replace('    assert False, "late failure at the reference"\n', "")
        + "\ndef test_new(bench, fake_clock):\n    bench(kernel_for('a', fake_clock))\n"
    )  # fmt: skip
    result = repo.runpytest("--bench-ab=HEAD", *ARGS)
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(
        ["test_w.py::test_fails_late_at_ref", "*the test failed at HEAD (*): AssertionError: late failure at the*"]
    )
    result.stdout.fnmatch_lines(
        [
            "test_w.py::test_broken_at_ref",
            "*NEW*the test failed at the reference: AssertionError: broken at the reference*",
        ]
    )
    result.stdout.fnmatch_lines(
        [
            "test_w.py::test_labelled",
            "kernel *UNCHANGED*",  # (the unlabelled call's row: the function it measured)
            "*old *MISSING*measured at HEAD, not made by this test*",
        ]
    )
    result.stdout.fnmatch_lines(["test_w.py::test_new*", "*NEW*no such test at the reference*"])
    result.stdout.fnmatch_lines(["*5 unchanged, 2 new, 1 missing*"])


def test_a_benchmark_test_deleted_here_is_missing_and_only_that(repo):
    path = repo.path / "test_w.py"
    gone = "\ndef test_gone(bench, fake_clock):\n    bench(kernel_for('a', fake_clock))\n"
    plain = "\ndef test_plain_gone():\n    pass\n"  # not a benchmark: nothing to say about it
    path.write_text(path.read_text() + gone + plain)
    commit(repo.path, "reference with tests this tree deletes")
    path.write_text(path.read_text().replace(gone, "").replace(plain, ""))
    result = repo.runpytest("--bench-ab=HEAD", *ARGS)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(
        ["test_w.py::test_gone", "*MISSING*a benchmark test at HEAD (*), not in the working tree (deleted or renamed)*"]
    )
    result.stdout.fnmatch_lines(["*3 unchanged, 1 missing*"])
    assert "test_plain_gone" not in result.stdout.str()
    # Deselected here (-k), or the command line names single tests: not deleted, nothing said.
    for args in (["-k", "work"], ["test_w.py::test_work"]):
        result = repo.runpytest("--bench-ab=HEAD", *ARGS, *args)
        result.assert_outcomes(passed=3)
        assert "MISSING" not in result.stdout.str(), args
    path.write_text(path.read_text() + gone)  # on both sides, deselected here: not missing
    result = repo.runpytest("--bench-ab=HEAD", *ARGS, "--deselect", "test_w.py::test_gone")
    result.assert_outcomes(passed=3)
    assert "MISSING" not in result.stdout.str()


def test_a_benchmark_file_deleted_or_renamed_here_is_missing(repo):
    old = "from test_w import fake_clock, kernel_for\n\n"
    old += "def test_old(bench, fake_clock):\n    bench(kernel_for('a', fake_clock))\n"
    (repo.path / "test_old.py").write_text(old)
    (repo.path / "test_moved.py").write_text(old.replace("test_old", "test_moved"))
    (repo.path / "test_broken_old.py").write_text("import not_a_module\n")  # REF's own problem: silent
    commit(repo.path, "reference with test files this tree deletes")
    for name in ("test_old.py", "test_broken_old.py"):
        (repo.path / name).unlink()
    (repo.path / "test_moved.py").rename(repo.path / "test_renamed.py")
    result = repo.runpytest("--bench-ab=HEAD", *ARGS)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["test_old.py::test_old*", "*MISSING*not in the working tree (deleted or renamed)*"])
    result.stdout.fnmatch_lines(["test_moved.py::test_moved*", "*MISSING*"])
    result.stdout.fnmatch_lines(["*3 unchanged, 1 new, 2 missing*"])
    assert "not_a_module" not in result.stdout.str()
    # The command line names one file: REF's other files are not this session's business.
    result = repo.runpytest("--bench-ab=HEAD", *ARGS, "test_w.py")
    result.assert_outcomes(passed=3)
    assert "MISSING" not in result.stdout.str()
    # Only a file REF does not have: its tests are NEW, and REF's side collects nothing.
    result = repo.runpytest("--bench-ab=HEAD", *ARGS, "test_renamed.py")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*NEW*no such test at the reference*"])


def test_under_xdist_and_with_save(repo):
    slow_down(repo, "c", 1.3)
    result = repo.runpytest("--bench-ab=main", "--bench-save=main", "-n", "2", *ARGS)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["FAILED test_w.py::test_work[[]c[]] - Failed: REGRESSED (severe)*"])
    saved = json.loads(next((repo.path / "baselines" / "main").glob("*.json")).read_text())
    records = saved["runs"][0]["benchmarks"]
    assert sorted(records) == ["test_w.py::test_work[a]", "test_w.py::test_work[b]"]
    assert all("ab" not in r and r["verdict"] is None for r in records.values())  # a comparison's, not history
    assert worktrees(repo) == []


def test_served_processes_end_without_ending_a_session(repo):
    """Only the lead ends a session: a served process's session end would write the project's
    --junitxml and cache over the lead's, and cost seconds per process as they all end at once."""
    repo.makeconftest(
        """
import os

def pytest_sessionfinish(session):
    with open(os.path.join(str(session.config.rootpath), "ended.txt"), "a") as f:
        f.write(f"{os.getpid()}\\n")
"""
    )
    commit(repo.path, "a session-end hook")
    result = repo.runpytest("--bench-ab=main", *ARGS)
    result.assert_outcomes(passed=3)
    assert (repo.path / "ended.txt").read_text().split() == [str(os.getpid())]  # (runpytest: in-process)


def test_a_long_temp_directory_is_no_obstacle(repo, monkeypatch, tmp_path):
    """A CI runner's TMPDIR (or pytest's own under xdist) can be longer than a Unix socket's path
    may be (~104 bytes): the served processes call back through a name, not a file there."""
    import tempfile

    long = tmp_path / ("t" * 60) / ("m" * 60)
    long.mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(long))
    repo.runpytest("--bench-ab=main", *ARGS).assert_outcomes(passed=3)


def test_a_reference_side_that_never_returns_fails_only_its_test(repo):
    """--bench-timeout in the served processes: the side that hangs says so, the lead's test
    fails, and the other tests are measured on both sides."""
    path = repo.path / "test_w.py"
    hangs = path.read_text().replace(
        "    def kernel():\n",
        "    calls = []\n    def kernel():\n        calls.append(1)\n"
        "        if name == 'b' and len(calls) > 3:\n            time.sleep(3600)\n",
    )
    # At the reference b hangs, and reaches the call 4.5 s after the working tree's process did,
    # which waits for it inside its own call meanwhile: that wait is not its call running (counted,
    # the working tree's process would run out of time first and be named).
    path.write_text(
        hangs.replace("    rng = random.Random(", "    time.sleep(4.5 if name == 'b' else 0)\n    rng = random.Random(")
    )
    commit(repo.path, "b hangs at the reference")
    git(repo.path, "checkout", "-q", "HEAD~1", "--", "test_w.py")  # the working tree's b returns
    result = repo.runpytest("--bench-ab=main", "--bench-timeout=2", *ARGS)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(
        [
            "FAILED test_w.py::test_work[[]b[]] - Failed: --bench-ab: the test failed in the reference side "
            "(main at *) while measured there: *bench(kernel_for.<locals>.kernel) did not return within * s "
            "(its timeout, * s, past its measuring budget*"
        ]
    )
    assert worktrees(repo) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--bench-ab=nope"], "--bench-ab=nope: git knows no commit by that name*git fetch origin main*"),
        (["--bench-ab=main", "--bench-compare=main"], "*--bench-ab=main and --bench-compare=main: choose one*"),
    ],
)
def test_bad_refs_and_combinations_are_one_line_each(repo, args, message):
    result = repo.runpytest(*args, *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: {message}"])
    assert not (repo.path / "baselines").exists() and worktrees(repo) == []


def test_outside_a_git_repository(pytester):
    pytester.makepyfile(test_w=WORKLOAD)
    result = pytester.runpytest("--bench-ab=main", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: --bench-ab=main: * is not in a git repository*"])


def test_a_reference_whose_tests_do_not_collect(repo):
    (repo.path / "test_w.py").write_text("import not_a_module\n")
    commit(repo.path, "broken")
    (repo.path / "test_w.py").write_text(WORKLOAD)
    result = repo.runpytest("--bench-ab=HEAD", *ARGS)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        ["*--bench-ab: the tests do not collect in the reference side (HEAD at *)*: *No module named 'not_a_module'*"]
    )
    assert "During handling of the above exception" not in result.stdout.str()  # said once
    assert worktrees(repo) == []


def test_sigterm_is_taken_as_ctrl_c_and_cleans_up(repo, monkeypatch):
    # how CI cancels a job: the worktree and the served processes' folders must not stay behind
    path = repo.path / "test_w.py"
    path.write_text(
        path.read_text()
        + "\ndef test_cancelled(bench, fake_clock):\n"
        + "    bench(kernel_for('a', fake_clock))\n"
        + "    import signal\n"
        + "    if 'TESSERABENCH_AB_AUTHKEY' not in os.environ:  # the lead, not a served process\n"
        + "        os.kill(os.getpid(), signal.SIGTERM)\n"
    )
    private_tmp = repo.path.parent / "tmp"  # its own temp dir: other tests' runs make folders too
    private_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    result = repo.runpytest_subprocess("--bench-ab=main", *ARGS)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert worktrees(repo) == []
    assert list(private_tmp.glob("tesserabench-ab-*")) == []


CTRL_C = """
import signal

def test_interrupted(bench, fake_clock):
    if 'TESSERABENCH_AB_AUTHKEY' not in os.environ:  # the lead
        bench(kernel_for('a', fake_clock))
        raise KeyboardInterrupt
    # Ctrl-C reaches every process of the terminal's foreground group: a served process lets it go
    os.kill(os.getpid(), signal.SIGINT)
    with open(os.environ['SERVED_PIDS'], 'a') as pids:
        pids.write(f'{os.getpid()}\\n')
    bench(kernel_for('a', fake_clock))
    bench(kernel_for('b', fake_clock))  # a call the lead never makes: its process waits here
    open(f"{os.environ['SERVED_PIDS']}.{os.getpid()}.went-on", 'w').close()
"""

CONFTEST_ALIVE = """
import os

def pytest_terminal_summary(terminalreporter):
    alive = []
    for pid in open(os.environ['SERVED_PIDS']).read().split():
        try:
            with open(f'/proc/{pid}/stat') as stat:
                alive += [pid] if stat.read().rsplit(')', 1)[1].split()[0] != 'Z' else []
        except FileNotFoundError:
            pass
    terminalreporter.write_line(f'served processes alive at the summary: {len(alive)}')
"""


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
@pytest.mark.parametrize("started", ["forked", "spawned"])
def test_ctrl_c_stops_the_served_processes_before_the_summaries(repo, tmp_path, monkeypatch, started):
    # Ctrl-C mid-test: every served process ends at once (not running its test on, nor its own
    # session's end), before the lead's summaries would share the CPUs with them.
    if started == "spawned":
        monkeypatch.setenv("TESSERABENCH_NO_FORK", "1")
    path = repo.path / "test_w.py"
    path.write_text(path.read_text() + CTRL_C)
    (repo.path / "conftest.py").write_text(CONFTEST_ALIVE)
    commit(repo.path)  # both sides have the test
    pids = tmp_path / "pids"
    monkeypatch.setenv("SERVED_PIDS", str(pids))
    result = repo.runpytest_subprocess("--bench-ab=main", *ARGS, "-k", "interrupted")
    assert result.ret == pytest.ExitCode.INTERRUPTED, result.stdout.str()
    assert len(pids.read_text().split()) == 2  # each served process went through its own SIGINT
    result.stdout.fnmatch_lines(["served processes alive at the summary: 0"])
    assert list(tmp_path.glob("pids.*.went-on")) == []
    assert worktrees(repo) == []


def test_the_worktree_goes_even_after_ctrl_c_and_a_killed_runs_is_cleared(repo):
    path = repo.path / "test_w.py"
    path.write_text(path.read_text() + "\ndef test_stop():\n    raise KeyboardInterrupt\n")
    result = repo.runpytest_subprocess("--bench-ab=main", *ARGS)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert worktrees(repo) == []
    # A run killed outright leaves its worktree; the next run clears it.
    stale = repo.path / ".pytest_cache" / "d" / "tesserabench" / "ab-000000000000"
    git(repo.path, "worktree", "add", "--detach", str(stale), "main")
    path.write_text(WORKLOAD)
    repo.runpytest("--bench-ab=main", *ARGS).assert_outcomes(passed=3)
    assert worktrees(repo) == [] and not stale.exists()


PINNED = """
import os, pytest

def test_where(bench):
    def kernel():
        with open(os.environ["AFFINITY_LOG"], "a") as log:
            pad = len(os.environ.get("TESSERABENCH_AB_PAD", ""))
            blas = os.environ.get("OPENBLAS_NUM_THREADS", "-")
            log.write(f"{os.getpid()} {os.getppid()} {pad} {blas} {sorted(os.sched_getaffinity(0))}\\n")
    bench(kernel)
"""


@pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or len(os.sched_getaffinity(0)) < 2, reason="needs 2+ CPUs to pin to"
)
@pytest.mark.parametrize("fork", [True, False], ids=["forked", "spawned"])
def test_served_processes_measure_pinned_to_one_cpu_single_threaded_each_with_its_own_environment_size(
    pytester, monkeypatch, tmp_path, fork
):
    # vCPUs of one VM differ in speed by tens of percent: two sides left on different CPUs differ
    # for a reason that is not their code (docs/gate.md)
    log = tmp_path / "affinity.log"
    monkeypatch.setenv("AFFINITY_LOG", str(log))
    monkeypatch.delenv("OPENBLAS_NUM_THREADS", raising=False)
    git(pytester.path, "init", "-q", "-b", "main")
    pytester.makepyfile(test_p=PINNED)
    (pytester.path / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n")
    commit(pytester.path, "base")
    args = ("--bench-max-time=0.05", "--bench-warmup=0", "--bench-ab-processes=4", "-p", "no:randomly")
    pytest.importorskip("numpy")  # imported by the session: the served processes fork from a zygote that has it
    if not fork:
        monkeypatch.setenv("TESSERABENCH_NO_FORK", "1")
    result = pytester.runpytest("--bench-ab=main", *args)
    single_cpu, pads, pools, parents = {}, {}, {}, {}  # single_cpu: pid -> the one-CPU affinities its calls ran under
    for line in log.read_text().splitlines():
        pid, parent, pad, blas, cpus = line.split(" ", 4)
        single_cpu.setdefault(pid, set()).update([cpus] if "," not in cpus else [])
        pads[pid], pools[pid], parents[pid] = int(pad), blas, int(parent)
    measured = {pid: cpus for pid, cpus in single_cpu.items() if cpus}
    assert not single_cpu.get(str(os.getpid()))  # the lead (in-process here) measures nothing itself
    assert len(measured) == 8, single_cpu  # 4 served processes per side
    assert len(set.union(*measured.values())) == 1, single_cpu  # all on one and the same CPU
    # each served process its own environment size (the stack's alignment): a per-process draw
    assert len({pads[pid] for pid in measured}) > 1, pads
    # one BLAS thread in a process pinned to one CPU (a pool of many would spin against itself)
    assert {pools[pid] for pid in measured} == {"1"}, pools
    parents = {parents[pid] for pid in measured}
    if fork:  # all forked by one zygote (zygote.py), which imported numpy once for all of them
        assert len(parents) == 1 and os.getpid() not in parents, parents
        assert not os.path.exists(f"/proc/{parents.pop()}"), "the zygote outlived its session"
        how = "forked from one process that imported numpy*"
    else:  # each started by the lead
        assert parents == {os.getpid()}, parents
        how = "each a Python of its own (TESSERABENCH_NO_FORK is set)*"
    result.stdout.fnmatch_lines([f"tesserabench: A/B: 8 served processes started in * s, {how}"])


def test_a_thread_pool_a_conftest_sizes_is_said_where_the_served_processes_start(repo, tmp_path, monkeypatch):
    # a conftest below the rootdir is read after the header's pinning line was written; it sets
    # the variable in this process too (pytester runs in it): setenv first, so that monkeypatch
    # puts back what was there before (a delenv of an absent variable records nothing)
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.delenv("OMP_NUM_THREADS")
    seen = tmp_path / "seen"
    monkeypatch.setenv("SEEN_LOG", str(seen))
    (repo.path / "sub").mkdir()
    (repo.path / "sub" / "conftest.py").write_text("import os\nos.environ['OMP_NUM_THREADS'] = '3'\n")
    (repo.path / "sub" / "test_s.py").write_text(
        WORKLOAD
        + "\nwith open(os.environ['SEEN_LOG'], 'a') as log:\n"
        + "    log.write(os.environ['OMP_NUM_THREADS'] + '\\n')\n"
    )
    commit(repo.path)
    result = repo.runpytest("--bench-ab=main", *ARGS, "sub")
    result.assert_outcomes(passed=3)
    assert set(seen.read_text().split()) == {"3"}  # the lead and both served processes
    result.stdout.fnmatch_lines(
        [
            "tesserabench: A/B: 2 served processes started in * s, *; thread pools as this session set them: "
            "OMP_NUM_THREADS=3"
        ]
    )


def test_timings_of_kernels_run_in_the_interpreter_are_not_gated(pytester):
    pytest.importorskip("triton")
    from pytest_tesserabench.machine import device as machine

    if machine.gpu_plausibly_present():
        pytest.skip("the interpreter path: needs a machine without a GPU")
    git(pytester.path, "init", "-q", "-b", "main")
    pytester.makepyfile(test_t=TRITON_WORKLOAD)
    (pytester.path / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n")
    commit(pytester.path, "base")
    path = pytester.path / "test_t.py"
    path.write_text(path.read_text().replace("DELAY = 0.0", "DELAY = 0.003"))  # far slower, in CPU time
    result = pytester.runpytest_subprocess("--bench-ab=main", "--bench-json=run.json", *ARGS)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["*timings not (timed in the Triton interpreter)*"])
    # ... so they are measured here alone, not interleaved over every served process for nothing
    (record,) = json.loads((pytester.path / "run.json").read_text())["benchmarks"].values()
    assert record["ab"]["log_ratios"] == [] and "never judged" in record["ab"]["unpaired"]
    assert record["verdict"]["status"] == "UNCHANGED" and record["rounds_ms"]


def test_an_untracked_file_counts_among_the_working_trees_changes(tmp_path):
    # The working tree's side imports it as any other file; REF's side lacks it.
    from pytest_tesserabench.ab import worktree

    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "kernel.py").write_text("x = 1\n")
    commit(tmp_path)
    assert worktree.resolve(tmp_path, "main")[2] == 0
    (tmp_path / "helper.py").write_text("y = 2\n")
    assert worktree.resolve(tmp_path, "main")[2] == 1
    # the plugin's own results are not a change of the code: neither untracked nor modified ones
    (tmp_path / "baselines" / "main").mkdir(parents=True)
    (tmp_path / "baselines" / "main" / "cpu.json").write_text("{}")
    assert worktree.resolve(tmp_path, "main", tmp_path / "baselines")[2] == 1
    assert worktree.resolve(tmp_path, "main")[2] == 2
    commit(tmp_path)
    (tmp_path / "baselines" / "main" / "cpu.json").write_text('{"runs": []}')
    (tmp_path / "kernel.py").rename(tmp_path / "a kernel.py")  # a rename: one change, spaces kept
    git(tmp_path, "add", "-A")
    assert worktree.resolve(tmp_path, "main", tmp_path / "baselines")[2] == 1
