"""A project's own @triton.autotune kernel, and the three lines that make it tunable."""

import torch
import triton
import triton.language as tl

from pytest_tesserabench.tuning import Problem, from_autotune

CONFIGS = [
    triton.Config({"BLOCK": 128}, num_warps=4),
    triton.Config({"BLOCK": 1024}, num_warps=4, num_stages=2),
    triton.Config({"BLOCK": 256}, num_warps=8),
]


@triton.autotune(configs=CONFIGS, key=["n"])
@triton.jit
def scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


def _inputs(problem, device):
    n = problem.shape["n"]
    dtype = getattr(torch, {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}[problem.dtypes[0]])
    x = torch.arange(n, dtype=dtype, device=device)
    return (x, torch.empty_like(x), n, 2.0)


TUNABLE = from_autotune(
    scale_kernel,
    shape_names=("n",),
    inputs=_inputs,
    grid=lambda problem, meta: (triton.cdiv(problem.shape["n"], meta["BLOCK"]),),
    shape_of=lambda args: {"n": args["n"]},
    bytes=lambda problem: 2 * problem.shape["n"] * problem.itemsize,
    default_problems=(Problem({"n": 1 << 20}, ("fp32",)),),
)
