"""Row softmax over the last dimension: y = exp(x - max(x)) / sum(exp(x - max(x))).

Softmax is memory bound, so the design goal is the least traffic:
* ``_softmax_row_kernel``: the whole row lives in registers — one read and one write per
  element (Triton tutorial 02). Each program walks several rows (a persistent grid sized to the
  GPU) so small rows still keep every SM busy.
* ``_softmax_online_kernel``: rows too long for registers. A first pass keeps a running maximum
  and a running sum rescaled whenever the maximum grows (online softmax), a second pass
  writes: two reads and one write per element instead of three reads.
Arithmetic is fp32 whatever the storage type.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels._common import (
    as_rows,
    check_device_runs_triton,
    check_tensor,
    next_power_of_2,
    persistent_row_programs,
    row_num_warps,
)

#: Longest row (elements) kept entirely in registers; longer rows take the online kernel.
MAX_FUSED_COLS = 32768
#: Chunk of a long row processed per step by the online kernel.
ONLINE_BLOCK = 4096


@triton.jit
def _softmax_row_kernel(
    x_ptr,
    y_ptr,
    n_rows,
    n_cols,
    stride_x,
    stride_y,
    BLOCK: tl.constexpr,
):
    cols = tl.arange(0, BLOCK)
    in_row = cols < n_cols
    for row in range(tl.program_id(0), n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + tl.cast(row, tl.int64) * stride_x + cols, mask=in_row, other=float("-inf"))
        x = x.to(tl.float32)
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        y = num / tl.sum(num, axis=0)
        tl.store(y_ptr + tl.cast(row, tl.int64) * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=in_row)


@triton.jit
def _softmax_online_kernel(
    x_ptr,
    y_ptr,
    n_cols,
    stride_x,
    stride_y,
    BLOCK: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK)
    # Per-lane running max and sum; lanes are combined once at the end.
    m = tl.full([BLOCK], float("-inf"), dtype=tl.float32)
    s = tl.zeros([BLOCK], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf")).to(tl.float32)
        m_new = tl.maximum(m, x)
        # Lanes still at -inf (nothing seen yet) must add 0, not exp(-inf - -inf) = nan.
        scale = tl.where(m_new == float("-inf"), 0.0, tl.exp(m - m_new))
        s = s * scale + tl.where(m_new == float("-inf"), 0.0, tl.exp(x - m_new))
        m = m_new
    row_max = tl.max(m, axis=0)
    lane_scale = tl.where(m == float("-inf"), 0.0, tl.exp(m - row_max))
    row_sum = tl.sum(s * lane_scale, axis=0)
    inv_sum = 1.0 / row_sum
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf")).to(tl.float32)
        y = tl.exp(x - row_max) * inv_sum
        tl.store(y_row + start + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


def softmax(x, *, max_fused_cols: int = MAX_FUSED_COLS):
    """Softmax over the last dimension of an fp32/fp16/bf16 tensor; same shape and dtype out.

    ``max_fused_cols`` is the longest row handled in registers (longer rows use the looped
    online kernel); tests lower it to exercise that path on small inputs.
    """
    import torch

    check_tensor("softmax", "x", x, dtypes=(torch.float32, torch.float16, torch.bfloat16), ndim=range(1, 9))
    check_device_runs_triton("softmax", x)
    n_cols = x.shape[-1]
    x2, y = as_rows(x)
    n_rows = x2.shape[0]
    if n_rows == 0 or n_cols == 0:
        return y.reshape(x.shape)
    if n_cols <= max_fused_cols:
        block = next_power_of_2(n_cols)
        warps = row_num_warps(block)
        _softmax_row_kernel[(persistent_row_programs(n_rows, warps, x.device),)](
            x2,
            y,
            n_rows,
            n_cols,
            x2.stride(0),
            y.stride(0),
            BLOCK=block,
            num_warps=warps,
        )
    else:
        block = min(ONLINE_BLOCK, next_power_of_2(max_fused_cols))
        _softmax_online_kernel[(n_rows,)](
            x2,
            y,
            n_cols,
            x2.stride(0),
            y.stride(0),
            BLOCK=block,
            num_warps=row_num_warps(block),
        )
    return y.reshape(x.shape)


def reference(x):
    """Softmax computed in fp64, cast back to x's dtype."""
    import torch

    return torch.softmax(x.double(), dim=-1).to(x.dtype)


def flops(n_rows: int, n_cols: int) -> int:
    """max, subtract, exp, sum, divide: about five operations per element."""
    return 5 * n_rows * n_cols


def bytes(n_rows: int, n_cols: int, itemsize: int) -> int:
    """Compulsory traffic: read x once, write y once."""
    return 2 * n_rows * n_cols * itemsize


#: (rows, cols) for correctness: one row, primes, tiny and ragged rows, long (online) rows.
CORRECTNESS_SHAPES = [(1, 1), (1, 7), (3, 1000), (37, 129), (128, 256), (5, 4099)]

#: (rows, cols) for benchmarks: tokens x LLM hidden sizes and vocabularies.
LLM_SHAPES = [(4096, 4096), (4096, 8192), (8192, 16384), (2048, 32000), (1024, 128256)]

__all__ = ["softmax", "reference", "flops", "bytes", "CORRECTNESS_SHAPES", "LLM_SHAPES", "MAX_FUSED_COLS"]
