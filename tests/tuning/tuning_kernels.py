"""Small Triton kernels and Tunables owned by the tuning tests (independent of kernels/).

``rowmax``: ``x - max(x)`` over one block per program. Every element stays live until the max
is known, so a large block on one warp must spill; a block that is not a power of two does not
compile; one warp per block caps residency at 32 warps (50% occupancy) on sm_80.
``ring_dot``: a pipelined ``tl.dot`` loop whose shared-memory ring grows with BK and num_stages.
"""

import dataclasses

import triton
import triton.language as tl

from pytest_tesserabench.tuning import Config, ConfigSpace, Problem, Tunable, Work


@triton.jit
def rowmax_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask, other=float("-inf"))
    tl.store(out_ptr + offsets, x - tl.max(x, 0), mask=mask)


@triton.jit
def ring_dot_kernel(a_ptr, b_ptr, c_ptr, K, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.arange(0, BM)
    rn = tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(a_ptr + rm[:, None] * K + (k + rk)[None, :])
        b = tl.load(b_ptr + (k + rk)[:, None] * BN + rn[None, :])
        acc = tl.dot(a, b, acc)
    tl.store(c_ptr + rm[:, None] * BN + rn[None, :], acc)


def _rowmax_space(problem):
    return ConfigSpace(params={"BLOCK": [48, 256, 8192], "num_warps": [1, 4]})


def _rowmax_specialize(config, problem):
    import torch

    from pytest_tesserabench.inspect import specialize

    x = torch.empty(16, dtype=torch.float32)
    return specialize(rowmax_kernel, (x, x, problem.shape["n"]), {**config.kernel_kwargs, **config.options})


def _rowmax_work(config, problem):
    n, block = problem.shape["n"], config["BLOCK"]
    return Work(programs=-(-n // block), flops_per_program=2.0 * block, bytes_per_program=8.0 * block, precision="fp32")


ROWMAX = Tunable(
    name="rowmax",
    shape_names=("n",),
    dtypes=("fp32",),
    kernel=lambda: rowmax_kernel,
    space=_rowmax_space,
    specialize=_rowmax_specialize,
    work=_rowmax_work,
    default_problems=(Problem({"n": 1 << 20}, ("fp32",)),),
)


def _ring_dot_space(problem):
    return ConfigSpace(params={"BK": [32, 1024], "num_warps": [4], "num_stages": [4]})


def _ring_dot_specialize(config, problem):
    import torch

    from pytest_tesserabench.inspect import specialize

    x = torch.empty(16, dtype=torch.float16)
    return specialize(
        ring_dot_kernel, (x, x, x, problem.shape["K"]), {"BM": 16, "BN": 16, **config.kernel_kwargs, **config.options}
    )


RING_DOT = Tunable(
    name="ring_dot",
    shape_names=("K",),
    dtypes=("fp16",),
    kernel=lambda: ring_dot_kernel,
    space=_ring_dot_space,
    specialize=_ring_dot_specialize,
    work=lambda config, problem: Work(1, 2.0 * 16 * 16 * problem.shape["K"], 64.0 * problem.shape["K"], "fp16"),
    default_problems=(Problem({"K": 4096}, ("fp16",)),),
)


# Every config fails to compile (no block is a power of two): nothing is left to tune.
BROKEN = dataclasses.replace(
    ROWMAX, name="broken", space=lambda problem: ConfigSpace(params={"BLOCK": [48, 96], "num_warps": [4]})
)

# Constraints that no config satisfies.
CONTRADICTORY = dataclasses.replace(
    ROWMAX,
    name="contradictory",
    space=lambda problem: ConfigSpace(params={"BLOCK": [256, 1024]}, constraints=["BLOCK > n", "BLOCK < 512"]),
)


def rowmax_config(block, warps):
    return Config({"BLOCK": block, "num_warps": warps})
