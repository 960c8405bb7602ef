"""A run that ``--bench-save`` could not write, because another process held the baseline's lock
past ``--bench-lock-timeout``: kept whole in a run file (the ``--bench-json`` form) under the
pytest cache, with the command that saves it once the lock is free (``tesserabench save``).
Minutes of measuring are not thrown away because a neighbour was slow to let go.
"""

from __future__ import annotations

import os
import shlex
import tempfile
import time
from pathlib import Path

from pytest_tesserabench.history.baseline import DEFAULT_HISTORY
from pytest_tesserabench.record import files
from pytest_tesserabench.record.results import RunDocument

FOLDER = "unsaved-runs"


def keep(run: RunDocument, name: str, cache_dir: Path | None) -> Path:
    """Write ``run`` to a new file of its own; its path. OSError where it cannot be written."""
    folder = (
        Path(cache_dir) / FOLDER if cache_dir is not None else Path(tempfile.gettempdir()) / f"tesserabench-{FOLDER}"
    )
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.json"
    files.write_atomic(path, run.to_text(samples=True))
    return path


def save_command(name: str, run_file: Path, bench_dir: Path, history: int) -> str:
    """The command that appends the kept run to baseline ``name``, as this session would have."""
    command = ["tesserabench", "save", name, str(run_file), "--dir", str(Path(bench_dir).resolve())]
    if history != DEFAULT_HISTORY:
        command += ["--history", str(history)]
    return shlex.join(command)
