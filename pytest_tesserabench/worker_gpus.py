"""One GPU per pytest-xdist worker, and the measurement lock that goes with it.

With several GPUs visible, worker ``gwN`` is given GPU ``N mod count``: ``CUDA_VISIBLE_DEVICES`` is
set in ``pytest_load_initial_conftests``, the first hook a worker runs, before any conftest or
test module can start CUDA (CUDA reads the variable once, when it starts). The worker then
measures under that GPU's own lock, so four GPUs measure four benchmarks at once, and two workers
that share a GPU (more workers than GPUs) still take turns. With one GPU or none nothing changes:
every worker sees every device and one lock serialises the machine, as before.

GPUs are counted without starting CUDA: the entries of ``CUDA_VISIBLE_DEVICES`` when it is set,
else the NVIDIA driver's ``/proc/driver/nvidia/gpus`` folder (one entry per GPU).
"""

from __future__ import annotations

import re
import sys
from collections.abc import MutableMapping
from pathlib import Path

PROC_GPUS = Path("/proc/driver/nvidia/gpus")
MACHINE_LOCK = "tesserabench-measure.lock"
_WORKER = re.compile(r"^gw(\d+)$")
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")


def visible_gpus(env: MutableMapping[str, str], proc_dir: Path = PROC_GPUS) -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (indices, UUIDs or MIG ids)."""
    listed = env.get("CUDA_VISIBLE_DEVICES")
    if listed is not None:
        gpus = []
        for entry in (e.strip() for e in listed.split(",")):
            if not entry or entry.startswith("-"):  # CUDA ignores everything from an invalid entry on
                break
            gpus.append(entry)
        return gpus
    try:
        return [str(i) for i in range(sum(1 for _ in proc_dir.iterdir()))]
    except OSError:
        return []


def worker_index(env: MutableMapping[str, str]) -> int | None:
    """N for pytest-xdist worker gwN; None outside a worker."""
    match = _WORKER.match(env.get("PYTEST_XDIST_WORKER", ""))
    return int(match.group(1)) if match else None


def cuda_started() -> bool:
    """Whether CUDA already started in this process (then CUDA_VISIBLE_DEVICES comes too late)."""
    torch = sys.modules.get("torch")
    try:
        return bool(torch is not None and torch.cuda.is_initialized())
    except Exception:  # a torch without CUDA support: nothing started
        return False


def pin_worker(env: MutableMapping[str, str], mode: str = "auto", proc_dir: Path = PROC_GPUS) -> str | None:
    """Give this xdist worker its own GPU; the GPU's entry, or None when nothing was pinned."""
    index = worker_index(env)
    if mode == "off" or index is None:
        return None
    gpus = visible_gpus(env, proc_dir)
    if len(gpus) < 2 or cuda_started():
        return None
    gpu = gpus[index % len(gpus)]
    env["CUDA_VISIBLE_DEVICES"] = gpu
    return gpu


def lock_name(gpu: str | None) -> str:
    """The measurement lock file: one per GPU for pinned workers, one per machine otherwise."""
    if gpu is None:
        return MACHINE_LOCK
    return f"tesserabench-measure-gpu-{_UNSAFE.sub('-', gpu).strip('-') or 'unknown'}.lock"
