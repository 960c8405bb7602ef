"""Each pass of a benchmark starts on the next CPU: a pass's measurement is moved onto one of the
CPUs the process may use, in turn, and left free there.

Why: on a virtual machine one vCPU at a time runs slower, by 1.5-2x, for stretches of a fraction of
a second to minutes (presumably the host running other work on the same physical core), and only for
some kinds of work. The scheduler keeps a single-threaded process on the vCPU it started on, so
every pass of the process measured the same vCPU: a process that landed on the slow one read a
benchmark +50-90% for its whole life, and a baseline of nine processes held the benchmark at two
levels (its noise then hides any slowdown). The gate's centre of a run is the lowest of its
passes' centres (interference only slows); with the passes spread over the CPUs, that is the
reading of the CPU the slow stretch did not touch.

Not for a GPU timer: a device's time does not depend on the host's CPU.

Moved, not pinned: the thread's affinity is set to the one CPU and given back at once, so the
scheduler keeps it there while nothing calls it away, and a multi-threaded benchmark's threads
(which may be created inside the measurement, and inherit the mask) are never held to one CPU.
"""

from __future__ import annotations

import os

from pytest_tesserabench.record.results import GPU_TIMERS


def start_on_cpu(turn: int, timer: str) -> int | None:
    """Move the calling thread onto the ``turn``-th of the CPUs it may use (in turn, modulo their
    number) and leave it free to run on all of them again, for a measurement by ``timer`` (a
    timer's name). The CPU, or None where there is no choice (one CPU, no affinity on this
    platform) or no need (a GPU timer)."""
    if timer in GPU_TIMERS or not hasattr(os, "sched_setaffinity"):
        return None
    allowed = os.sched_getaffinity(0)
    if len(allowed) < 2:
        return None
    cpu = sorted(allowed)[turn % len(allowed)]
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        return None  # not allowed here: the scheduler decides
    finally:
        os.sched_setaffinity(0, allowed)
    return cpu
