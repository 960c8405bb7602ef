"""A served or fresh process never outlives the session that started it (its lead).

Its connection to the lead is not enough: the process notices a broken connection only when it
next reads from it, and a process inside a test (a benchmark that hangs, a long compilation) does
not read; after a SIGKILL of the lead it would run on, holding a CPU, GPU memory and its temp
folder. On Linux the kernel kills it when its parent dies (``PR_SET_PDEATHSIG``), whatever it is
doing; elsewhere a thread checks once a second whether the lead is still there.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import threading
import time

from pytest_tesserabench.record.held_lock import pid_alive

LEAD_PID_ENV = "TESSERABENCH_LEAD_PID"
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
POLL_S = 1.0


def lead_environment() -> dict[str, str]:
    """What a process this one starts needs to know to end with it."""
    return {LEAD_PID_ENV: str(os.getpid())}


def _parent_death_signal() -> bool:
    """Ask the kernel for SIGKILL when this process's parent dies; False where it cannot."""
    if not sys.platform.startswith("linux"):
        return False

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _watch(lead: int) -> None:
    while pid_alive(lead):
        time.sleep(POLL_S)
    os._exit(1)


def die_with_lead() -> None:
    """Called early in a served process: from here on it ends when its lead does."""
    raw = os.environ.get(LEAD_PID_ENV, "")
    if not raw.isdigit():
        return  # not started by a lead (a user running --bench-ab-serve by hand)
    lead = int(raw)
    armed = _parent_death_signal() and os.getppid() == lead
    # The lead may have died before the signal was armed (the kernel only reports deaths after):
    # then it is gone already and this process would never be told.
    if not pid_alive(lead):
        os._exit(1)
    if not armed:  # another platform, or a parent between the lead and this process
        threading.Thread(target=_watch, args=(lead,), name="tesserabench-lead-watch", daemon=True).start()
