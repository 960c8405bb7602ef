"""One GPU per pytest-xdist worker, and the measurement lock that goes with it.

With several GPUs visible, the controller gives worker ``gwN`` GPU ``N mod count``: it adds
``CUDA_VISIBLE_DEVICES`` to the worker's execnet spec (``pytest_xdist_setupnodes``), so execnet
sets it in the new process before pytest, a conftest or a test can start CUDA there (CUDA reads
it once, when it starts). The worker learns its GPU through ``workerinput`` and measures under
that GPU's own lock, so four GPUs measure four benchmarks at once, and two workers that share a
GPU (more workers than GPUs) still take turns. With one GPU or none nothing changes: every worker
sees every device and one lock serialises the machine, as before. Only local (popen) workers are
given GPUs; a worker the user already gave ``CUDA_VISIBLE_DEVICES`` (``--tx popen//env:...``)
keeps it.

GPUs are counted without starting CUDA: the entries of ``CUDA_VISIBLE_DEVICES`` when it is set,
else the NVIDIA driver's ``/proc/driver/nvidia/gpus`` folder (one entry per GPU).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

PROC_GPUS = Path("/proc/driver/nvidia/gpus")
MACHINE_LOCK = "tesserabench-measure.lock"
VISIBLE = "CUDA_VISIBLE_DEVICES"
_UNSAFE = re.compile(r"[^A-Za-z0-9.-]+")


def visible_gpus(env: Mapping[str, str], proc_dir: Path = PROC_GPUS) -> list[str]:
    """The GPUs this process may use, as CUDA_VISIBLE_DEVICES entries (indices, UUIDs or MIG ids)."""
    listed = env.get(VISIBLE)
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


def assign(specs: Iterable, env: Mapping[str, str], mode: str = "auto", proc_dir: Path = PROC_GPUS) -> dict[str, str]:
    """Give each local worker spec its own GPU (round robin); {worker id: GPU} of those given one."""
    if mode == "off":
        return {}
    gpus = visible_gpus(env, proc_dir)
    if len(gpus) < 2:
        return {}
    local = [spec for spec in specs if spec.popen and VISIBLE not in spec.env]
    given = {}
    for i, spec in enumerate(local):
        spec.env[VISIBLE] = given[spec.id] = gpus[i % len(gpus)]
    return given


def lock_name(gpu: str | None) -> str:
    """The measurement lock file: one per GPU for workers given one, one per machine otherwise."""
    if gpu is None:
        return MACHINE_LOCK
    return f"tesserabench-measure-gpu-{_UNSAFE.sub('-', gpu).strip('-') or 'unknown'}.lock"
