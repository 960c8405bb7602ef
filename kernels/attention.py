"""Flash-attention forward: O = softmax(Q K^T * sm_scale [+ causal mask]) V, [B, H, S, D] inputs.

The Triton program follows tutorial 06: one program per (query block, batch*head); keys and
values stream through in blocks while an online softmax keeps the running row maximum ``m_i``
and row sum ``l_i`` in fp32, so the S x S score matrix never touches memory. Scores are scaled
by ``sm_scale * log2(e)`` to use ``exp2``.

The key loop is split in stages so only the blocks that need a mask pay for one:
* non-causal: all full key blocks unmasked, then the ragged tail block (S not a multiple of
  BLOCK_N) with a bounds mask;
* causal: the key blocks left of the diagonal unmasked, then the diagonal blocks with the causal
  mask (which also keeps keys in bounds for every stored row).
Query rows past the end are computed on zero-filled loads and never stored.
"""

from __future__ import annotations

import math

import triton
import triton.language as tl

from kernels._common import (
    check_device_runs_triton,
    check_same_device,
    check_tensor,
    interpreting_at_trace_time,
    is_interpreting,
)
from pytest_tesserabench.tuning.lookup import tuned_config
from pytest_tesserabench.tuning.space import ConfigSpace
from pytest_tesserabench.tuning.tunable import Problem, Tunable, Work, dtype_name

# See kernels/matmul.py: the 3.9 interpreter's bf16 tl.dot is wrong; widen operands there only.
_widen_dot_operands = interpreting_at_trace_time()

HEAD_DIMS = (64, 128)


def attention_configs() -> list:
    """Autotuning space (tutorial 06 tile shapes for sm_80/sm_90); BLOCK_M % BLOCK_N == 0."""
    if is_interpreting():
        return [triton.Config({"BLOCK_M": 32, "BLOCK_N": 16}, num_stages=1, num_warps=4)]
    return [
        triton.Config({"BLOCK_M": bm, "BLOCK_N": bn}, num_stages=stages, num_warps=warps)
        for bm, bn, stages, warps in [
            (128, 128, 3, 8),
            (128, 64, 3, 8),
            (128, 64, 4, 4),
            (128, 128, 2, 8),
            (64, 64, 4, 4),
            (64, 32, 4, 4),
        ]
    ]


def _prune_configs(configs, named_args, **kwargs):
    if len(configs) <= 1:
        return configs
    head_dim = kwargs.get("HEAD_DIM", named_args.get("HEAD_DIM"))
    n_ctx = named_args["N_CTX"]
    kept = []
    for cfg in configs:
        bm, bn = cfg.kwargs["BLOCK_M"], cfg.kwargs["BLOCK_N"]
        if head_dim == 128 and cfg.num_stages > 3 and bn > 64:  # shared memory
            continue
        if bm > 2 * max(n_ctx, 32):
            continue
        kept.append(cfg)
    return kept or configs[-1:]


