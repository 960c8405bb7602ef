"""How much CPU other processes used while a benchmark was timed.

The run-queue wait (``run_queue``) sees another process only when it takes this thread's CPU. On a
machine with a spare CPU it never does, yet a busy neighbour still shares the caches, the memory
bandwidth and, on most cloud VMs, the physical core (vCPUs are SMT siblings). Linux counts every
CPU's busy time in ``/proc/stat``; what this process did not use of it (its CPU time, all its
threads), other work did. The summary and a regression's verdict say so: a figure taken beside
other work is worth confirming in one job (A/B).

``/proc/stat`` counts in clock ticks (100 Hz on most kernels): one round's figure is coarse, the
sum over a benchmark's rounds is not. Processes a benchmark starts itself count as others.
Elsewhere (macOS, Windows, no ``/proc``) it reads 0: nothing is known of the neighbours.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from pytest_tesserabench.machine import run_queue

_STAT = "/proc/stat"
# At least this many CPUs' worth of other work over the timed rounds: the machine was shared (the
# summary says so, and a regression's verdict). An idle machine reads a few hundredths.
SHARED_CPUS = 0.5

Reading = tuple[int, int]  # (ns of CPU other processes have used, ns of wall clock), from any origin


def others_clock() -> tuple[Callable[[], Reading], Callable[[], None]]:
    """(read, close): differences of ``read()`` over a round are the CPU time other processes used
    in it and the round's wall time. A read costs one ``pread`` of ``/proc/stat`` (5-8 us)."""
    try:
        tick_ns = 1e9 / os.sysconf("SC_CLK_TCK")
    except (ValueError, AttributeError, OSError):
        return unavailable()
    own_cpu, wall = time.process_time_ns, time.monotonic_ns

    def busy_less_own(text: bytes) -> Reading:
        # "cpu  user nice system idle iowait irq softirq steal ...": busy is all but idle, iowait
        # and steal (guest time is already inside user).
        fields = text.split(b"\n", 1)[0].split()
        busy = int(fields[1]) + int(fields[2]) + int(fields[3]) + int(fields[6]) + int(fields[7])
        return int(busy * tick_ns) - own_cpu(), wall()

    return run_queue.proc_reader(_STAT, 512, busy_less_own) or unavailable()


def unavailable() -> tuple[Callable[[], Reading], Callable[[], None]]:
    """The clock where there is none (and for tests on a fake clock): no neighbours are seen."""
    return _nothing, _no_op


def _nothing() -> Reading:
    return 0, 0


def _no_op() -> None:
    pass
