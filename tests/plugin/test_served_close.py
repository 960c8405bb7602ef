"""Ending served and fresh processes (processes/served.py close_all): those stuck in a test, as
when SIGTERM stops the lead mid-test, are sent SIGTERM after a moment, and killed after one grace
period in all, not one each."""

import subprocess

import pytest

from pytest_tesserabench.processes import served


class Stuck:
    """A process that never ends on its own (nor on SIGTERM, with ``deaf``); waiting on it
    advances the fake clock."""

    def __init__(self, clock, deaf=True):
        self.clock = clock
        self.deaf = deaf
        self.killed = False
        self.terminated = False

    def terminate(self):
        self.terminated = True
        self.killed = self.killed or not self.deaf

    def poll(self):
        return 0 if self.killed else None

    def wait(self, timeout=None):
        if self.killed:
            return 0
        self.clock[0] += timeout
        raise subprocess.TimeoutExpired("pytest", timeout)

    def kill(self):
        self.killed = True


@pytest.mark.parametrize("deaf", [True, False])
def test_stuck_processes_are_killed_after_one_shared_grace(monkeypatch, tmp_path, deaf):
    clock = [0.0]
    monkeypatch.setattr(served.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(served, "_sweep_once", lambda: None)
    folders = iter(tmp_path / f"process{i}" for i in range(10))
    monkeypatch.setattr(served.leftovers, "make_folder", lambda: next(folders))
    processes = []
    for _ in range(4):
        process = served.ServedProcess(
            tmp_path, where="a side", cwd=tmp_path, test_files=[], pytest_args=[], cache_dir=None
        )
        process.process = Stuck(clock, deaf)
        process._asked_to_quit = True  # (connected, and told to quit: it is inside a test)
        processes.append(process)
    served.close_all(processes)
    assert all(p.process.killed and p.process.terminated for p in processes)
    # SIGTERM after a moment ends those that heed it; the rest are killed at one shared deadline
    assert clock[0] == pytest.approx(served.QUIT_GRACE_S if deaf else served.QUIT_PATIENCE_S)


def test_an_interrupted_lead_sends_sigterm_at_once(monkeypatch, tmp_path):
    # Ctrl-C: the lead wants nothing more from them, so no moment to end their sessions
    clock = [0.0]
    monkeypatch.setattr(served.time, "monotonic", lambda: clock[0])
    monkeypatch.setattr(served, "_sweep_once", lambda: None)
    monkeypatch.setattr(served.leftovers, "make_folder", lambda: tmp_path / "process")
    process = served.ServedProcess(
        tmp_path, where="a side", cwd=tmp_path, test_files=[], pytest_args=[], cache_dir=None
    )
    process.process = Stuck(clock, deaf=False)
    process._asked_to_quit = True
    served.close_all([process], interrupted=True)
    assert process.process.terminated and clock[0] == 0.0