@triton.jit
def _attn_fwd_inner(
    acc,
    l_i,
    m_i,
    q,
    k_base,
    v_base,
    stride_kn,
    stride_kk,
    stride_vn,
    stride_vk,
    offs_m,
    offs_d,
    lo,
    hi,
    N_CTX,
    qk_scale,
    BLOCK_N: tl.constexpr,
    MASK_CAUSAL: tl.constexpr,
    MASK_BOUNDS: tl.constexpr,
):
    offs_n = tl.arange(0, BLOCK_N)
    for start_n in range(lo, hi, BLOCK_N):
        start_n = tl.multiple_of(start_n, BLOCK_N)
        cols = start_n + offs_n
        k_ptrs = k_base + cols[None, :].to(tl.int64) * stride_kn + offs_d[:, None] * stride_kk
        v_ptrs = v_base + cols[:, None].to(tl.int64) * stride_vn + offs_d[None, :] * stride_vk
        if MASK_BOUNDS:
            k = tl.load(k_ptrs, mask=cols[None, :] < N_CTX, other=0.0)
        else:
            k = tl.load(k_ptrs)
        q_op = q
        if _widen_dot_operands():
            q_op, k = q.to(tl.float32), k.to(tl.float32)
        qk = tl.dot(q_op, k)
        if MASK_CAUSAL or MASK_BOUNDS:
            keep = cols[None, :] < N_CTX
            if MASK_CAUSAL:
                keep = keep & (offs_m[:, None] >= cols[None, :])
            qk = tl.where(keep, qk * qk_scale, float("-inf"))
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk = qk - m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if MASK_BOUNDS:
            v = tl.load(v_ptrs, mask=cols[:, None] < N_CTX, other=0.0)
        else:
            v = tl.load(v_ptrs)
        p = p.to(v.dtype)
        if _widen_dot_operands():
            p, v = p.to(tl.float32), v.to(tl.float32)
        acc = tl.dot(p, v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.autotune(
    configs=attention_configs(),
    key=["N_CTX", "HEAD_DIM", "CAUSAL"],
    prune_configs_by={"early_config_prune": _prune_configs},
)
@triton.jit
def _attn_fwd_kernel(
    q_ptr,
    k_ptr,
    v_ptr,
    o_ptr,
    sm_scale,
    H,
    N_CTX,
    stride_qz,
    stride_qh,
    stride_qm,
    stride_qk,
    stride_kz,
    stride_kh,
    stride_kn,
    stride_kk,
    stride_vz,
    stride_vh,
    stride_vn,
    stride_vk,
    stride_oz,
    stride_oh,
    stride_om,
    stride_ok,
    HEAD_DIM: tl.constexpr,
    CAUSAL: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    off_z = off_hz // H
    off_h = off_hz % H
    q_base = q_ptr + off_z.to(tl.int64) * stride_qz + off_h.to(tl.int64) * stride_qh
    k_base = k_ptr + off_z.to(tl.int64) * stride_kz + off_h.to(tl.int64) * stride_kh
    v_base = v_ptr + off_z.to(tl.int64) * stride_vz + off_h.to(tl.int64) * stride_vh
    o_base = o_ptr + off_z.to(tl.int64) * stride_oz + off_h.to(tl.int64) * stride_oh

    offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m[:, None] < N_CTX
    q = tl.load(q_base + offs_m[:, None].to(tl.int64) * stride_qm + offs_d[None, :] * stride_qk, mask=row_ok, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), dtype=tl.float32)
    l_i = tl.zeros([BLOCK_M], dtype=tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504089  # 1/ln(2): exp(x) = exp2(x * log2(e))

    if CAUSAL:
        # Left of the diagonal every key is visible; the diagonal blocks need the causal mask.
        diag_lo = start_m * BLOCK_M
        acc, l_i, m_i = _attn_fwd_inner(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            stride_kn,
            stride_kk,
            stride_vn,
            stride_vk,
            offs_m,
            offs_d,
            0,
            diag_lo,
            N_CTX,
            qk_scale,
            BLOCK_N,
            False,
            False,
        )
        diag_hi = tl.minimum(diag_lo + BLOCK_M, N_CTX)
        acc, l_i, m_i = _attn_fwd_inner(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            stride_kn,
            stride_kk,
            stride_vn,
            stride_vk,
            offs_m,
            offs_d,
            diag_lo,
            diag_hi,
            N_CTX,
            qk_scale,
            BLOCK_N,
            True,
            True,
        )
    else:
        full_hi = (N_CTX // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _attn_fwd_inner(
            acc,
            l_i,
            m_i,
            q,
            k_base,
            v_base,
            stride_kn,
            stride_kk,
            stride_vn,
            stride_vk,
            offs_m,
            offs_d,
            0,
            full_hi,
            N_CTX,
            qk_scale,
            BLOCK_N,
            False,
            False,
        )
        if full_hi < N_CTX:
            acc, l_i, m_i = _attn_fwd_inner(
                acc,
                l_i,
                m_i,
                q,
                k_base,
                v_base,
                stride_kn,
                stride_kk,
                stride_vn,
                stride_vk,
                offs_m,
                offs_d,
                full_hi,
                N_CTX,
                N_CTX,
                qk_scale,
                BLOCK_N,
                False,
                True,
            )

    acc = acc / l_i[:, None]
    o_ptrs = o_base + offs_m[:, None].to(tl.int64) * stride_om + offs_d[None, :] * stride_ok
    tl.store(o_ptrs, acc.to(o_ptr.dtype.element_ty), mask=row_ok)


def _check_inputs(q, k, v) -> None:
    import torch

    dtypes = (torch.float16, torch.bfloat16)
    for name, t in (("q", q), ("k", k), ("v", v)):
        check_tensor("attention", name, t, dtypes=dtypes, ndim=4)
    check_same_device("attention", q=q, k=k, v=v)
    check_device_runs_triton("attention", q)
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(f"attention: q, k, v must share one dtype, got {q.dtype}, {k.dtype}, {v.dtype}")
    if not (q.shape == k.shape == v.shape):
        raise ValueError(
            f"attention: q, k, v must all be [batch, heads, seq, head_dim] of one shape, got "
            f"{tuple(q.shape)}, {tuple(k.shape)}, {tuple(v.shape)}"
        )
    if q.shape[-1] not in HEAD_DIMS:
        raise ValueError(f"attention: head_dim {q.shape[-1]} is not supported; use one of {HEAD_DIMS}")


def attention(q, k, v, *, causal: bool = False, sm_scale: float | None = None):
    """Flash-attention forward over [B, H, S, D] fp16/bf16 tensors, D in (64, 128).

    ``causal`` masks key j for query i when j > i. ``sm_scale`` defaults to 1/sqrt(D).
    """
    import torch

    _check_inputs(q, k, v)
    B, H, S, D = q.shape
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    if not math.isfinite(sm_scale):
        raise ValueError(f"attention: sm_scale must be finite, got {sm_scale}")
    o = torch.empty_like(q, memory_format=torch.contiguous_format)
    if B * H * S == 0:
        return o
    _launch(q, k, v, o, sm_scale, bool(causal))
    return o


def _launch(q, k, v, o, sm_scale, causal, *, config=None) -> None:
    """The kernel with ``config`` (a tuning ``Config``); by default the config the tuning cache
    holds for this problem and GPU, else the autotuner over ``attention_configs()``."""
    B, H, S, D = q.shape
    if config is None:
        config = _tuned(B, H, S, D, causal, q.dtype, q.device)
    grid = lambda meta: (triton.cdiv(S, meta["BLOCK_M"]), B * H)
    # A config of our own goes to the @triton.jit function under the autotuner, untimed.
    launch = _attn_fwd_kernel[grid] if config is None else _attn_fwd_kernel.fn[grid]
    extra = {} if config is None else {**config.kernel_kwargs, **config.options}
    launch(
        q,
        k,
        v,
        o,
        sm_scale,
        H,
        S,
        *q.stride(),
        *k.stride(),
        *v.stride(),
        *o.stride(),
        HEAD_DIM=D,
        CAUSAL=causal,
        **extra,
    )


# --------------------------------------------------------------------------- tuning (tesserabench tune)


def tuning_space(problem: Problem) -> ConfigSpace:
    """The search space of ``tesserabench tune kernels.attention:TUNABLE``."""
    return ConfigSpace(
        params={"BLOCK_M": [64, 128], "BLOCK_N": [32, 64, 128], "num_warps": [4, 8], "num_stages": [1, 2, 3, 4]},
        constraints=[
            "BLOCK_M % BLOCK_N == 0",  # the causal diagonal is walked in whole key blocks
            "BLOCK_M <= 2 * max(S, 32)",  # query tiles far longer than the sequence only waste work
        ],
    )


def _tuning_specialize(config, problem: Problem):
    """What Triton compiles for ``config`` on contiguous [B, H, S, D] inputs, from stand-ins."""
    import torch

    from pytest_tesserabench.inspect import specialize
    from pytest_tesserabench.tuning.tunable import torch_dtype

    B, H, S, D, causal = (problem.shape[n] for n in ("B", "H", "S", "D", "causal"))
    x = torch.empty(16, dtype=torch_dtype(problem.dtypes[0]))  # only dtype and alignment matter
    strides = (H * S * D, S * D, D, 1) * 4
    return specialize(
        _attn_fwd_kernel,
        (x, x, x, x, 1.0 / math.sqrt(D), H, S, *strides),
        {"HEAD_DIM": D, "CAUSAL": bool(causal), **config.kernel_kwargs, **config.options},
    )


def _tuning_work(config, problem: Problem) -> Work:
    B, H, S, D, causal = (problem.shape[n] for n in ("B", "H", "S", "D", "causal"))
    bm = config["BLOCK_M"]
    keys = S / 2 if causal else S  # a causal query block sees half the keys on average
    return Work(
        programs=triton.cdiv(S, bm) * B * H,
        flops_per_program=4.0 * bm * keys * D,
        bytes_per_program=float((2 * bm * D + 2 * keys * D) * problem.itemsize),
        precision=problem.dtypes[0],
    )


def _tuning_runner(problem: Problem, device):
    """Inputs allocated once; ``config -> call`` launching the kernel with it."""
    import torch

    from pytest_tesserabench.tuning.tunable import torch_dtype

    B, H, S, D, causal = (problem.shape[n] for n in ("B", "H", "S", "D", "causal"))
    dtype = torch_dtype(problem.dtypes[0])
    q, k, v = (torch.randn(B, H, S, D, device=device).to(dtype) for _ in range(3))
    o = torch.empty_like(q)
    scale = 1.0 / math.sqrt(D)
    return lambda config: lambda: _launch(q, k, v, o, scale, bool(causal), config=config)


TUNABLE = Tunable(
    name="attention",
    shape_names=("B", "H", "S", "D", "causal"),
    dtypes=("fp16", "bf16"),
    kernel=lambda: _attn_fwd_kernel,
    space=tuning_space,
    specialize=_tuning_specialize,
    work=_tuning_work,
    runner=_tuning_runner,
    default_problems=(Problem({"B": 4, "H": 32, "S": 4096, "D": 128, "causal": 1}, ("bf16",)),),
)


def _tuned(B, H, S, D, causal, dtype, device):
    """The tuning cache's measured config for this problem on this GPU, or None (no GPU, no entry)."""
    shape = {"B": B, "H": H, "S": S, "D": D, "causal": int(causal)}
    return tuned_config(TUNABLE, shape, (dtype_name(dtype),), device)


def reference(q, k, v, *, causal: bool = False, sm_scale: float | None = None, rows=None):
    """Plain attention in fp32 (fp64 for short sequences), cast to q's dtype.

    ``rows`` (a list of query indices) computes only those rows, output [B, H, len(rows), D]:
    long sequences cannot hold the S x S score matrix.
    """
    import torch

    D, S = q.shape[-1], q.shape[-2]
    sm_scale = 1.0 / math.sqrt(D) if sm_scale is None else float(sm_scale)
    wide = torch.float64 if S <= 1024 else torch.float32
    query_idx = torch.arange(S, device=q.device) if rows is None else torch.as_tensor(rows, device=q.device)
    q_rows = q if rows is None else q[..., query_idx, :]
    scores = (q_rows.to(wide) @ k.to(wide).transpose(-1, -2)) * sm_scale
    if causal:
        visible = query_idx[:, None] >= torch.arange(S, device=q.device)[None, :]
        scores = scores.masked_fill(~visible, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v.to(wide)).to(q.dtype)


def flops(B: int, H: int, S: int, D: int, *, causal: bool = False) -> int:
    """Two matmuls of 2*S*S*D each per head; causal does about half the work."""
    total = 4 * B * H * S * S * D
    return total // 2 if causal else total


def bytes(B: int, H: int, S: int, D: int, itemsize: int) -> int:
    """Compulsory traffic: read Q, K, V once and write O once."""
    return 4 * B * H * S * D * itemsize


#: (B, H, S, D, causal) for correctness: one query, primes, S not a multiple of any block,
#: head counts that are not powers of two, both head dims.
CORRECTNESS_SHAPES = [
    (1, 1, 1, 64, False),
    (1, 1, 1, 64, True),
    (1, 3, 17, 64, False),
    (1, 3, 17, 64, True),
    (2, 5, 67, 128, False),
    (2, 5, 67, 128, True),
    (1, 2, 96, 64, True),
    (1, 1, 200, 128, True),
]

__all__ = [
    "attention",
    "reference",
    "flops",
    "bytes",
    "attention_configs",
    "tuning_space",
    "TUNABLE",
    "CORRECTNESS_SHAPES",
    "HEAD_DIMS",
]
