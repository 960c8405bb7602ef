"""What a killed lead leaves behind, found and removed by the next run.

A served process's temp folder (its socket, log and the plugin's path shim) is removed when the
lead closes it; a lead killed with SIGKILL never does. Each folder's name therefore carries its
lead's pid (``tesserabench-ab-<pid>-<random>``), and a run that starts served processes removes
the folders whose lead is no longer running. A folder of a live lead is never touched, whoever it
belongs to (a pid reused since only keeps a leftover a while longer).
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from pytest_tesserabench.record.held_lock import pid_alive

PREFIX = "tesserabench-ab-"
_OWNED = re.compile(rf"^{re.escape(PREFIX)}(\d+)-")


def make_folder() -> Path:
    """A new temp folder owned by this process (its pid in the name)."""
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-"))


def owner(folder: Path) -> int | None:
    match = _OWNED.match(folder.name)
    return int(match.group(1)) if match else None


def sweep(where: Path | None = None) -> list[Path]:
    """Remove the folders in ``where`` (the temp folder) whose owner is dead; those removed."""
    where = Path(where or tempfile.gettempdir())
    removed = []
    try:
        candidates = list(where.glob(f"{PREFIX}*"))
    except OSError:
        return removed
    for folder in candidates:
        pid = owner(folder)
        if pid is None or pid_alive(pid) or not folder.is_dir():
            continue
        shutil.rmtree(folder, ignore_errors=True)  # another user's stays: not ours to remove
        if not folder.exists():
            removed.append(folder)
    return removed
