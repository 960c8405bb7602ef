"""How long the calling thread has waited for a CPU: the run-queue wait that CPU timing leaves out.

On a shared machine another process can take the CPU in the middle of a sample; the wall clock
then bills that whole slice to the benchmark (a 5 ms workload sharing its CPU with one busy
process read 9.5 ms). Linux keeps, per thread, the time it spent runnable but not running
(``run_delay``, the second field of ``/proc/thread-self/schedstat``). A CPU sample is its wall
time less the wait that fell inside it: time the code ran, whatever else wanted the CPU. It is not
CPU time: a thread that sleeps while its worker threads compute (a BLAS call) still counts that
sleep, so multi-threaded code reads as it does on the wall clock. Only being kept off the CPU by
the scheduler is left out; hypervisor steal and a busy SMT sibling are not (nothing can see them).

Elsewhere (macOS, Windows, a Linux without schedstat) the wait reads as 0, and samples are plain
wall time.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_SCHEDSTAT = "/proc/thread-self/schedstat"
# Below this share of the timed wall clock, waiting for a CPU is ordinary scheduling; above it the
# CPU was shared with other work (the summary says so, and a regression's verdict).
SHARED = 0.05


def wait_clock() -> tuple[Callable[[], int], Callable[[], None]]:
    """(read, close) for the calling thread: ``read()`` is its run-queue wait so far in ns.

    Open it in the thread that times (``thread-self`` is resolved when the file is opened) and
    close it when the round is over. A read costs one ``pread`` (under a microsecond).
    """
    return proc_reader(_SCHEDSTAT, 64, lambda text: int(text.split()[1])) or unavailable()


def proc_reader(path: str, size: int, parse: Callable[[bytes], T]) -> tuple[Callable[[], T], Callable[[], None]] | None:
    """(read, close) for a file of ``/proc`` kept open: ``read()`` is ``parse`` of its first
    ``size`` bytes, read afresh; None where the file is missing or in a format ``parse`` does not
    know (then the caller leaves out what it would have read)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    pread = os.pread

    def read() -> T:
        return parse(pread(fd, size, 0))

    try:
        read()
    except (OSError, IndexError, ValueError):
        os.close(fd)
        return None
    return read, lambda: os.close(fd)


def unavailable() -> tuple[Callable[[], int], Callable[[], None]]:
    """The clock where there is none: nothing is ever left out (also for tests on a fake clock,
    whose samples a real wait would otherwise be subtracted from)."""
    return _never_waited, _no_op


def _never_waited() -> int:
    return 0


def _no_op() -> None:
    pass
