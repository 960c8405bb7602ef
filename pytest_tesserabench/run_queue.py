"""How long the calling thread has waited for a CPU: the run-queue wait that CPU timing leaves out.

On a shared machine another process can take the CPU in the middle of a sample; the wall clock
then bills that whole slice to the benchmark (a 5 ms workload sharing its CPU with one busy
process read 9.5 ms). Linux keeps, per thread, the time it spent runnable but not running
(``run_delay``, the second field of ``/proc/thread-self/schedstat``). A CPU sample is its wall
time less the wait that fell inside it: time the code ran, whatever else wanted the CPU. It is not
CPU time: a thread that sleeps while its worker threads compute (a BLAS call) still counts that
sleep, so multi-threaded code reads as it does on the wall clock. Only being kept off the CPU by
the scheduler is left out; hypervisor steal and a busy SMT sibling are not (nothing can see them).

The wait of the process's other threads (a BLAS or torch thread pool's workers) cannot be left out:
the timing thread sleeps or spins until they finish, so their wait lengthens its sample as work
would. It is counted (``workers_wait_clock``) so that the gate knows the figure depended on the load
(on the CI VM a 2-thread numpy matmul's worker waited 0.1% of the time quiet, 33-49% beside one or
two busy processes, and read +14% slower after its timing thread's wait was left out).

Elsewhere (macOS, Windows, a Linux without schedstat) the wait reads as 0, and samples are plain
wall time.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

_SCHEDSTAT = "/proc/thread-self/schedstat"
_TASKS = "/proc/self/task"
# Below this share of the timed wall clock, waiting for a CPU is ordinary scheduling; above it the
# CPU was shared with other work (the summary says so, and a regression's verdict).
SHARED = 0.05


def wait_clock() -> tuple[Callable[[], int], Callable[[], None]]:
    """(read, close) for the calling thread: ``read()`` is its run-queue wait so far in ns.

    Open it in the thread that times (``thread-self`` is resolved when the file is opened) and
    close it when the round is over. A read costs one ``pread`` (0.6-0.9 us measured on the CI VM).
    """
    return proc_reader(_SCHEDSTAT, 64, _run_delay) or unavailable()


def workers_wait_clock() -> tuple[Callable[[], int], Callable[[], None]]:
    """(read, close) for the process's threads other than the calling one, as they are when it is
    opened: ``read()`` is their run-queue wait so far in ns, summed. Open it per round (a thread
    pool started later is seen in the next); a thread that ends keeps its last reading."""
    try:
        me = str(threading.get_native_id())
        tids = [tid for tid in os.listdir(_TASKS) if tid != me]
    except OSError:
        return unavailable()
    readers = [proc_reader(f"{_TASKS}/{tid}/schedstat", 64, _run_delay) for tid in tids]
    readers = [reader for reader in readers if reader is not None]
    last = [read() for read, _ in readers]

    def read() -> int:
        for i, (read_one, _) in enumerate(readers):
            try:
                last[i] = read_one()
            except (OSError, IndexError, ValueError):  # the thread has ended
                pass
        return sum(last)

    def close() -> None:
        for _, close_one in readers:
            close_one()

    return read, close


def _run_delay(text: bytes) -> int:
    return int(text.split()[1])


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
