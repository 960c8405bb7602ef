"""A file lock that says who holds it, and a wait for it that is bounded and not silent.

A filelock.FileLock only blocks: a process that waits for one held by a hung benchmark waits
forever without a word. Here the holder writes a small note beside the lock once it has it
(``<lock>.holder.json``: pid, command line, since when) and removes it before releasing, so a
waiter can say who it waits for, and gives up after a bounded time with an error that names the
holder and what to do.

filelock takes ``flock`` locks on Linux: the kernel releases one when its holder dies, so a lock
is never held by a dead process. A note naming a dead pid is therefore a leftover (a holder
killed between taking the lock and removing its note, or one in another pid namespace sharing
the temp folder); the kernel's own table (/proc/locks) then says which live process holds it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path

# Long enough that an ordinary wait for a neighbour's benchmark stays quiet, short enough that a
# user looking at a silent terminal learns why within moments.
NOTICE_AFTER_S = 5.0


class LockWaitTimeout(RuntimeError):
    """A lock was not free within the allowed time; the message names its holder and the fix."""


def note_path(lock_file: str | Path) -> Path:
    return Path(f"{lock_file}.holder.json")


MAX_COMMAND_CHARS = 300


def _one_line(command: str) -> str:
    # The waiter's notice is one line: a `python -c` script's newlines and a long argument list
    # would make it many.
    command = " ".join(command.split())
    return command if len(command) <= MAX_COMMAND_CHARS else command[: MAX_COMMAND_CHARS - 3] + "..."


def _command_line() -> str:
    argv = getattr(sys, "orig_argv", None) or [sys.executable, *sys.argv]
    return _one_line(shlex.join(str(a) for a in argv))


def write_note(lock_file: str | Path) -> None:
    """Say that this process holds ``lock_file``. Best effort: a note that cannot be written (a
    read-only folder, another user's file) only costs a waiter its explanation."""
    note = {"pid": os.getpid(), "command": _command_line(), "since": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    try:
        # Written in place, not replaced: in a sticky temp folder another user's note may be
        # rewritten (it is world-writable) but not renamed over.
        fd = os.open(note_path(lock_file), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
        with open(fd, "w") as out:
            with contextlib.suppress(OSError):
                os.fchmod(out.fileno(), 0o666)
            json.dump(note, out)
    except OSError:
        pass


def remove_note(lock_file: str | Path) -> None:
    """Remove this process's note, before the lock is released (after, it may be the next
    holder's). Emptied where it cannot be removed (another user's file in a sticky folder)."""
    path = note_path(lock_file)
    try:
        path.unlink()
    except FileNotFoundError:
        pass
    except OSError:
        with contextlib.suppress(OSError):
            path.write_text("")


def read_note(lock_file: str | Path) -> dict | None:
    try:
        note = json.loads(note_path(lock_file).read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(note, dict) or not isinstance(note.get("pid"), int):
        return None
    return note


def pid_alive(pid: int) -> bool:
    """Whether ``pid`` names a running process (a zombie, dead but not yet reaped, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's live process
        pass
    try:
        # "pid (comm) S ...": the state follows the command's closing parenthesis.
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True  # no /proc (not Linux): kill's answer stands


def _kernel_holders(lock_file: str | Path) -> list[int]:
    """The pids the kernel's lock table gives for ``lock_file`` (Linux only; [] elsewhere)."""
    try:
        inode = os.stat(lock_file).st_ino
        table = Path("/proc/locks").read_text()
    except OSError:
        return []
    pids = []
    for line in table.splitlines():
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 1234 08:01:5678 0 EOF"; a waiter's line has "->" after the number
        if len(fields) >= 6 and fields[1] != "->" and fields[5].rsplit(":", 1)[-1] == str(inode):
            with contextlib.suppress(ValueError):
                pids.append(int(fields[4]))
    return pids


def _process_command(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return "its command line is not readable"
    return _one_line(shlex.join(part.decode(errors="replace") for part in raw.split(b"\0") if part)) or "?"


def describe_holder(lock_file: str | Path) -> tuple[str, int | None]:
    """Who holds ``lock_file``, in words, and its pid where known."""
    note = read_note(lock_file)
    if note is not None and pid_alive(note["pid"]):
        pid = note["pid"]
        return f"pid {pid} ({_one_line(str(note.get('command', '?')))}), holding it since {note.get('since', '?')}", pid
    kernel = [pid for pid in _kernel_holders(lock_file) if pid != os.getpid()]
    stale = (
        f"its holder note names pid {note['pid']}, which is not running (a leftover: the lock itself is released "
        "when its holder dies); "
        if note is not None
        else "it left no holder note; "
    )
    if kernel:
        pid = kernel[0]
        return f"pid {pid} ({_process_command(pid)}) by the kernel's lock table; {stale.rstrip('; ')}", pid
    return f"an unknown process: {stale}no live holder found in /proc/locks", None


def acquire(
    lock,
    *,
    timeout: float,
    say: Callable[[str], None],
    what: str,
    option: str,
    notice_after: float = NOTICE_AFTER_S,
) -> None:
    """Take ``lock`` (a filelock.FileLock), waiting at most ``timeout`` seconds. After
    ``notice_after`` seconds (or half the timeout, when that is shorter) ``say`` gets one line
    naming the holder; past the timeout LockWaitTimeout names the holder and the fix. Once taken,
    this process's note is written beside the lock; ``release`` removes it."""
    from filelock import Timeout  # ~10 ms: the plugin imports this module at its top

    if lock.is_locked:  # taken again by its holder (filelock counts): its note is written already
        lock.acquire()
        return
    started = time.monotonic()
    first_wait = min(notice_after, timeout / 2)
    try:
        lock.acquire(timeout=first_wait)
    except Timeout:
        holder, _ = describe_holder(lock.lock_file)
        say(f"tesserabench: waiting for {what} ({lock.lock_file}), held by {holder}; giving up after {timeout:g} s")
        try:
            lock.acquire(timeout=max(0.0, timeout - (time.monotonic() - started)))
        except Timeout:
            holder, pid = describe_holder(lock.lock_file)
            if pid is not None:
                end_it = f"If it is stuck, end it (kill {pid}); "
            else:
                end_it = f"If no benchmark is running, remove {lock.lock_file}; "
            raise LockWaitTimeout(
                f"gave up waiting for {what} ({lock.lock_file}) after {timeout:g} s: it is held by {holder}. "
                f"{end_it}otherwise wait for it to finish, or allow a longer wait with {option}=SECONDS"
            ) from None
    write_note(lock.lock_file)


def release(lock) -> None:
    if lock.lock_counter == 1:  # the last release of this holder's: the note goes before the lock does
        remove_note(lock.lock_file)
    lock.release()
