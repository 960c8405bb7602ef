"""A lead killed with SIGKILL in the middle of --bench-ab: its served processes end with it (even
while inside a test), and the next run removes what it left (the served processes' temp folders;
A/B worktrees of sessions no longer running). Real processes and real signals; every wait polls
for a condition, its timeout only a safety net."""

import os
import signal
import subprocess
import sys
import time

import pytest
from snippets import FAKE_CLOCK
from test_ab import ARGS, commit, git

from pytest_tesserabench.ab import worktree
from pytest_tesserabench.processes import leftovers

BLOCK_ENV = "KILL_TEST_BLOCK_DIR"
# A served process (both sides of A/B are) that finds BLOCK_ENV says it is there and stays inside
# the test, as a hung benchmark would: it reads nothing from its lead from then on.
WORKLOAD = (
    """
import os, time, pytest
from pytest_tesserabench.machine import run_queue
"""
    + FAKE_CLOCK
    + f"""

def test_work(bench, fake_clock):
    block = os.environ.get({BLOCK_ENV!r})
    if block and os.environ.get("TESSERABENCH_AB_AUTHKEY"):
        with open(os.path.join(block, str(os.getpid())), "w"):
            pass
        while True:
            time.sleep(1)

    def kernel():
        fake_clock[0] += 2_000_000

    bench(kernel)
"""
)
SAFETY_S = 300


def running(pid: int) -> bool:
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has ended; only its parent has not reaped it yet


def wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + SAFETY_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {SAFETY_S} s (a safety net): {what}"
        time.sleep(0.1)


@pytest.fixture
def project(pytester, tmp_path):
    git(pytester.path, "init", "-q", "-b", "main")
    pytester.makepyfile(test_w=WORKLOAD)
    (pytester.path / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n")
    commit(pytester.path, "base")
    return pytester.path


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_lead_takes_its_served_processes_along_and_the_next_run_sweeps_up(project, tmp_path):
    private_tmp, block = tmp_path / "tmp", tmp_path / "served"
    private_tmp.mkdir()
    block.mkdir()
    env = {**os.environ, "TMPDIR": str(private_tmp)}
    command = [sys.executable, "-m", "pytest", "--bench-ab=main", *ARGS, "-p", "no:randomly"]
    lead = subprocess.Popen(
        command, cwd=project, env={**env, BLOCK_ENV: str(block)}, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT
    )
    served: list[int] = []
    try:
        # One served process per side, each inside the test.
        wait_for(lambda: len(os.listdir(block)) == 2 or lead.poll() is not None, "both served processes in the test")
        assert lead.poll() is None, "the lead ended before its served processes reached the test"
        served = [int(name) for name in os.listdir(block)]
        os.kill(lead.pid, signal.SIGKILL)
        lead.wait()
        wait_for(lambda: not any(running(pid) for pid in served), f"the served processes {served} ended")
    finally:
        if lead.poll() is None:
            lead.kill()
            lead.wait()
        for pid in served:  # without the guard they run on: not past this test
            if running(pid):
                os.kill(pid, signal.SIGKILL)

    left = [p for p in private_tmp.iterdir() if p.name.startswith(leftovers.PREFIX)]
    assert len(left) == 2 and all(leftovers.owner(p) == lead.pid for p in left)
    cache = project / ".pytest_cache" / "d" / "tesserabench"
    assert [p.name for p in cache.glob("ab-*") if p.is_dir()], "the killed lead's worktree"

    again = subprocess.run(command, cwd=project, env=env, capture_output=True, text=True, timeout=SAFETY_S)
    assert again.returncode == 0, again.stdout + again.stderr
    assert not [p for p in private_tmp.iterdir() if p.name.startswith(leftovers.PREFIX)]
    assert not list(cache.glob("ab-*"))
    assert "ab-" not in git(project, "worktree", "list")


def test_only_the_worktrees_of_sessions_no_longer_running_are_removed(project, tmp_path):
    cache = tmp_path / "cache"
    cache.mkdir()
    sha = git(project, "rev-parse", "HEAD").strip()
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # reaped: its pid names no process now
    owners = {"ab-live": os.getpid(), "ab-dead": dead.pid}
    for name, pid in owners.items():
        git(project, "worktree", "add", "--detach", str(cache / name), sha)
        (cache / f"{name}.owner").write_text(str(pid))
    git(project, "worktree", "add", "--detach", str(cache / "ab-unowned"), sha)  # killed before it said whose

    worktree.remove_stale(project, cache)

    assert sorted(p.name for p in cache.glob("ab-*")) == ["ab-live", "ab-live.owner"]
    listed = git(project, "worktree", "list")
    assert "ab-live" in listed and "ab-dead" not in listed and "ab-unowned" not in listed


def test_a_temp_folder_is_swept_only_when_its_owner_is_dead(tmp_path):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    mine = tmp_path / f"{leftovers.PREFIX}{os.getpid()}-x"
    orphan = tmp_path / f"{leftovers.PREFIX}{dead.pid}-y"
    unknown = tmp_path / f"{leftovers.PREFIX}abc"  # an older tesserabench's: whose, nobody knows
    for folder in (mine, orphan, unknown):
        folder.mkdir()
        (folder / "served.log").write_text("x")
    assert leftovers.sweep(tmp_path) == [orphan]
    assert mine.exists() and unknown.exists() and not orphan.exists()
