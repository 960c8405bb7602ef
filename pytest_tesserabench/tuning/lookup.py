"""How a kernel's launcher asks the tuning cache for its config, at next to no cost per call.

    config = tuned_config(TUNABLE, {"M": M, "N": N, "K": K}, ("bf16",), device)
    if config is None: ... the kernel's own defaults (its @triton.autotune list) ...

The cache file (``$TESSERABENCH_TUNING_CACHE``, else ``./tuning_cache.json``) is found and read
once per process (``reload()`` does both again); answers are memoised per (kernel, sizes, dtypes,
architecture), so a launch pays a few dictionary lookups. Only measured entries
are served: a static estimate never picks the config that runs. A device that is not a CUDA GPU
(the CPU interpreter) has no architecture and gets None.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_tesserabench.inspect.archs import arch_from_capability

from .cache import (
    DEFAULT_CACHE_NAME,
    ENV_CACHE,
    TuningCache,
    TuningCacheWarning,
    entry_key,
    kernel_source_hash,
    triton_version,
)
from .space import Config
from .tunable import Problem, Tunable

_entries_by_path: dict[Path, dict[str, dict]] = {}


def reload() -> None:
    """Forget what was read: the next lookup reads the cache file again."""
    _entries_by_path.clear()
    _default_path.cache_clear()
    _cached_lookup.cache_clear()
    _source_hash.cache_clear()


def _entries(path: Path) -> dict[str, dict]:
    entries = _entries_by_path.get(path)
    if entries is None:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", TuningCacheWarning)
            entries = TuningCache(path).load()
        for warning in caught:  # once per process, not once per launch
            warnings.warn(str(warning.message), TuningCacheWarning, stacklevel=4)
        _entries_by_path[path] = entries
    return entries


@functools.cache
def _source_hash(tunable: Tunable) -> str:
    return kernel_source_hash(tunable.kernel())


@functools.cache
def _device_arch(device_type: str, index: int | None) -> str | None:
    if device_type != "cuda":
        return None
    import torch  # ~1.2 s, the optional GPU stack: only for a CUDA device, where it is loaded already

    return arch_from_capability(*torch.cuda.get_device_capability(index))


def device_arch(device: Any) -> str | None:
    """``sm_90`` for a CUDA device of compute capability 9.0; None for the CPU."""
    return _device_arch(getattr(device, "type", str(device)), getattr(device, "index", None))


def tuned_config(
    tunable: Tunable, shape: Mapping[str, int], dtypes: tuple[str, ...], device: Any, path: Path | None = None
) -> Config | None:
    """The measured config cached for this problem on this device's architecture, or None."""
    arch = device_arch(device)
    if arch is None:
        return None
    where = str(path) if path is not None else _default_path()
    return _cached_lookup(tunable, tuple(shape.items()), tuple(dtypes), arch, where)


@functools.cache
def _default_path() -> str:
    """Resolved once per process (``reload()`` forgets it): reading os.environ and building a
    Path on every launch would cost more than the lookup itself."""
    return os.environ.get(ENV_CACHE) or DEFAULT_CACHE_NAME


@functools.lru_cache(maxsize=4096)
def _cached_lookup(tunable: Tunable, shape: tuple, dtypes: tuple, arch: str, path: str) -> Config | None:
    entries = _entries(Path(path))
    if not entries:
        return None
    bucket = tunable.bucket(Problem(shape=dict(shape), dtypes=dtypes))
    key = entry_key(tunable.name, _source_hash(tunable), bucket, dtypes, arch, triton_version())
    entry = entries.get(key)
    if entry is None or entry.get("method") != "measured":
        return None
    return Config(entry["config"])


__all__ = ["device_arch", "reload", "tuned_config"]
