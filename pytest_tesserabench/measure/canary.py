"""The canary: a fixed CPU workload timed at the start and end of every ``--bench`` run.

Its time depends on the machine (clocks, load from other jobs, thermal state) and on nothing in
the project, so the ratio of this run's canary to the baseline's shows machine-wide drift and can
normalise the comparison. The work is fixed (no calibration: a calibrated loop would hide exactly
the slowdown the canary exists to see) and single-threaded (sorting), so a BLAS thread pool or a
core count does not change what it measures.
"""

from __future__ import annotations

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
