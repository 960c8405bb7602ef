"""A third set of the gate's real-machine study, never used to choose or tune a rule: threads
without torch.

The held-out set (`benchmarks/gate_heldout.py`) has one multi-threaded benchmark, a torch conv2d,
whose process has torch's thread pool for the pool canary. A numpy or standard-library project
waits on other threads: BLAS's, scipy's FFT workers, Python threads that release the GIL. This
set, fixed in its own commit before it was first measured, is of that kind:

* four multi-threaded workloads, each keeping the machine's two CPUs busy: a numpy matmul on
  BLAS's threads, scipy's FFT with `workers=2`, a LAPACK solve, and SHA-256 in two Python threads
  of a `ThreadPoolExecutor`;
* four single-threaded ones: `sorted`, `np.sum`, pickle, bz2;
* about 0.3 ms to 10 ms a call on the CI VM; no torch is imported;
* two workloads slowed by a real change of the code, the number of times their work is done
  (20 -> 21, 22, 24: exactly +5%, +10%, +20% of the work): `t_mm_2t` (BLAS's threads) and
  `t_hash_2t` (Python threads, each doing 20 -> 21, 22, 24 updates).

    python benchmarks/gate_real.py --set threads      # the study on this set
"""

SLOWED = ("t_mm_2t", "t_hash_2t")
NAMES = ("t_mm_2t", "t_fft_w2", "t_hash_2t", "t_solve_2t", "t_sorted", "t_npsum", "t_pickle", "t_bz2")
# One module for every version: SCALE holds the slowed workloads' factor.
MODULE = r"""import bz2
import hashlib
import pickle
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import scipy.fft
import scipy.linalg

SCALE = {scale!r}

_RNG = np.random.default_rng(11)
_MA, _MB = _RNG.random((256, 256)), _RNG.random((256, 256))
_WAVES = _RNG.standard_normal((128, 8192))
_SYSTEM = _RNG.random((600, 600)) + 600 * np.eye(600)
_RHS = _RNG.random((600, 8))
_CHUNKS = [bytes(_RNG.integers(0, 256, 1 << 18, dtype=np.uint8)) for _ in range(2)]
_POOL = ThreadPoolExecutor(2)
_FLOATS = _RNG.random(20_000).tolist()
_BIG = _RNG.random(2_000_000)
_RECORDS = {{f"k{{i}}": {{"id": i, "tags": [str(i % 7), "x"], "score": i * 0.5}} for i in range(300)}}
_TEXT = b" ".join(b"word%d" % (i * 7919 % 5003) for i in range(6_000))


def _times(name, base):
    return max(1, int(base * SCALE.get(name, 1.0)))


def _hash(chunk, times):
    digest = hashlib.sha256()
    for _ in range(times):
        digest.update(chunk)  # releases the GIL: the two threads run at once
    return len(digest.digest())


def run(name):
    if name == "t_mm_2t":  # numpy, BLAS on two threads, ~9 ms
        return float(sum(float((_MA @ _MB)[0, 0]) for _ in range(_times(name, 20))))
    if name == "t_fft_w2":  # scipy's FFT on two workers, ~3 ms
        return float(scipy.fft.rfft(_WAVES, axis=-1, workers=2)[0, 1].real)
    if name == "t_hash_2t":  # two Python threads, ~4 ms
        times = _times(name, 20)
        return sum(_POOL.map(_hash, _CHUNKS, (times, times)))
    if name == "t_solve_2t":  # LAPACK on two threads, ~7 ms
        return float(scipy.linalg.solve(_SYSTEM, _RHS)[0, 0])
    if name == "t_sorted":  # pure Python objects, one thread
        return sorted(_FLOATS)[100]
    if name == "t_npsum":  # numpy, one thread, memory
        return float(np.sum(_BIG))
    if name == "t_pickle":  # C, one thread, ~0.3 ms
        return len(pickle.loads(pickle.dumps(_RECORDS)))
    if name == "t_bz2":  # C, one thread
        return len(bz2.compress(_TEXT, 9))
    raise ValueError(name)
"""
