"""The run as a JSON document (DESIGN section 6) and its atomic write for ``--bench-json``."""

from __future__ import annotations

import json
import math
import os
import tempfile
from pathlib import Path

SCHEMA = 1


def run_document(session, *, with_samples: bool, records: dict[str, dict] | None = None) -> dict:
    records = session.records if records is None else records
    benchmarks = {}
    for record_id, record in records.items():
        entry = {k: v for k, v in record.items() if k != "id"}
        if not with_samples:
            entry.pop("samples_ms", None)
        benchmarks[record_id] = entry
    return {
        "schema": SCHEMA,
        "machine": session.machine_info,
        "commit": session.commit,
        "started": session.started,
        "canary_ms": list(session.canary_ms),
        "benchmarks": benchmarks,
    }


def write_json(path: Path, document: dict) -> None:
    """The run file: NaN and infinities become null, so any JSON reader can read it."""
    atomic_write_json(Path(path), finite(document))


def atomic_write_json(path: Path, data) -> None:
    """Sorted keys, two-space indent (diffable); written to a temporary file in the same folder
    and renamed over the target, so a reader never sees half a file and a failed write leaves
    the old one."""
    text = json.dumps(data, sort_keys=True, indent=2, allow_nan=False, default=_default) + "\n"
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _default(value):
    if isinstance(value, Path):
        return str(value)
    if hasattr(value, "item"):  # numpy scalars
        return value.item()
    return str(value)


def finite(value):
    """The value with non-finite floats as None: JSON has no NaN or Infinity."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value
