"""Reading and writing the files a run leaves behind, so that bad input is a clear error and a
failed write loses nothing.

* ``read_json``: only regular files (a FIFO would hang, a directory or device is a mistake),
  UTF-8 only (with a named fix for UTF-16/32 and other encodings), no deeper nesting than a
  record needs, a size cap; every failure is a ``FileProblem`` naming the path.
* ``write_atomic``: the one writer. A regular file (or a missing one) is written to a temporary
  file in the same folder and renamed over the target, keeping the old file's permission bits,
  so a reader never sees half a file and an interrupted write leaves the old one. A symbolic link
  is written through (its target is replaced); a special file such as a FIFO or a device is
  written directly, since it cannot be replaced. A name of one of this process's open files
  (``/dev/stdout``, ``/dev/fd/N``, ``/proc/self/fd/N``) is written into that file descriptor, at
  its position, whatever it is open on: replaced, a log that stdout was redirected to
  (``> log.txt``) would lose everything written to it before.
* ``remove_stale_temporaries``: temporary files a killed writer left behind (call under the lock
  that serialises writers of that file).
* ``check_writable_file`` / ``check_writable_dir``: fail before minutes of measuring, not after.
"""

from __future__ import annotations

import codecs
import errno
import fcntl
import json
import os
import re
import stat
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

MAX_JSON_BYTES = 512 * 1024**2
MAX_NESTING = 200  # a record nests about 6 levels; beyond this a file is not ours
_TEMP_SUFFIX = ".tmp"
_BOMS = (
    (codecs.BOM_UTF32_LE, "UTF-32"),
    (codecs.BOM_UTF32_BE, "UTF-32"),
    (codecs.BOM_UTF16_LE, "UTF-16"),
    (codecs.BOM_UTF16_BE, "UTF-16"),
)


class FileProblem(OSError):
    """A file that cannot be read or written as asked; the message names it and the fix."""


