"""Baseline files: ``<root>/<NAME>/<machine-key>.json`` (DESIGN.md section 6).

A baseline file is ``{"schema": 1, "name": NAME, "machine_key": KEY, "runs": [run, ...]}`` with
sorted keys and two-space indent, so a change reads well in review. Runs keep round medians, never
raw samples. Writes are atomic (a temporary file in the same folder, then ``os.replace``) and
serialised by a lock file next to the baseline, so an interrupted run or parallel savers never
leave a half-written file. A file that is not ours to understand is never overwritten.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from pathlib import Path
from typing import Any

from filelock import FileLock

from pytest_tesserabench.report.json_report import atomic_write_json

SCHEMA = 1
NAME_RE = r"[A-Za-z0-9._-]+"
_NAME = re.compile(NAME_RE)
DEFAULT_HISTORY = 10
LOCK_TIMEOUT_S = 60


class BaselineError(Exception):
    """A baseline name, file or run that cannot be used; the message names the culprit and the fix."""


def validate_name(name: str, *, what: str = "baseline name") -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name) or set(name) == {"."}:
        raise BaselineError(
            f"{what} {name!r} is not allowed: use letters, digits, '.', '_' and '-' only "
            f"(it becomes a file name; e.g. 'main' or 'release-1.2')"
        )
    return name


def baseline_path(root: Path, name: str, machine_key: str) -> Path:
    validate_name(name)
    validate_name(machine_key, what="machine key")
    return Path(root) / name / f"{machine_key}.json"


def _lock_path(path: Path) -> Path:
    # Hidden and next to the file: the lock must live on the same file system as the data.
    return path.with_name(f".{path.name}.lock")


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BaselineError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BaselineError(
            f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "restore it from version control or move it away and record a new baseline"
        ) from exc


def _check_run(path: Path, run: Any, where: str) -> None:
    if not isinstance(run, dict):
        raise BaselineError(f"{path}: {where} is not a run object; restore the file from version control")
    if run.get("schema") != SCHEMA:
        raise BaselineError(
            f"{path}: {where} has schema {run.get('schema')!r}, this pytest-tesserabench reads schema "
            f"{SCHEMA}; use the matching pytest-tesserabench version or re-record the baseline"
        )
    if not isinstance(run.get("benchmarks"), dict):
        raise BaselineError(f"{path}: {where} has no 'benchmarks' object; restore the file from version control")


def _check_baseline(path: Path, data: Any, machine_key: str | None) -> dict:
    if not isinstance(data, dict) or "runs" not in data:
        raise BaselineError(
            f"{path}: not a TesseraBench baseline (expected an object with 'schema', 'machine_key' "
            "and 'runs'); move it away or restore it from version control"
        )
    if data.get("schema") != SCHEMA:
        raise BaselineError(
            f"{path}: schema {data.get('schema')!r}, this pytest-tesserabench reads schema {SCHEMA}; "
            "use the matching pytest-tesserabench version or re-record the baseline"
        )
    if machine_key is not None and data.get("machine_key") != machine_key:
        raise BaselineError(
            f"{path}: holds a baseline for machine {data.get('machine_key')!r}, not {machine_key!r}; "
            f"the file is misplaced: move it to {path.with_name(str(data.get('machine_key')) + '.json')}"
        )
    runs = data["runs"]
    if not isinstance(runs, list):
        raise BaselineError(f"{path}: 'runs' is not a list; restore the file from version control")
    for i, run in enumerate(runs):
        _check_run(path, run, f"run {i}")
    return data


def load_baseline(path: Path, *, machine_key: str | None) -> dict | None:
    """The validated baseline at ``path``; None if there is none. BaselineError if unusable."""
    path = Path(path)
    if not path.exists():
        return None
    return _check_baseline(path, _read_json(path), machine_key)


def strip_samples(run: dict) -> dict:
    """A deep copy of ``run`` without raw samples (baselines keep round medians only)."""
    run = copy.deepcopy(run)
    for record in (run.get("benchmarks") or {}).values():
        if isinstance(record, dict):
            record.pop("samples_ms", None)
    return run


def save_run(root: Path, name: str, machine_key: str, run: dict, *, history: int = DEFAULT_HISTORY) -> Path:
    """Append ``run`` to baseline NAME for this machine, keeping the last ``history`` runs."""
    path = baseline_path(root, name, machine_key)
    if not isinstance(history, int) or history < 1:
        raise BaselineError(f"bench_history={history!r} is invalid: it must be a whole number >= 1 (default 10)")
    _check_run(path, run, "the run to save")
    entry = strip_samples(run)
    try:
        json.dumps(entry, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise BaselineError(f"{path}: the run to save is not plain JSON ({exc}); nothing was written") from exc
    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(_lock_path(path)), timeout=LOCK_TIMEOUT_S):
        existing = load_baseline(path, machine_key=machine_key)  # raises on a bad file: never overwritten
        runs = list(existing["runs"]) if existing else []
        runs.append(entry)
        atomic_write_json(path, {"schema": SCHEMA, "name": name, "machine_key": machine_key, "runs": runs[-history:]})
    return path


def git_commit_info(cwd: Path) -> dict:
    """{"sha", "branch", "dirty"} of the git checkout at ``cwd``; None values without git."""

    def git(*args: str) -> str | None:
        try:
            result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return result.stdout.strip() if result.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    if sha is None:
        return {"sha": None, "branch": None, "dirty": None}
    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "sha": sha,
        "branch": None if branch in (None, "HEAD") else branch,
        "dirty": None if status is None else bool(status),
    }


def load_run_or_baseline(path: Path) -> list[dict]:
    """The runs in a ``--bench-json`` result file (one) or a baseline file (its history)."""
    path = Path(path)
    if not path.is_file():
        raise BaselineError(f"{path}: no such file; give a --bench-json result or a baselines/NAME/KEY.json file")
    data = _read_json(path)
    if isinstance(data, dict) and "runs" in data:
        return list(_check_baseline(path, data, None)["runs"])
    if isinstance(data, dict) and "benchmarks" in data:
        _check_run(path, data, "the run")
        return [data]
    raise BaselineError(
        f"{path}: neither a TesseraBench result (--bench-json) nor a baseline file "
        "(expected 'benchmarks' or 'runs' at the top level)"
    )
