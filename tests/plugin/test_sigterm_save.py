"""A lead cancelled with SIGTERM (as CI cancels a job) while a --bench-save run has fresh
processes open takes it as Ctrl-C: the fresh processes are closed at once, their temp folders
removed, and nothing is saved. Real processes and real signals; every wait polls for a condition, its
timeout only a safety net."""

import json
import os
import signal
import subprocess
import sys

import pytest
from snippets import FAKE_CLOCK
from test_killed_lead import running, wait_for

from pytest_tesserabench.machine.device import machine_key
from pytest_tesserabench.processes import leftovers
from pytest_tesserabench.processes.served import AUTHKEY_ENV

BLOCK_ENV = "SIGTERM_TEST_BLOCK_DIR"
# test_a is measured in the lead and then in its fresh process (one pass: the tests in order), so
# the pool is open when test_b starts; in the lead (a fresh process has AUTHKEY_ENV), test_b says
# it is there and stays inside the test, as a long benchmark would, until the signal comes.
WORKLOAD = (
    """
import os, time, pytest
from pytest_tesserabench.machine import run_queue
"""
    + FAKE_CLOCK
    + f"""

def test_a(bench, fake_clock):
    bench(lambda: fake_clock.__setitem__(0, fake_clock[0] + 2_000_000))

def test_b(bench, fake_clock):
    block = os.environ.get({BLOCK_ENV!r})
    if block and not os.environ.get({AUTHKEY_ENV!r}):
        with open(os.path.join(block, str(os.getpid())), "w"):
            pass
        while True:
            time.sleep(1)
    bench(lambda: fake_clock.__setitem__(0, fake_clock[0] + 1_000_000))
"""
)
ARGS = (
    "--bench-max-time=0.02",
    "--bench-warmup=0",
    "--bench-min-rounds=3",
    "--bench-passes=1",
    "--bench-save-processes=1",
)


def children(pid: int) -> list[int]:
    found = []
    for task in os.listdir(f"/proc/{pid}/task"):
        try:
            found += [int(c) for c in open(f"/proc/{pid}/task/{task}/children").read().split()]
        except OSError:
            pass
    return found


# The fresh processes are closed before the session's summaries, not after (they would share the
# CPUs with them): the lead counts its children there.
CONFTEST = """
import os

def pytest_terminal_summary(terminalreporter):
    tasks = f"/proc/{os.getpid()}/task"
    count = sum(len(open(f"{tasks}/{t}/children").read().split()) for t in os.listdir(tasks))
    terminalreporter.write_line(f"children at the summary: {count}")
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_sigterm_during_a_save_closes_the_fresh_processes_and_saves_nothing(pytester, tmp_path):
    pytester.makepyfile(test_s=WORKLOAD)
    pytester.makeconftest(CONFTEST)
    private_tmp, block = tmp_path / "tmp", tmp_path / "lead"
    private_tmp.mkdir()
    block.mkdir()
    env = {**os.environ, "TMPDIR": str(private_tmp), BLOCK_ENV: str(block)}
    env.pop("GITHUB_STEP_SUMMARY", None)
    command = [
        sys.executable,
        "-m",
        "pytest",
        "--bench-save=main",
        *ARGS,
        "-p",
        "no:randomly",
        "-p",
        "no:cacheprovider",
    ]
    lead = subprocess.Popen(command, cwd=pytester.path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    fresh: list[int] = []
    try:
        wait_for(lambda: os.listdir(block) or lead.poll() is not None, "the lead inside test_b")
        assert lead.poll() is None, "the lead ended before it reached test_b: " + lead.stdout.read().decode()
        fresh = children(lead.pid)
        assert fresh, "no fresh process was running"
        assert [p for p in private_tmp.iterdir() if p.name.startswith(leftovers.PREFIX)]
        os.kill(lead.pid, signal.SIGTERM)
        wait_for(lambda: lead.poll() is not None, "the lead ended")
        output = lead.stdout.read().decode()
        wait_for(lambda: not any(running(pid) for pid in fresh), f"the fresh processes {fresh} ended")
    finally:
        if lead.poll() is None:
            lead.kill()
            lead.wait()
        for pid in fresh:  # not past this test, whatever happened
            if running(pid):
                os.kill(pid, signal.SIGKILL)

    assert lead.returncode == pytest.ExitCode.INTERRUPTED, output
    assert "nothing saved to baseline main: the run was interrupted" in output
    assert "children at the summary: 0" in output
    assert not (pytester.path / "baselines" / "main" / f"{machine_key()}.json").exists()
    assert not [p for p in private_tmp.iterdir() if p.name.startswith(leftovers.PREFIX)]


def test_the_sigterm_handler_is_given_back_when_the_run_ends(pytester):
    pytester.makepyfile(test_s=WORKLOAD)
    before = signal.getsignal(signal.SIGTERM)
    pytester.runpytest("--bench-save=main", *ARGS).assert_outcomes(passed=2)
    saved = json.loads((pytester.path / "baselines" / "main" / f"{machine_key()}.json").read_text())
    assert saved["runs"][0]["benchmarks"]["test_s.py::test_a"]["confirm"]  # a fresh process measured it
    assert signal.getsignal(signal.SIGTERM) is before