def _kind(mode: int) -> str:
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def describe_special(path: Path) -> str | None:
    """Why ``path`` (after following links) is not a regular file, or None if it is or is absent.
    A dangling link is named as such."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        if path.is_symlink():
            return f"a symbolic link to {os.readlink(path)}, which does not exist"
        return None
    except OSError as exc:
        return f"unreadable ({exc.strerror or exc})"
    return None if stat.S_ISREG(mode) else _kind(mode)


def read_json(path: Path, what: str = "file") -> Any:
    """The parsed JSON at ``path``; FileProblem with the fix for anything else."""
    path = Path(path)
    special = describe_special(path)
    if special:
        raise FileProblem(f"{path}: the {what} is {special}; give the path of a regular JSON file")
    try:
        size = path.stat().st_size
        if size > MAX_JSON_BYTES:
            raise FileProblem(f"{path}: the {what} is {size / 1024**2:.0f} MiB, more than a benchmark file can be")
        raw = path.read_bytes()
    except FileProblem:
        raise
    except OSError as exc:
        raise FileProblem(f"{path}: the {what} cannot be read ({exc.strerror or exc})") from exc
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            raise FileProblem(
                f"{path}: the {what} is encoded as {encoding}; JSON files here are UTF-8: convert it "
                f"(e.g. `iconv -f {encoding} -t UTF-8`) or restore it from version control"
            )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileProblem(
            f"{path}: the {what} is not UTF-8 text (byte {exc.start}: {raw[exc.start : exc.start + 1]!r}); "
            "restore it from version control or move it away"
        ) from None
    try:
        return json.loads(text, parse_constant=float)
    except json.JSONDecodeError as exc:
        marker = _conflict_marker(text)
        if marker is not None:
            raise FileProblem(
                f"{path}: the {what} holds a git merge conflict (line {marker}: '<<<<<<<'): two branches wrote it. "
                f"Keep one side (`git checkout --theirs -- {path}`, or --ours), then save again on this machine if "
                "the other side's runs matter"
            ) from None
        raise FileProblem(
            f"{path}: the {what} is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "restore it from version control or move it away"
        ) from None
    except RecursionError:
        raise FileProblem(f"{path}: the {what} is nested too deeply to be one of ours; move it away") from None


def _conflict_marker(text: str) -> int | None:
    """The line of the first git conflict marker in ``text`` (a '<<<<<<< ' line with its '=======' and
    '>>>>>>> ' after it), or None."""
    lines = text.splitlines()
    for number, line in enumerate(lines, start=1):
        if line.startswith("<<<<<<< ") or line == "<<<<<<<":
            rest = lines[number:]
            if "=======" in rest and any(later.startswith(">>>>>>>") for later in rest):
                return number
    return None


def _check_nesting(value: Any, depth: int = 0) -> None:
    if depth > MAX_NESTING:
        raise ValueError(f"nested more than {MAX_NESTING} levels deep")
    if isinstance(value, dict):
        for item in value.values():
            _check_nesting(item, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _check_nesting(item, depth + 1)


def dumps(data: Any) -> str:
    """Sorted keys, two-space indent, strict JSON (no NaN), and a list of numbers or strings on one
    line: a diff of a committed file reads well, a saved run reads as a block of its fields rather
    than a column of its rounds (a baseline of 14 benchmarks and 3 saves: 10,329 lines otherwise)."""
    _check_nesting(data)
    return _dumped(data, "") + "\n"


def _dumped(value: Any, pad: str) -> str:
    inner = pad + "  "
    if isinstance(value, dict) and value:
        items = (f"{inner}{json.dumps(str(key))}: {_dumped(value[key], inner)}" for key in sorted(value))
        return "{\n" + ",\n".join(items) + f"\n{pad}}}"
    if isinstance(value, list) and value and any(isinstance(item, (dict, list)) for item in value):
        return "[\n" + ",\n".join(inner + _dumped(item, inner) for item in value) + f"\n{pad}]"
    return json.dumps(value, allow_nan=False)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_STANDARD_STREAMS = {"/dev/stdin": 0, "/dev/stdout": 1, "/dev/stderr": 2}


def open_descriptor(path: Path) -> int | None:
    """The file descriptor of this process that ``path`` names (``/dev/stdout``, ``/dev/fd/N``,
    ``/proc/self/fd/N``, or a symbolic link to one of them), or None."""
    pattern = re.compile(rf"/(?:dev/fd|proc/self/fd|proc/{os.getpid()}/fd)/(\d+)")
    current = os.path.abspath(path)
    for _ in range(40):  # the kernel's own limit on links followed
        if current in _STANDARD_STREAMS:
            return _STANDARD_STREAMS[current]
        match = pattern.fullmatch(current)
        if match:
            return int(match.group(1))
        if not os.path.islink(current):
            return None
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    return None


def _write_descriptor(path: Path, descriptor: int, data: bytes) -> None:
    """Write into an open file descriptor after what Python's own streams buffered for it, so
    their text and ``data`` keep their order."""

    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (AttributeError, OSError, ValueError):
            pass
    try:
        os.fstat(descriptor)
    except OSError:
        raise FileProblem(f"{path}: file descriptor {descriptor} is not open in this process") from None
    view = memoryview(data)
    while view:
        view = view[os.write(descriptor, view) :]


def write_atomic(path: Path, content: str | bytes) -> None:
    """Write ``content`` to ``path`` without ever leaving half a file (see the module doc)."""
    path = Path(path)
    data = content.encode("utf-8") if isinstance(content, str) else content
    descriptor = open_descriptor(path)
    if descriptor is not None:
        _write_descriptor(path, descriptor, data)
        return
    if path.is_symlink():
        target = Path(os.path.realpath(path))
        if not target.parent.is_dir():
            raise FileProblem(f"{path}: a symbolic link into {target.parent}, which does not exist")
        path = target
    special = describe_special(path)
    if special and not special.startswith(("a directory", "unreadable")):
        _write_special(path, data)
        return
    if special:
        raise FileProblem(f"{path}: is {special}; give a file path")
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        mode = 0o666 & ~_umask()  # what open() would have given a new file
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_TEMP_SUFFIX, dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)  # mkstemp makes 0600: keep what the file had
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def _write_special(path: Path, data: bytes, *, wait_for_reader_s: float = 2.0) -> None:
    """A device or FIFO has no contents to protect: write straight into it. A FIFO nobody reads
    would block forever, so it is opened without blocking (ENXIO: no reader yet), giving a reader
    that is just starting a moment to open its end."""
    deadline = time.monotonic() + wait_for_reader_s
    while True:
        try:
            handle = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            break
        except OSError as exc:
            if exc.errno != errno.ENXIO:
                raise
            if time.monotonic() > deadline:
                raise FileProblem(
                    f"{path}: a FIFO that nobody reads; start the reader first, or give a file path"
                ) from None
            time.sleep(0.02)
    os.set_blocking(handle, True)  # a reader exists: write all of it, however slowly it reads
    with os.fdopen(handle, "wb") as stream:
        stream.write(data)


def write_json(path: Path, data: Any) -> None:
    write_atomic(path, dumps(data))


def remove_stale_temporaries(path: Path) -> int:
    """Delete temporary files left by writers of ``path`` that were killed mid-write. Only safe
    under the lock that serialises writers of ``path``. Returns how many were removed."""
    path = Path(path)
    removed = 0
    for temporary in path.parent.glob(f".{path.name}.*{_TEMP_SUFFIX}"):
        try:
            temporary.unlink()
            removed += 1
        except OSError:
            pass
    return removed


# The lock files in the temp folder are a fixed set of slots, not one per file ever written: one per
# path would pile up without bound on a long-lived machine, and removing a lock file after release
# is racy (a waiter may already hold the removed file open while a newcomer locks a new one). Two
# paths that share a slot only take turns for the moment a save takes.
LOCK_SLOTS = 64


def lock_for(path: Path, *, timeout: float = -1):
    """A lock that serialises the writers of ``path`` (a filelock.FileLock), kept out of the
    user's folders: a lock file beside a committed baseline is clutter in every review. It lives in
    the system temp folder, in one of ``LOCK_SLOTS`` files chosen by a hash of the file's real
    path, world-writable so that every user of the machine shares it; where that folder cannot be
    used, beside the file. Never hold two at once: two paths may share a slot."""
    # hashlib (~3 ms) and filelock (~10 ms) for a lock only: pytest and every `tesserabench` command import this module
    import hashlib

    from filelock import FileLock

    slot = int.from_bytes(hashlib.sha256(os.path.realpath(path).encode()).digest()[:8], "big") % LOCK_SLOTS
    name = f"slot-{slot:02d}.lock"
    folder = Path(tempfile.gettempdir()) / "tesserabench-locks"
    try:
        folder.mkdir(exist_ok=True)
        if folder.stat().st_uid == os.getuid():
            folder.chmod(0o1777)  # sticky and open to all, as /tmp itself
        if not os.access(folder, os.W_OK):
            raise PermissionError(str(folder))
    except OSError:
        folder = Path(path).parent
        name = f".{Path(path).name}.lock"
    return FileLock(str(folder / name), timeout=timeout, mode=0o666)


def _nearest_existing(path: Path) -> Path:
    path = Path(os.path.abspath(path))
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _probe_write(folder: Path) -> str | None:
    """Write and remove a small file: catches read-only mounts and full disks, which
    ``os.access`` does not."""
    try:
        handle, temporary = tempfile.mkstemp(prefix=".tesserabench-probe.", dir=folder)
    except OSError as exc:
        return exc.strerror or str(exc)
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(b"\0" * 65536)
            stream.flush()
            os.fsync(stream.fileno())
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        Path(temporary).unlink(missing_ok=True)
    return None


def check_writable_dir(folder: Path) -> str | None:
    """Why files cannot be created under ``folder`` (which may not exist yet), or None."""
    folder = Path(folder)
    existing = _nearest_existing(folder)
    if not existing.is_dir():
        return f"{existing} is {'a file' if existing.is_file() else describe_special(existing)}, not a folder"
    problem = _probe_write(existing)
    if problem:
        return f"cannot write in {existing}: {problem}"
    return None


def check_writable_file(path: Path, example: str = "results.json") -> str | None:
    """Why ``path`` cannot be written, or None. A special file (``/dev/stdout``) is writable if
    it can be opened; a regular file needs a writable folder for the atomic rename. ``example``:
    a file name of the kind expected, for the message when ``path`` is a directory."""
    path = Path(path)
    descriptor = open_descriptor(path)
    if descriptor is not None:
        try:
            access = fcntl.fcntl(descriptor, fcntl.F_GETFL) & os.O_ACCMODE
        except OSError:
            return f"names file descriptor {descriptor}, which is not open; give a file path"
        if access not in (os.O_WRONLY, os.O_RDWR):
            return f"names file descriptor {descriptor}, which is open read-only; give a file path"
        return None
    if path.is_symlink():
        path = Path(os.path.realpath(path))
    special = describe_special(path)
    if special and special.startswith("a directory"):
        return f"is a directory; give a file path like {path / example}"
    if special and "does not exist" not in special:
        return None if os.access(path, os.W_OK) else f"is {special} and not writable"
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        return f"folder {folder} does not exist; create it first"
    if path.exists() and not os.access(path, os.W_OK):
        return "is not writable; choose another path"
    return check_writable_dir(folder)
