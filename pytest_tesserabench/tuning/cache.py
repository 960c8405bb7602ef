"""The persistent tuning cache: one readable JSON file a project commits.

```json
{"schema": 1,
 "entries": {"matmul bf16 K=4096,M=4096,N=4096 sm_90 triton-3.6.0 src-1a2b3c4d5e6f": {
    "kernel": "matmul", "source_hash": "1a2b3c4d5e6f", "bucket": {"M": 4096, ...},
    "shape": {"M": 4096, ...}, "dtypes": ["bf16"], "arch": "sm_90", "triton": "3.6.0",
    "config": {"BLOCK_SIZE_M": 128, ..., "num_warps": 8, "num_stages": 3},
    "median_ms": 0.21, "method": "measured", "strategy": "bayesian", ...}}}
```

Keyed on (kernel, kernel source hash, shape bucket, dtypes, arch, Triton version). Sorted keys and
two-space indent (``files.write_json``, the project's one atomic writer), so a review diff shows
exactly which entries changed.

* A changed kernel source gives another hash: old entries are never served, and recording a new
  entry for the kernel drops its entries with another hash (the report says how many).
* A file that does not parse, or is not a tuning cache, is ignored with a ``TuningCacheWarning``;
  the next write keeps a copy at ``<file>.corrupt`` and rewrites the file atomically.
* Writers take a file lock (``.<file>.lock`` beside it) and re-read the file under it, so two
  processes tuning into one cache at once lose no entries.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import shutil
import textwrap
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_tesserabench.record import files

SCHEMA = 1
DEFAULT_CACHE_NAME = "tuning_cache.json"
ENV_CACHE = "TESSERABENCH_TUNING_CACHE"
LOCK_TIMEOUT_S = 60.0
_ENTRY_FIELDS = ("kernel", "source_hash", "bucket", "dtypes", "arch", "triton", "config")


class TuningCacheWarning(UserWarning):
    """The cache file was unusable and is ignored (it is rewritten on the next write)."""


def default_cache_path() -> Path:
    """``$TESSERABENCH_TUNING_CACHE``, else ``tuning_cache.json`` in the working directory."""

    return Path(os.environ.get(ENV_CACHE) or DEFAULT_CACHE_NAME)


def triton_version() -> str:
    import triton  # ~0.2 s, optional: `tesserabench tune --show` and the lookup at launch need none

    return str(triton.__version__)


def kernel_source_hash(kernel: Any) -> str:
    """12 hex digits of sha256 over the kernel's source and that of every ``@triton.jit``
    function it calls, directly or not. Only the code counts: moving the kernel down a file, or
    editing a comment outside it, keeps the hash (Triton's own key includes the line number).
    The same under the interpreter and on a GPU."""
    sources: dict[str, str] = {}
    _collect_sources(_python_function(kernel), sources)
    digest = hashlib.sha256()
    # Qualified names without the module: a module imported by path or by package name (its
    # __name__ differs) holds the same kernel.
    for name, source in sorted((name.partition(":")[2], source) for name, source in sources.items()):
        digest.update(f"{name}\n{source}\n".encode())
    return digest.hexdigest()[:12]


def _python_function(obj: Any):
    """The plain Python function behind a JITFunction, InterpretedFunction, Autotuner, ..."""
    seen = 0
    while not inspect.isfunction(obj):
        inner = getattr(obj, "fn", None)
        if inner is None or seen > 8:
            raise TypeError(f"{obj!r} is not a Triton kernel or Python function")
        obj, seen = inner, seen + 1
    return obj


def _collect_sources(fn, sources: dict[str, str]) -> None:
    name = f"{fn.__module__}:{fn.__qualname__}"
    if name in sources:
        return
    try:
        sources[name] = textwrap.dedent(inspect.getsource(fn))
    except (OSError, TypeError):  # no source file (exec'd code): the bytecode stands in
        sources[name] = fn.__code__.co_code.hex()
    for global_name in fn.__code__.co_names:
        value = fn.__globals__.get(global_name)
        if _is_jit(value):
            try:
                _collect_sources(_python_function(value), sources)
            except TypeError:  # a wrapper without a Python function behind it
                continue


def _is_jit(value: Any) -> bool:
    """A @triton.jit function (JIT or interpreted) or a constexpr function: its code matters."""
    kind = type(value).__name__
    return kind in ("JITFunction", "InterpretedFunction", "ConstexprFunction", "Autotuner", "Heuristics")


def entry_key(kernel: str, source_hash: str, bucket: Mapping[str, int], dtypes, arch: str, triton: str) -> str:
    """The readable key of an entry, e.g. ``matmul bf16 K=4096,M=4096,N=4096 sm_90 triton-3.6.0 src-...``."""
    sizes = ",".join(f"{name}={bucket[name]}" for name in sorted(bucket))
    return f"{kernel} {'/'.join(dtypes)} {sizes} {arch} triton-{triton} src-{source_hash}"


def key_of(entry: Mapping[str, Any]) -> str:
    return entry_key(
        entry["kernel"], entry["source_hash"], entry["bucket"], entry["dtypes"], entry["arch"], entry["triton"]
    )


class TuningCache:
    """The cache file at ``path`` (created on the first write)."""

    def __init__(self, path: Path | str | None = None) -> None:
        self.path = Path(path) if path is not None else default_cache_path()

    def load(self) -> dict[str, dict]:
        """Every valid entry by key; an unusable file warns once and reads as empty."""
        entries, problem = self._read()
        if problem:
            warnings.warn(
                f"{problem}; ignoring it (it is rewritten on the next tune)", TuningCacheWarning, stacklevel=2
            )
        return entries

    def _read(self) -> tuple[dict[str, dict], str | None]:
        if not self.path.exists() and not self.path.is_symlink():
            return {}, None
        try:
            data = files.read_json(self.path, "tuning cache")
        except files.FileProblem as error:
            return {}, str(error)
        if not isinstance(data, dict) or data.get("schema") != SCHEMA or not isinstance(data.get("entries"), dict):
            return {}, (
                f'{self.path}: not a tuning cache of schema {SCHEMA} (expected {{"schema": 1, "entries": {{...}}}})'
            )
        entries, bad = {}, 0
        for key, entry in data["entries"].items():
            if isinstance(entry, dict) and all(field in entry for field in _ENTRY_FIELDS):
                entries[key] = entry
            else:
                bad += 1
        return entries, (f"{self.path}: {bad} malformed entr{'y' if bad == 1 else 'ies'}" if bad else None)

    def find(self, kernel: str, source_hash: str, bucket, dtypes, arch: str, triton: str) -> dict | None:
        return self.load().get(entry_key(kernel, source_hash, bucket, dtypes, arch, triton))

    def record(self, entry: Mapping[str, Any]) -> int:
        """Add or replace ``entry`` (and drop the kernel's entries for other source hashes);
        returns how many stale entries were dropped. Safe against concurrent writers."""
        missing = [field for field in _ENTRY_FIELDS if field not in entry]
        if missing:
            raise ValueError(f"a tuning cache entry needs {', '.join(missing)}")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with files.lock_for(self.path, timeout=LOCK_TIMEOUT_S):
            files.remove_stale_temporaries(self.path)
            entries, problem = self._read()
            if problem and self.path.exists():
                backup = self.path.with_name(self.path.name + ".corrupt")
                shutil.copyfile(self.path, backup)
                warnings.warn(
                    f"{problem}; a copy is kept at {backup} and the file is rewritten",
                    TuningCacheWarning,
                    stacklevel=2,
                )
            stale = [
                key
                for key, old in entries.items()
                if old["kernel"] == entry["kernel"] and old["source_hash"] != entry["source_hash"]
            ]
            for key in stale:
                del entries[key]
            entries[key_of(entry)] = dict(entry)
            files.write_json(self.path, {"schema": SCHEMA, "entries": entries})
        return len(stale)


__all__ = [
    "DEFAULT_CACHE_NAME",
    "ENV_CACHE",
    "SCHEMA",
    "TuningCache",
    "TuningCacheWarning",
    "default_cache_path",
    "entry_key",
    "kernel_source_hash",
    "key_of",
    "triton_version",
]
