"""Small Triton kernels owned by the inspect tests (independent of kernels/)."""

import triton
import triton.language as tl


@triton.jit
def _add_values(a, b):
    return a + b


@triton.jit
def vector_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, _add_values(x, y), mask=mask)


@triton.jit
def small_matmul_kernel(
    a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr
):
    """Row-major C = A @ B with tl.dot, pipelined over K (shared memory for num_stages > 1)."""
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        a = tl.load(
            a_ptr + rm[:, None] * stride_am + (k + rk)[None, :],
            mask=(rm[:, None] < M) & ((k + rk)[None, :] < K),
            other=0.0,
        )
        b = tl.load(
            b_ptr + (k + rk)[:, None] * stride_bk + rn[None, :],
            mask=((k + rk)[:, None] < K) & (rn[None, :] < N),
            other=0.0,
        )
        acc = tl.dot(a, b, acc)
    tl.store(
        c_ptr + rm[:, None] * stride_cm + rn[None, :],
        acc.to(c_ptr.dtype.element_ty),
        mask=(rm[:, None] < M) & (rn[None, :] < N),
    )


@triton.jit
def bad_dot_kernel(a_ptr, c_ptr, BLOCK: tl.constexpr):
    """tl.dot needs every dimension >= 16: BLOCK=8 fails to compile."""
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], tl.dot(a, a))


def tuned_add_configs():
    return [triton.Config({"BLOCK": 64}, num_warps=2), triton.Config({"BLOCK": 128}, num_warps=4)]


def first_config_wins(kernel_call, quantiles):
    """An autotuner benchmark that needs no GPU: runs the candidate, ranks by call order."""
    kernel_call()
    first_config_wins.calls += 1
    return [float(first_config_wins.calls)] * 3


first_config_wins.calls = 0


@triton.autotune(configs=tuned_add_configs(), key=["n"], do_bench=first_config_wins)
@triton.jit
def tuned_add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


def add_two(x):
    """A launcher, as kernel modules have: what `tesserabench inspect MODULE:add_two --args` runs."""
    out = x.new_empty(x.shape)
    vector_add_kernel[(triton.cdiv(x.numel(), 512),)](x, x, out, x.numel(), BLOCK=512)
    return out
