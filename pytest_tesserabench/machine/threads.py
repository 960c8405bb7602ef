"""Library thread pools for the benchmarks (``--bench-threads=N``).

Why: torch, OpenMP and BLAS size their pools to the machine. On a small machine shared with other
work, a benchmark's own threads then wait for each other and for the other processes: a 160² CPU
matmul read 4 ms with torch's default two threads beside two busy processes on two vCPUs, 53 µs
with one. A session-wide setting measures the session's process, its fresh processes and A/B's
served processes alike: the pools read environment variables when they load, which every child
inherits; torch's pool is set directly before each measurement as well (torch may have loaded
before the plugin configured, and caps what it reads to the cores), so the option wins over a
test's own ``torch.set_num_threads``.

Pools that a library sized when it was loaded before pytest configured (numpy imported by a
conftest, say) keep their size: the variables are read at load.
"""

from __future__ import annotations

import os
import sys

# The variables the common pools read at load: OpenMP (torch, MKL), OpenBLAS, MKL, Apple's
# Accelerate, numexpr.
POOLS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS", "NUMEXPR_NUM_THREADS")


def apply_environment(threads: int) -> None:
    """Every pool variable set to ``threads`` for this process's later loads and its children."""
    for pool in POOLS:
        os.environ[pool] = str(threads)
    apply_torch(threads)


def apply_torch(threads: int | None) -> None:
    """torch's intra-op pool set to ``threads`` where torch is loaded already (it reads
    OMP_NUM_THREADS when it loads later)."""
    torch = sys.modules.get("torch")
    if threads is None or torch is None or not hasattr(torch, "set_num_threads"):
        return
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)


def torch_threads() -> int | None:
    """torch's intra-op pool size, where torch is loaded."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None and hasattr(torch, "get_num_threads") else None


def cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def oversubscribed_hint(others_cpus: float, pool: int | None, cpus_here: int) -> str | None:
    """The clause the summary's "the CPU was shared" line adds when torch's pool outnumbers the
    CPUs other processes left (``others_cpus`` busy of ``cpus_here``), or None."""
    if pool is None or pool <= 1:
        return None
    left = max(cpus_here - others_cpus, 0.0)
    if pool <= left + 0.5:
        return None
    return (
        f"torch's pool has {pool} threads for the {left:.1f} of {cpus_here} CPUs other processes left: a "
        "multi-threaded benchmark's threads waited for each other; --bench-threads=1 measures it on one"
    )
