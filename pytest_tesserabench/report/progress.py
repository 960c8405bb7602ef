"""A live status line while a benchmark measures, on a terminal only.

Measuring one benchmark may take seconds to minutes; the line shows which test and call, the
rounds so far, the time spent and the current interval of the median, after whatever pytest has
written on the line (its dots, or the test's name under ``-v``), and is erased when measuring
ends, so pytest's own output reads as it would without it.

pytest captures file descriptor 1 while a test runs, so the line is written to a duplicate of
the terminal's descriptor taken when the session starts. It exists only when that descriptor is a
terminal: a CI log or a file never sees a status line, and ``-q`` turns it off.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

from pytest_tesserabench.record.units import format_ms
from pytest_tesserabench.report.layout import shorten_middle

SAVE, RESTORE_AND_ERASE = "\x1b7", "\x1b8\x1b[K"  # DEC save/restore cursor; erase to end of line
MIN_ROOM = 24  # columns left on pytest's line below which the status is not worth showing
REFRESH_S = 0.2


class StatusLine:
    def __init__(
        self,
        fd: int,
        *,
        room: Callable[[], int],
        flush: Callable[[], None] = lambda: None,
        clock: Callable[[], float] = time.monotonic,
    ):
        self._fd = fd
        self._room = room  # columns left on the terminal's current line
        self._flush = flush  # pytest's own pending output, written before ours
        self._clock = clock
        self._label = ""
        self._shown = False
        self._last = -1e9

    @classmethod
    def for_terminal(cls, config, *, quiet: bool) -> StatusLine | None:
        """A status line on pytest's terminal, or None (not a terminal, -q, TERM=dumb)."""
        if quiet or os.environ.get("TERM") == "dumb":
            return None
        try:
            fd = sys.stdout.fileno()
            if not os.isatty(fd):
                return None
            fd = os.dup(fd)
        except (AttributeError, OSError, ValueError):  # pytester's in-process runs, closed streams
            return None

        def writer():  # the terminal reporter registers after this plugin is configured
            reporter = config.pluginmanager.get_plugin("terminalreporter")
            return reporter.config.get_terminal_writer() if reporter is not None else None

        def room() -> int:
            tw = writer()
            return tw.fullwidth - tw.width_of_current_line - 1 if tw is not None else 0

        def flush() -> None:
            tw = writer()
            if tw is not None:
                tw.flush()

        return cls(fd, room=room, flush=flush)

    def start(self, label: str) -> Callable:
        """Begin a benchmark; returns the callback sampling.measure calls after each round."""
        self._label = label
        self._last = -1e9
        self._show("  warming up")
        return self.round

    def round(self, rounds_ms: list[float], elapsed_s: float, halfwidth: float | None) -> None:
        now = self._clock()
        if now - self._last < REFRESH_S:
            return
        median = sorted(rounds_ms)[len(rounds_ms) // 2] if rounds_ms else None
        interval = f" ±{halfwidth:.1%}" if halfwidth is not None else ""
        self._show(f"  round {len(rounds_ms)}  {elapsed_s:.1f} s  median {format_ms(median)}{interval}", now=now)

    def stop(self) -> None:
        if self._shown:
            self._write(RESTORE_AND_ERASE)
            self._shown = False

    def close(self) -> None:
        self.stop()
        try:
            os.close(self._fd)
        except OSError:
            pass

    def _show(self, figures: str, *, now: float | None = None) -> None:
        """The label (shortened in the middle if need be) and ``figures`` (kept whole)."""
        self._last = self._clock() if now is None else now
        if not self._shown:
            self._flush()
            room = self._room()
            if room < MIN_ROOM:
                return
            self._width = room
            self._write(SAVE)
            self._shown = True
        label = shorten_middle(self._label, max(8, self._width - 1 - len(figures)))
        self._write(RESTORE_AND_ERASE + SAVE + " " + label + figures)

    def _write(self, text: str) -> None:
        try:
            os.write(self._fd, text.encode("utf-8", "replace"))
        except OSError:  # the terminal went away: the run goes on without a status line
            self._shown = False
