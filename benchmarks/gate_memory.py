"""A fourth set of the gate's real-machine study, never used to choose or tune a rule: memory and
allocation.

The gate's memory-speed correction (docs/gate.md, "The machine's memory speed") was shaped on one
benchmark of the threads set, a 16 MB `np.sum`. This set, fixed in its own commit before it was
first measured, asks whether that correction and the rest of the gate hold for work whose speed is
the memory's and the allocator's, of every size:

* streaming through memory (a 32 MB copy, a 32 MB cumulative sum), random reads from a 64 MB table
  (numpy's gather, a sparse matrix-vector product), allocation and garbage (40k small dicts), and
  the standard library's C code (sqlite3 in memory, `collections.Counter`, `heapq`);
* about 0.1 ms to 20 ms a call on the CI VM; one thread each; no torch is imported;
* two workloads slowed by a real change of the code, the number of times their work is done
  (20 -> 21, 22, 24: exactly +5%, +10%, +20% of the work): `m_gather` (numpy, memory latency) and
  `m_sqlite` (the standard library's sqlite3).

    python benchmarks/gate_real.py --set memory      # the study on this set
"""

SLOWED = ("m_gather", "m_sqlite")
NAMES = ("m_copy", "m_gather", "m_spmv", "m_sqlite", "m_objects", "m_counter", "m_heap", "m_cumsum")
# One module for every version: SCALE holds the slowed workloads' factor.
MODULE = r"""import collections
import heapq
import sqlite3

import numpy as np
import scipy.sparse

SCALE = {scale!r}

_RNG = np.random.default_rng(23)
_BIG = _RNG.random(4_000_000)  # 32 MB
_DST = np.empty_like(_BIG)
_TABLE = _RNG.random(8_000_000)  # 64 MB
_INDEX = _RNG.integers(0, _TABLE.size, 200_000)
_ROWS, _COLS = _RNG.integers(0, 200_000, 800_000), _RNG.integers(0, 200_000, 800_000)
_SPARSE = scipy.sparse.csr_matrix((_RNG.random(800_000), (_ROWS, _COLS)), shape=(200_000, 200_000))
_VECTOR = _RNG.random(200_000)
_DB = sqlite3.connect(":memory:")
_DB.execute("create table t (k integer, v real)")
_DB.executemany("insert into t values (?, ?)", ((i % 101, float(x)) for i, x in enumerate(_RNG.random(2_500))))
_WORDS = [f"w{{i}}" for i in (_RNG.zipf(1.3, 100_000) % 5000).tolist()]
_HEAP = _RNG.random(5_000).tolist()


def _times(name, base):
    return max(1, int(base * SCALE.get(name, 1.0)))


def run(name):
    if name == "m_copy":  # streaming, 32 MB, ~2 ms
        np.copyto(_DST, _BIG)
        return float(_DST[0])
    if name == "m_gather":  # random reads from 64 MB, ~20 ms
        return float(sum(float(_TABLE.take(_INDEX).sum()) for _ in range(_times(name, 20))))
    if name == "m_spmv":  # sparse matrix-vector product, random reads, ~2 ms
        return float((_SPARSE @ _VECTOR)[0])
    if name == "m_sqlite":  # the standard library's sqlite3 in memory, ~10 ms
        query = "select k, sum(v), count(*) from t group by k"
        return sum(len(_DB.execute(query).fetchall()) for _ in range(_times(name, 20)))
    if name == "m_objects":  # allocation and garbage, ~7 ms
        return len([{{"i": i, "pair": (i, i + 1)}} for i in range(20_000)])
    if name == "m_counter":  # a dict of strings, ~4 ms
        return len(collections.Counter(_WORDS))
    if name == "m_heap":  # ~0.1 ms
        return heapq.nsmallest(10, _HEAP)[0]
    if name == "m_cumsum":  # streaming, 32 MB read and written, ~12 ms
        return float(np.cumsum(_BIG)[-1])
    raise ValueError(name)
"""
