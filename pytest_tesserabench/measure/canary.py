"""The canary: a fixed CPU workload timed at the start and end of every ``--bench`` run.

Its time depends on the machine (clocks, load from other jobs, thermal state) and on nothing in
the project, so the ratio of this run's canary to the baseline's shows machine-wide drift and can
normalise the comparison. The work is fixed (no calibration: a calibrated loop would hide exactly
the slowdown the canary exists to see) and single-threaded (sorting), so a BLAS thread pool or a
core count does not change what it measures.

The pool canary (``measure_pool_canary``) is the other kind: timed after each pass of a
multi-threaded benchmark, on torch's thread pool as the benchmark had it, it reads the machine's
slow moments for parallel work, which the single-threaded canary does not (gate/conditions.py).
In a process without torch, the BLAS canary (``measure_blas_canary``) reads them on numpy's
BLAS threads instead.

The memory canary (``measure_memory_canary``) is timed after each pass of every CPU benchmark:
a shared host's cache and memory serve a process at speeds that change from one second to the
next (a sum over 16 MB read 0.56, 0.61 or 0.70-0.77 ms on the CI VM, the same array, seconds
apart), which moves a benchmark that streams memory and leaves the sorting canary where it was.
It is a ratio, memory against cache, so that it reads the memory alone; the gate reads it as a
covariate (gate/memory.py).
"""

from __future__ import annotations

import statistics
import time

from pytest_tesserabench.measure.timing import CpuTimer

CANARY_SIZE = 250_000  # float64 values sorted per sample (2 MB; a few ms each)
CANARY_SAMPLES = 20
LOCAL_SAMPLES = 5  # before each benchmark of a compared run: the machine's speed at that moment
_SEED = 20261121


def measure_canary(samples: int = CANARY_SAMPLES) -> list[float]:
    """Milliseconds per sample of the fixed workload (about 50-100 ms in all); one warm-up."""
    import numpy as np  # a hard dependency, but ~120 ms: a pytest run without --bench never runs the canary

    data = np.random.default_rng(_SEED).random(CANARY_SIZE)
    np.sort(data, kind="quicksort")  # warm-up: page in the buffers, load the code
    # Timed as CPU benchmarks are (less the wait for a CPU), one call a sample: never calibrated.
    return CpuTimer(lambda: np.sort(data, kind="quicksort")).round(samples)


# A benchmark whose rounds kept this many CPUs busy runs on a thread pool (a single-threaded one
# reads 0.95-1.0, a two-thread torch one 1.9-2.0 on a quiet machine).
POOL_CPUS = 1.5
POOL_CALLS = 100  # timed calls of the pool canary (each a few microseconds to tens of them)
_POOL_ELEMENTS = 1 << 17  # float32: four of torch's parallel grains (32768), so every thread of the pool works


def measure_pool_canary(threads: int) -> float | None:
    """The median time (ms) of a fixed in-place add on torch's intra-op thread pool, run on
    ``threads`` threads (the CPUs the benchmark just measured kept busy: a test may size the pool
    inside its call and restore it after), or None where torch is not loaded or ``threads`` < 2.
    The pool's own size is put back. A multi-threaded benchmark waits at every barrier for its
    slowest thread, so it reads a shared machine's slow moments for parallel work (a vCPU held by
    the host, not counted as steal) that single-threaded work, the canary above included, does
    not see; the pool's own sync-bound call reads the same moments. Taken after a pass of a
    benchmark that kept ``POOL_CPUS`` or more busy, so the gate can tell such a moment from a
    slower code."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None or threads < 2:
        return None
    had = torch.get_num_threads()
    if had != threads:
        torch.set_num_threads(threads)
    try:
        data = torch.zeros(_POOL_ELEMENTS, dtype=torch.float32)
        data.add_(1.0)  # warm-up: the pages, the pool's threads awake
        times = []
        for _ in range(POOL_CALLS):
            start = time.perf_counter_ns()
            data.add_(1.0)
            times.append(time.perf_counter_ns() - start)
    finally:
        if had != threads:
            torch.set_num_threads(had)
    return statistics.median(times) / 1e6


BLAS_CALLS = 20  # timed calls of the BLAS canary (about 60 us each on two threads)
# float64, square: OpenBLAS runs 128 on all its threads and keeps 96 on one, and a matmul on one
# thread waits at no barrier, so it would read no slow moment for parallel work.
_BLAS_SIZE = 128


def measure_blas_canary() -> float | None:
    """The median time (ms) of a fixed matmul on numpy's BLAS threads, as the process has them
    (their number is fixed when BLAS loads): the pool canary of a process without torch, where a
    multi-threaded benchmark waits on BLAS's threads or its own. None where numpy is not loaded.
    BLAS on one thread times a call that reads no such moment, and so softens nothing."""
    import sys

    np = sys.modules.get("numpy")
    if np is None:
        return None
    rng = np.random.default_rng(_SEED)
    a, b = rng.random((_BLAS_SIZE, _BLAS_SIZE)), rng.random((_BLAS_SIZE, _BLAS_SIZE))
    a @ b  # warm-up: the threads awake
    times = []
    for _ in range(BLAS_CALLS):
        start = time.perf_counter_ns()
        a @ b
        times.append(time.perf_counter_ns() - start)
    return statistics.median(times) / 1e6


MEMORY_VALUES = 2_000_000  # float64 summed: 16 MB, past a core's own caches, served by the shared ones and memory
CACHED_VALUES = 16_384  # float64: 128 KB, within a core's own caches
MEMORY_CALLS = 10  # timed sums of each kind (about 0.6 ms each on the CI VM)
_memory = []  # the canary's array, made once per process (16 MB kept while the process lives)


def measure_memory_canary() -> float:
    """How much slower the machine sums 16 MB from memory than the same number of values from a
    core's own cache, right now (a ratio; the fastest of a few sums of each). A shared host's
    memory slows streaming work alone; a slow CPU (another tenant's, a lower clock) slows both
    sums alike and leaves the ratio where it was, so the ratio reads the memory and not the
    machine's speed as a whole, which the run's shared shift and the passes already handle."""
    import numpy as np

    if not _memory:
        _memory.append(np.ones(MEMORY_VALUES))
    data = _memory[0]
    # The same work in cache: one small array read again and again (a view, no copy).
    cached = np.broadcast_to(data[:CACHED_VALUES], (MEMORY_VALUES // CACHED_VALUES, CACHED_VALUES))
    np.sum(data), np.sum(cached)  # untimed: code loaded, the small array in cache
    # In turn, so that both kinds of sum meet the same moments of the CPU (a core waking from idle
    # or from another kind of work slows both for a while): timed one kind after the other, the
    # two kinds met different moments, and the ratio read them as the memory's.
    memory, cache = CpuTimer(lambda: np.sum(data)), CpuTimer(lambda: np.sum(cached))
    times = [(memory.round(1)[0], cache.round(1)[0]) for _ in range(MEMORY_CALLS)]
    from_memory, from_cache = min(t[0] for t in times), min(t[1] for t in times)
    return from_memory / from_cache if from_cache > 0 else 0.0  # (0: a clock that did not move, a fake's)
