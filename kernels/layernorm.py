"""Layer normalisation and RMS normalisation, forward, over the last dimension.

    layer_norm: y = (x - mean(x)) / sqrt(var(x) + eps) * weight + bias
    rms_norm:   y = x / sqrt(mean(x^2) + eps) * weight

Memory bound, like softmax: rows that fit in registers are read once and written once
(Triton tutorial 05, Liger-Kernel); each program walks several rows (a persistent grid sized to
the GPU) and loads weight and bias once for all of them. Rows too long for registers take a
looped kernel (mean pass, variance pass, write pass). Statistics are fp32 whatever the storage
type; the variance is the mean of squared deviations (biased, as torch's layer_norm).
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels._common import (
    as_rows,
    check_device_runs_triton,
    check_same_device,
    check_tensor,
    next_power_of_2,
    persistent_row_programs,
    row_num_warps,
)

#: Longest row (elements) kept in registers; longer rows take the looped kernel.
MAX_FUSED_COLS = 32768
LOOP_BLOCK = 4096


@triton.jit
def _norm_row_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    n_rows,
    n_cols,
    stride_x,
    stride_y,
    eps,
    RMS: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    cols = tl.arange(0, BLOCK)
    in_row = cols < n_cols
    if HAS_WEIGHT:
        w = tl.load(w_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    if HAS_BIAS:
        b = tl.load(b_ptr + cols, mask=in_row, other=0.0).to(tl.float32)
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + tl.cast(row, tl.int64) * stride_x + cols, mask=in_row, other=0.0).to(tl.float32)
        if RMS:
            x_hat = x * tl.math.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        else:
            mean = tl.sum(x, axis=0) / n_cols
            diff = tl.where(in_row, x - mean, 0.0)
            x_hat = diff * tl.math.rsqrt(tl.sum(diff * diff, axis=0) / n_cols + eps)
        y = x_hat
        if HAS_WEIGHT:
            y = y * w
        if HAS_BIAS:
            y = y + b
        tl.store(y_ptr + tl.cast(row, tl.int64) * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)


@triton.jit
def _norm_looped_kernel(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    n_cols,
    stride_x,
    stride_y,
    eps,
    RMS: tl.constexpr,
    HAS_WEIGHT: tl.constexpr,
    HAS_BIAS: tl.constexpr,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK)
    mean = 0.0
    if not RMS:
        acc = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, n_cols, BLOCK):
            acc += tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0).to(tl.float32)
        mean = tl.sum(acc, axis=0) / n_cols
    # Squared deviations from the mean (from 0 for RMS): no cancellation as with E[x^2]-E[x]^2.
    sq = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        d = tl.where(mask, x - mean, 0.0)
        sq += d * d
    rstd = tl.math.rsqrt(tl.sum(sq, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=0.0).to(tl.float32)
        y = (x - mean) * rstd
        if HAS_WEIGHT:
            y = y * tl.load(w_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        if HAS_BIAS:
            y = y + tl.load(b_ptr + start + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def _normalize(kernel_name, x, weight, bias, eps, rms, max_fused_cols):
    import torch

    float_types = (torch.float32, torch.float16, torch.bfloat16)
    check_tensor(kernel_name, "x", x, dtypes=float_types, ndim=range(1, 9))
    check_device_runs_triton(kernel_name, x)
    n_cols = x.shape[-1]
    for name, t in (("weight", weight), ("bias", bias)):
        if t is None:
            continue
        check_tensor(kernel_name, name, t, dtypes=(x.dtype, torch.float32), ndim=1)
        check_same_device(kernel_name, x=x, **{name: t})
        if t.shape[0] != n_cols:
            raise ValueError(
                f"{kernel_name}: {name} has {t.shape[0]} elements but x's last dimension is {n_cols}; they must match"
            )
    if not (isinstance(eps, (int, float)) and eps >= 0):
        raise ValueError(f"{kernel_name}: eps must be a non-negative number, got {eps!r}")

    x2, y = as_rows(x)
    n_rows = x2.shape[0]
    if n_rows == 0 or n_cols == 0:
        return y.reshape(x.shape)
    # Unused pointer arguments still need a tensor; y stands in.
    w_arg = weight if weight is not None else y
    b_arg = bias if bias is not None else y
    flags = dict(RMS=rms, HAS_WEIGHT=weight is not None, HAS_BIAS=bias is not None)
    if n_cols <= max_fused_cols:
        block = next_power_of_2(n_cols)
        warps = row_num_warps(block)
        _norm_row_kernel[(persistent_row_programs(n_rows, warps, x.device),)](
            x2,
            w_arg,
            b_arg,
            y,
            n_rows,
            n_cols,
            x2.stride(0),
            y.stride(0),
            float(eps),
            **flags,
            BLOCK=block,
            num_warps=warps,
        )
    else:
        block = min(LOOP_BLOCK, next_power_of_2(max_fused_cols))
        _norm_looped_kernel[(n_rows,)](
            x2,
            w_arg,
            b_arg,
            y,
            n_cols,
            x2.stride(0),
            y.stride(0),
            float(eps),
            **flags,
            BLOCK=block,
            num_warps=row_num_warps(block),
        )
    return y.reshape(x.shape)


def layer_norm(x, weight, bias, eps: float = 1e-5, *, max_fused_cols: int = MAX_FUSED_COLS):
    """Layer norm over the last dimension of an fp32/fp16/bf16 tensor; same shape and dtype out.

    ``weight``/``bias`` are 1-D of x's last size, x's dtype or fp32, or None.
    ``max_fused_cols`` is the longest row kept in registers (tests lower it to reach the loop).
    """
    return _normalize("layer_norm", x, weight, bias, eps, False, max_fused_cols)


def rms_norm(x, weight, eps: float = 1e-6, *, max_fused_cols: int = MAX_FUSED_COLS):
    """RMS norm over the last dimension: x / sqrt(mean(x^2) + eps) * weight."""
    return _normalize("rms_norm", x, weight, None, eps, True, max_fused_cols)


def reference_layer_norm(x, weight, bias, eps: float = 1e-5):
    """Layer norm in fp64, cast back to x's dtype."""
    import torch

    w = None if weight is None else weight.double()
    b = None if bias is None else bias.double()
    return torch.nn.functional.layer_norm(x.double(), (x.shape[-1],), w, b, eps).to(x.dtype)


