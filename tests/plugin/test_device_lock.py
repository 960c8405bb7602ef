"""The machine's measurement lock, held by another process: the waiter says who holds it and
gives up after --bench-lock-timeout with an error naming the holder, instead of hanging. The
holder is a real process; it holds the lock until told to let go, so nothing here depends on
how long anything takes (the timeouts only bound the wait that must fail)."""

import os
import subprocess
import sys

import filelock
import pytest
from lock_holder import HOLDER, start_holder, stop

from pytest_tesserabench.record import held_lock


def test_a_held_lock_at_the_start_names_its_holder_and_stops_the_run(pytester, private_tmp, fast):
    pytester.makepyfile("def test_a(bench):\n    bench(lambda: None)\n")
    holder = start_holder(private_tmp / "tesserabench-measure.lock", private_tmp)
    try:
        # A process of its own, so that a wait that never ends fails this test (the timeout is only
        # that safety net) rather than hanging the suite.
        result = pytester.runpytest_subprocess("--bench", "--bench-lock-timeout=1", *fast, timeout=300)
    finally:
        stop(holder)
    output = result.stdout.str() + result.stderr.str()
    lock_file = private_tmp / "tesserabench-measure.lock"
    assert f"waiting for the measurement lock ({lock_file}), held by pid {holder.pid} (" in output
    assert "lock_holder.py" in output  # the holder's command line
    assert "holding it since" in output
    assert "gave up waiting for the measurement lock" in output
    assert f"If it is stuck, end it (kill {holder.pid})" in output
    assert "--bench-lock-timeout=SECONDS" in output
    assert result.ret == pytest.ExitCode.INTERRUPTED
    assert "passed" not in output and "failed" not in output  # nothing ran


def test_a_lock_taken_while_the_run_measures_fails_that_test_and_stops_the_run(pytester, private_tmp, fast):
    pytester.makepyfile(
        f"""
        import subprocess, sys

        HOLDER = {HOLDER!r}

        def test_first(bench):
            holder = subprocess.Popen(
                [sys.executable, "-c", HOLDER, {str(private_tmp / "tesserabench-measure.lock")!r}],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
            )
            try:
                assert holder.stdout.readline().strip() == "held"
                bench(lambda: None)
            finally:
                holder.stdin.close()
                holder.wait(timeout=60)

        def test_second(bench):
            bench(lambda: None)
        """
    )
    result = pytester.runpytest_subprocess("--bench", "--bench-lock-timeout=1", *fast, timeout=300)
    result.assert_outcomes(failed=1)  # the second never waits as long again
    result.stdout.fnmatch_lines(
        [
            "*tesserabench: waiting for the measurement lock (*), held by pid * (*), holding it since *",
            "*LockWaitTimeout: gave up waiting for the measurement lock*If it is stuck, end it (kill *)*",
            "*Interrupted: tesserabench: gave up waiting*",
        ]
    )


def test_the_holder_note_exists_while_held_and_goes_on_release(private_tmp):
    lock = filelock.FileLock(str(private_tmp / "l.lock"))
    held_lock.acquire(lock, timeout=1, say=print, what="the lock", option="--x")
    note = held_lock.read_note(lock.lock_file)
    assert note["pid"] == os.getpid() and note["since"] and note["command"]
    held_lock.release(lock)
    assert not held_lock.note_path(lock.lock_file).exists()


def test_a_note_naming_a_dead_pid_is_called_a_leftover_and_the_live_holder_is_found(private_tmp):
    lock_file = private_tmp / "l.lock"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()  # reaped: its pid names no process now
    holder = start_holder(lock_file, lock_file.parent)
    try:
        held_lock.note_path(lock_file).write_text(f'{{"pid": {dead.pid}, "command": "x", "since": "y"}}')
        text, pid = held_lock.describe_holder(lock_file)
    finally:
        stop(holder)
    assert f"names pid {dead.pid}, which is not running (a leftover" in text
    assert pid == holder.pid and "lock_holder.py" in text  # from the kernel's lock table


def test_a_free_lock_with_a_dead_holders_note_is_taken_at_once(private_tmp):
    lock_file = private_tmp / "l.lock"
    held_lock.note_path(lock_file).write_text('{"pid": 999999999, "command": "x", "since": "y"}')
    lines = []
    lock = filelock.FileLock(str(lock_file))
    held_lock.acquire(lock, timeout=60, say=lines.append, what="the lock", option="--x")
    assert held_lock.read_note(lock_file)["pid"] == os.getpid() and not lines
    held_lock.release(lock)
