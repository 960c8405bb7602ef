"""A real process that holds a file lock until told to let go (its stdin closed): shared by the
tests of waiting for a held lock (the ``private_tmp`` fixture, in conftest.py, gives them a temp
folder of their own)."""

import subprocess
import sys

HOLDER = """
import sys, filelock
from pytest_tesserabench.record import held_lock
lock = filelock.FileLock(sys.argv[1], mode=0o666)
held_lock.acquire(lock, timeout=60, say=print, what="the lock", option="--x")
print("held", flush=True)
sys.stdin.read()  # until the test closes our stdin
held_lock.release(lock)
"""


def start_holder(lock_file, folder):
    """The holder of ``lock_file``, once it holds it (its script in ``folder``, named
    lock_holder.py: what the holder's command line shows)."""
    script = folder / "lock_holder.py"
    script.write_text(HOLDER)
    holder = subprocess.Popen(
        [sys.executable, str(script), str(lock_file)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout.readline().strip() == "held"
    return holder


def stop(holder):
    holder.stdin.close()
    try:
        holder.wait(timeout=60)
    except subprocess.TimeoutExpired:
        holder.kill()
        holder.wait()