def reference_rms_norm(x, weight, eps: float = 1e-6):
    """RMS norm in fp64, cast back to x's dtype."""
    xd = x.double()
    y = xd * (xd.pow(2).mean(dim=-1, keepdim=True) + eps).rsqrt()
    if weight is not None:
        y = y * weight.double()
    return y.to(x.dtype)


def flops(n_rows: int, n_cols: int) -> int:
    """Mean, deviations, squares, sum, scale, weight, bias: about eight operations per element."""
    return 8 * n_rows * n_cols


def bytes(n_rows: int, n_cols: int, itemsize: int, param_itemsize: int | None = None, n_params: int = 2) -> int:
    """Compulsory traffic: read x, write y, read each parameter vector once."""
    param_itemsize = itemsize if param_itemsize is None else param_itemsize
    return 2 * n_rows * n_cols * itemsize + n_params * n_cols * param_itemsize


#: (rows, cols) for correctness: one row, primes, ragged rows, a long (looped) row.
CORRECTNESS_SHAPES = [(1, 1), (1, 7), (3, 1000), (37, 129), (128, 256), (5, 4099)]

#: (tokens, hidden) for benchmarks: LLM hidden sizes (Llama 7B/8B 4096, 13B 5120, 70B 8192,
#: 405B 16384).
LLM_SHAPES = [(4096, 4096), (4096, 5120), (4096, 8192), (4096, 16384)]

__all__ = [
    "layer_norm",
    "rms_norm",
    "reference_layer_norm",
    "reference_rms_norm",
    "flops",
    "bytes",
    "CORRECTNESS_SHAPES",
    "LLM_SHAPES",
    "MAX_FUSED_COLS",
]
