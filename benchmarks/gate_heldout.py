"""The held-out workloads of the gate's real-machine study: never used to choose or tune a rule.

The gate was shaped on `benchmarks/gate_real.py`'s six pure-Python workloads. A rule is judged on
workloads it was not tuned to, so this set is of another kind, fixed in its own commit before the
gate was rebuilt, and only ever measured and reported (both sets' figures go into docs together):

* other libraries: the standard library's C code (json, re, zlib) and pure-Python objects
  (decimal), numpy (FFT, sort), torch on the CPU (matmul, conv2d);
* other durations: about 0.1 ms to 20 ms a call on the CI VM;
* other threading: torch pinned to one thread, and a conv2d on two threads (the machine's every
  core: it shares them with whatever else runs);
* two workloads slowed by a real change of the code, the number of times their work is done
  (20 -> 21, 22, 24: exactly +5%, +10%, +20% of the work): `h_regex` (one thread, the standard
  library) and `h_conv_2t` (two threads, torch).

    python benchmarks/gate_real.py --set heldout      # the study on this set

Needs torch and numpy in the study's interpreter (gate_real.py installs torch pinned by
constraints.txt).
"""

SLOWED = ("h_regex", "h_conv_2t")
NAMES = ("h_decimal", "h_fft", "h_json", "h_regex", "h_mm_1t", "h_zlib", "h_conv_2t", "h_npsort")
# One module for every version: SCALE holds the slowed workloads' factor.
MODULE = r"""import decimal
import json
import re
import zlib

import numpy as np
import torch

SCALE = {scale!r}
torch.set_num_threads(1)

_TEXT = " ".join(f"user{{i}}@host{{i % 97}}.example.org id={{i * 7919 % 100003}}" for i in range(500))
_RNG = np.random.default_rng(7)
_SIGNAL = _RNG.standard_normal(1 << 16)
_VALUES = _RNG.random(400_000)
_PATTERN = re.compile(r"(\w+)@(host\d+)\.example\.org id=(\d+)")
_BYTES = bytes(_RNG.integers(0, 64, 250_000, dtype=np.uint8))
_DOC = {{
    "items": [{{"id": i, "name": f"item-{{i}}", "tags": ["a", str(i % 13)], "price": i * 0.25}} for i in range(600)]
}}
_GEN = torch.Generator().manual_seed(3)
_A = torch.randn(768, 384, generator=_GEN)
_B = torch.randn(384, 384, generator=_GEN)
_X = torch.randn(4, 16, 32, 32, generator=_GEN)
_W = torch.randn(32, 16, 3, 3, generator=_GEN)


def _rows(name, total):
    return max(1, int(total * SCALE.get(name, 1.0)))


def run(name):
    if name == "h_decimal":  # stdlib, pure Python objects, ~0.1 ms
        decimal.getcontext().prec = 30
        acc = decimal.Decimal(0)
        for i in range(1, _rows(name, 330)):
            acc += decimal.Decimal(1) / decimal.Decimal(i)
        return acc
    if name == "h_json":  # stdlib C accelerator
        doc = {{"items": _DOC["items"][: _rows(name, 600)]}}
        return len(json.loads(json.dumps(doc)))
    if name == "h_regex":
        return sum(len(_PATTERN.findall(_TEXT)) for _ in range(_rows(name, 20)))
    if name == "h_zlib":  # C, one thread
        return len(zlib.compress(_BYTES[: _rows(name, len(_BYTES))], 6))
    if name == "h_fft":  # numpy
        return float(np.abs(np.fft.rfft(_SIGNAL)).sum())
    if name == "h_npsort":
        return float(np.sort(_VALUES[: _rows(name, len(_VALUES))])[1000])
    if name == "h_mm_1t":  # torch, one thread
        return float(torch.matmul(_A[: _rows(name, 768)], _B).sum())
    if name == "h_conv_2t":  # torch, two threads
        torch.set_num_threads(2)
        try:
            return sum(float(torch.nn.functional.conv2d(_X, _W, padding=1)[0, 0, 0, 0]) for _ in range(_rows(name, 20)))
        finally:
            torch.set_num_threads(1)
    raise ValueError(name)
"""
