"""Size sets and baselines for the benchmark suite.

Two size sets. With a GPU (no TRITON_INTERPRET) the suite measures the grids below. Without
one, kernels run in the Triton interpreter (about a thousand times slower than the device it
emulates), so a small set shows every kernel and baseline working and recorded in a few minutes;
those figures are never gated. The choice reads the environment the root conftest.py sets; it
queries no device.

How the GPU grids were chosen (a full cartesian product would take hours):

* matmul: square sizes 1024-8192 in powers of two show where each precision reaches peak; the
  0.9x-of-torch.matmul targets sit at 4096^3 and 8192^3, where both sides are compute bound.
  The LLM projection shapes (Llama-3 8B/70B QKV, MLP up/down) are the rectangular cases that
  matter in practice and are run in bf16 and fp8, the precisions models ship in.
* attention: cost grows with B*H*S^2*D. The main sweep keeps B*S = 16k tokens so every
  point does comparable work while S goes 512 -> 8192 (B = 32 -> 2); heads are 16 at head dim
  128 and 32 at head dim 64 (model width 2048 either way). Two corner points vary the other
  axes alone (B=1, H=8: a single small request; B=32, H=32 at S=1024: a wide batch). Every
  point runs causal and not. Long-context cases (16k, 32k, 64k; batch 1, 8 heads, head dim 128)
  run in bf16 only. The 1.0x-of-SDPA target is checked at bf16, head dim 128, S >= 4096.
* softmax and norms: memory bound, so the row count only needs to fill the GPU (>= 1024 rows);
  the row lengths are LLM hidden sizes (4096-16384) and vocabularies (32000, 128256 — the latter
  exceeds the register-resident limit and exercises the looped kernel).
"""

from __future__ import annotations

import functools
import os

from kernels._common import is_interpreting
from pytest_tesserabench.distributed import collectives

# The GPU's size set where kernels run on one, the interpreter's elsewhere.
# TESSERABENCH_SUITE_SIZES=device collects the GPU's ids without one, to gate the static figures of a
# baseline recorded on a GPU (docs/gpu-validation.md); =interpreter gives a GPU the quick set.
SUITE_SIZES = os.environ.get("TESSERABENCH_SUITE_SIZES")
if SUITE_SIZES not in (None, "device", "interpreter"):
    raise ValueError(f"TESSERABENCH_SUITE_SIZES={SUITE_SIZES!r}: choose device or interpreter, or leave it unset")
ON_DEVICE = SUITE_SIZES == "device" if SUITE_SIZES else not is_interpreting()

# --------------------------------------------------------------------------- matmul
MATMUL_SQUARE = [1024, 2048, 4096, 8192] if ON_DEVICE else [64]
MATMUL_LLM = (
    [
        {"M": m, "N": n, "K": k}
        for m, n, k in [
            (4096, 6144, 4096),
            (4096, 28672, 4096),
            (4096, 4096, 14336),
            (8192, 10240, 8192),
            (8192, 8192, 28672),
        ]
    ]
    if ON_DEVICE
    else [{"M": 48, "N": 96, "K": 80}]
)
MATMUL_TARGET_SIZES = (4096, 8192)

# --------------------------------------------------------------------------- attention
if ON_DEVICE:
    ATTENTION_GRID = [
        {"B": 16384 // s, "H": 16 if d == 128 else 32, "S": s, "D": d}
        for d in (64, 128)
        for s in (512, 1024, 2048, 4096, 8192)
    ] + [
        {"B": 1, "H": 8, "S": 4096, "D": 128},
        {"B": 32, "H": 32, "S": 1024, "D": 128},
    ]
    ATTENTION_LONG = [{"B": 1, "H": 8, "S": s, "D": 128} for s in (16384, 32768, 65536)]
else:
    ATTENTION_GRID = [{"B": 1, "H": 2, "S": 48, "D": 64}, {"B": 2, "H": 3, "S": 40, "D": 128}]
    ATTENTION_LONG = [{"B": 1, "H": 1, "S": 160, "D": 64}]
ATTENTION_TARGET_MIN_S = 4096
# Above this the reference is computed on a sample of query rows: S x S scores would not fit.
ATTENTION_FULL_REFERENCE_MAX_S = 2048

# --------------------------------------------------------------------------- row kernels
ROWS_SOFTMAX = (
    [{"R": r, "C": c} for r, c in [(4096, 4096), (4096, 8192), (8192, 16384), (2048, 32000), (1024, 128256)]]
    if ON_DEVICE
    else [{"R": 16, "C": 512}, {"R": 3, "C": 1500}]
)
ROWS_NORM = (
    [{"R": r, "C": c} for r, c in [(4096, 4096), (4096, 5120), (4096, 8192), (4096, 16384)]]
    if ON_DEVICE
    else [{"R": 16, "C": 768}]
)

# --------------------------------------------------------------------------- collectives
# nccl-tests' range on GPUs (1 KiB to 1 GiB, x4 steps). On CPUs (gloo over loopback) two sizes,
# one latency-bound and one nearer the bandwidth regime, keep the suite to seconds at 4 ranks.
# TESSERABENCH_COLLECTIVE_SIZES=1024,65536,... overrides (benchmarks/gloo_alpha_beta.py uses it).
if os.environ.get("TESSERABENCH_COLLECTIVE_SIZES"):
    COLLECTIVE_SIZES = [int(s) for s in os.environ["TESSERABENCH_COLLECTIVE_SIZES"].split(",")]
elif ON_DEVICE:
    COLLECTIVE_SIZES = collectives.sizes(collectives.KiB, collectives.GiB, 4)
else:
    COLLECTIVE_SIZES = [collectives.KiB, 64 * collectives.KiB]
COLLECTIVE_PRECISIONS = ("fp32", "bf16")
MESH_SIZES = [collectives.MiB, 64 * collectives.MiB] if ON_DEVICE else [64 * collectives.KiB]
# Row-parallel linear (x @ w with K split over the ranks, then an all-reduce): the global problem
# is fixed, so its times over world sizes give strong scaling (tesserabench scaling).
TP_LINEAR = [{"M": 8192, "K": 8192, "N": 8192}] if ON_DEVICE else [{"M": 128, "K": 1024, "N": 128}]

# --------------------------------------------------------------------------- helpers


def on_hopper() -> bool:
    """The performance targets are stated for an H100 (sm_90); other GPUs only record."""
    import torch

    return torch.cuda.is_available() and torch.cuda.get_device_capability()[0] == 9


def device() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


@functools.cache
def compiled(fn):
    """torch.compile of a reference-style function: GPU only (never on CPU/CI), None elsewhere.

    TESSERABENCH_SUITE_NO_COMPILE=1 leaves it out on a GPU too: its first compile costs tens of
    seconds per shape, more than a short device run can spare.
    """
    import torch

    if not torch.cuda.is_available() or os.environ.get("TESSERABENCH_SUITE_NO_COMPILE") == "1":
        return None
    return torch.compile(fn)


def copy_into(dst, src):
    """A device-to-device copy: the bandwidth a memory-bound kernel should approach."""
    return dst.copy_(src)


def sample_rows(S: int, count: int = 256) -> list[int]:
    """Query rows to check when S is too long for a full reference: both ends and a spread."""
    step = max(1, S // count)
    rows = set(range(0, S, step)) | set(range(max(0, S - 64), S)) | set(range(min(64, S)))
    return sorted(rows)
