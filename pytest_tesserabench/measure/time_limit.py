"""The time limit of one ``bench()`` call (``--bench-timeout``): a call that never returns fails
its test, naming the call, and the rest of the run is measured.

Why a limit of our own when pytest-timeout exists: a measured call holds the machine-wide
measurement lock, so a hang stops every other ``pytest --bench`` on the machine, of any project,
not only this run; and many projects do not install pytest-timeout. The limit is a SIGALRM timer,
as pytest-timeout's signal method: the exception is raised where the call is, so the lock and
every ``with`` block around it are released on the way out. It raises pytest's ``Failed`` (a
BaseException), which a benchmark's own ``except Exception`` does not swallow.

Where SIGALRM cannot be used (not the main thread, no SIGALRM on the platform) there is no limit.
A timer already armed (pytest-timeout's) that would fire first is left to fire; one that would
fire later is re-armed afterwards with what is left of it.
"""

from __future__ import annotations

import contextlib
import signal
import threading
import time

import pytest


def budget_s(settings) -> float:
    """What a bench() call may take by design, on top of which ``--bench-timeout`` counts: its
    warm-up and measurement (an A/B interleave runs up to twice the budget, then settles), and
    under --bench-ab every served process's warm-up, which happen one at a time. A budget larger
    than the limit must not read as a hang."""
    seconds = settings.warmup + 2 * settings.max_time
    if settings.ab:
        seconds += ab_waits_s(settings)
    return seconds


def ab_waits_s(settings) -> float:
    """What an A/B call waits for besides its own measuring: its settling, and every served
    process's warm-up (one at a time). A served process's limit is given it with this added."""
    return settings.settle_time + 2 * settings.ab_processes * settings.warmup


@contextlib.contextmanager
def paused():
    """The time limit armed around this block (time_limit's) stopped while the block runs, and
    armed again after with what was left of it. A served process of --bench-ab waits inside its
    bench() call while the other processes measure their blocks: that wait is not its call
    running, and counted, the process that waited longest, not the one whose call hangs, would
    run out of time first and be named."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return
    left, interval = signal.setitimer(signal.ITIMER_REAL, 0)
    try:
        yield
    finally:
        if left:
            signal.setitimer(signal.ITIMER_REAL, left, interval)


@contextlib.contextmanager
def time_limit(seconds: float, what: str, timeout: float | None = None, budget: float | None = None):
    """Fail the test when the block has run ``seconds`` (0: no limit); ``what``: the call, and
    ``timeout`` and ``budget``: the test's own limit and its measuring budget, for the message."""
    if not seconds or not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return
    earlier_delay, earlier_interval = signal.getitimer(signal.ITIMER_REAL)
    if earlier_delay and earlier_delay <= seconds:
        yield  # an earlier timer (pytest-timeout's) fires first: it speaks for the test
        return

    def expired(signum, frame):
        __tracebackhide__ = True
        parts = "its timeout past its measuring budget"
        if timeout and budget is not None:
            parts = f"its timeout, {timeout:g} s, past its measuring budget of {budget:.1f} s"
        pytest.fail(
            f"{what} did not return within {seconds:.0f} s ({parts}): the test fails here and the rest of the run "
            "goes on; if the call is this slow by design, raise the limit (@pytest.mark.bench(timeout=SECONDS) on "
            "the test, or --bench-timeout=SECONDS for every test; 0 for none)",
            pytrace=True,
        )

    start = time.monotonic()
    earlier_handler = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, earlier_handler)
        if earlier_delay:  # what is left of the earlier timer (at least a moment: 0 would disarm it)
            left = max(earlier_delay - (time.monotonic() - start), 1e-3)
            signal.setitimer(signal.ITIMER_REAL, left, earlier_interval)
