"""Matrix multiplication: C = A @ B, and the fp8 variant C = (A @ B) * scale_a * scale_b.

Two Triton programs, both accumulating in fp32 and walking output tiles in grouped order
(GROUP_SIZE_M rows of tiles at a time, so the A and B panels a wave of programs needs stay
in L2 — Triton tutorial 03):

* ``_matmul_kernel``: one program per output tile, pointer loads with masks; runs everywhere
  (sm_80, sm_90, the CPU interpreter) and on any strides.
* ``_matmul_kernel_tma_persistent``: Hopper path (Triton tutorial 09). One program per SM
  loops over output tiles; operands move through TMA descriptors built on the host
  (``triton.tools.tensor_descriptor.TensorDescriptor``, present from Triton 3.4); the epilogue
  can be split in two halves to halve the shared memory it needs.

``matmul`` takes fp32 (tf32 when ``torch.backends.cuda.matmul.allow_tf32`` lets torch.matmul use
it too, so the comparison is fair), fp16 and bf16. ``matmul_fp8`` takes e4m3/e5m2 with per-tensor
fp32 scales; like ``torch._scaled_mm`` it is fastest with B column-major (K contiguous), which
is the layout fp8 tensor-core instructions read. Hopper's fp8 tensor cores accumulate with fewer
bits than fp32; both kernels add each K tile's product into the fp32 accumulator
(``max_num_imprecise_acc=BLOCK_SIZE_K``), as ``torch._scaled_mm`` does by default
(``use_fast_accum=False``). Accumulated whole in the tensor cores, 4096-long dot products were off
by up to 16 bf16 units in the last place.
"""

from __future__ import annotations

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

try:  # host-side TMA descriptors: Triton >= 3.4
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # pragma: no cover - older Triton: the pointer kernel serves every GPU
    TensorDescriptor = None

# Triton 3.9's interpreter computes bf16 tl.dot wrongly (it multiplies the raw bits); under it
# the operands are widened to fp32 first, which is exact for 16-bit products. Asked when the
# kernel is traced, not fixed at import: every compile sees False, including the static
# analysis of a launch captured in the interpreter, so it analyses the GPU's binary.
_widen_dot_operands = interpreting_at_trace_time()


# --------------------------------------------------------------------------- configs


def _config(bm, bn, bk, group, stages, warps, **extra):
    return triton.Config(
        {"BLOCK_SIZE_M": bm, "BLOCK_SIZE_N": bn, "BLOCK_SIZE_K": bk, "GROUP_SIZE_M": group, **extra},
        num_stages=stages,
        num_warps=warps,
    )


def matmul_configs() -> list:
    """Autotuning space of the pointer kernel (sm_80 and sm_90 tile shapes, tutorial 03)."""
    if is_interpreting():  # the interpreter would run every config: one small one
        return [_config(32, 32, 32, 4, 1, 4)]
    return [
        _config(128, 256, 64, 8, 3, 8),
        _config(256, 128, 64, 8, 3, 8),
        _config(128, 128, 64, 8, 4, 8),
        _config(128, 128, 64, 8, 4, 4),
        _config(64, 256, 32, 8, 4, 4),
        _config(128, 64, 32, 8, 4, 4),
        _config(64, 128, 32, 8, 4, 4),
        _config(128, 32, 32, 8, 4, 4),
        _config(64, 32, 32, 8, 5, 2),
        _config(32, 64, 32, 8, 5, 2),
        # fp8: deeper K tiles keep the tensor cores fed.
        _config(128, 256, 128, 8, 3, 8),
        _config(256, 128, 128, 8, 3, 8),
        _config(128, 128, 128, 8, 4, 8),
    ]


def _shared_bytes(bm, bn, bk, stages, itemsize) -> int:
    return (bm * bk + bk * bn) * itemsize * stages


# Shared memory per block on sm_80 (163 KiB) is the tighter bound of the two targets we tune for;
# sm_90 has 227 KiB, so let a few larger configs through there via autotune's OutOfResources skip.
_SMEM_BUDGET = 227 * 1024


def _prune_configs(configs, named_args, **kwargs):
    """Drop configs that cannot fit or cannot pay off for this problem (fewer to time)."""
    if len(configs) <= 1:
        return configs
    a = named_args["a_ptr"]
    itemsize = a.element_size()
    M, N, K = named_args["M"], named_args["N"], named_args["K"]
    fitting, kept = [], []
    for cfg in configs:
        bm, bn, bk = (cfg.kwargs[k] for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"))
        if _shared_bytes(bm, bn, bk, cfg.num_stages, itemsize) > _SMEM_BUDGET:
            continue
        if itemsize == 1 and bk < 64:  # fp8 wants K tiles of at least 64 bytes... and 128 is better
            continue
        if itemsize > 1 and bk > 64:
            continue
        fitting.append(cfg)
        # Tiles far larger than the problem only waste work.
        if bm > 2 * max(M, 16) or bn > 2 * max(N, 16) or bk > 2 * max(K, 16):
            continue
        kept.append(cfg)
    return kept or _smallest(fitting or configs)


def _smallest(configs: list) -> list:
    """The config with the smallest tile and fewest stages, alone: for a problem smaller than every
    tile, the least wasted work, and one that fits the shared memory where any does."""
    return [min(configs, key=lambda cfg: (_tile_elements(cfg), cfg.num_stages))]


def _tile_elements(cfg) -> int:
    return cfg.kwargs["BLOCK_SIZE_M"] * cfg.kwargs["BLOCK_SIZE_N"] * cfg.kwargs["BLOCK_SIZE_K"]


def tma_persistent_configs() -> list:
    """Autotuning space of the Hopper TMA persistent kernel (tutorial 09)."""
    hook = _tma_set_block_shapes
    if is_interpreting():
        return [
            triton.Config(
                {
                    "BLOCK_SIZE_M": 32,
                    "BLOCK_SIZE_N": 32,
                    "BLOCK_SIZE_K": 32,
                    "GROUP_SIZE_M": 4,
                    "EPILOGUE_SUBTILE": True,
                },
                num_stages=1,
                num_warps=4,
                pre_hook=hook,
            )
        ]
    configs = []
    for bm, bn, bk, stages, warps, subtile in [
        (128, 256, 64, 3, 8, True),
        (128, 256, 64, 4, 8, True),
        (128, 128, 64, 4, 8, False),
        (128, 128, 64, 5, 4, False),
        (128, 256, 128, 3, 8, True),  # fp8
        (128, 128, 128, 4, 8, False),  # fp8
        (64, 128, 64, 4, 4, False),
    ]:
        configs.append(
            triton.Config(
                {
                    "BLOCK_SIZE_M": bm,
                    "BLOCK_SIZE_N": bn,
                    "BLOCK_SIZE_K": bk,
                    "GROUP_SIZE_M": 8,
                    "EPILOGUE_SUBTILE": subtile,
                },
                num_stages=stages,
                num_warps=warps,
                pre_hook=hook,
            )
        )
    return configs


def _prune_tma_configs(configs, named_args, **kwargs):
    if len(configs) <= 1:
        return configs
    itemsize = named_args["a_desc"].base.element_size()
    M, N = named_args["M"], named_args["N"]
    fitting, kept = [], []
    for cfg in configs:
        bm, bn, bk = (cfg.kwargs[k] for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"))
        if (itemsize == 1) != (bk == 128):
            continue
        c_tile = bm * (bn // 2 if cfg.kwargs["EPILOGUE_SUBTILE"] else bn) * 2
        if _shared_bytes(bm, bn, bk, cfg.num_stages, itemsize) + c_tile > _SMEM_BUDGET:
            continue
        fitting.append(cfg)
        if bm > 2 * max(M, 64) or bn > 2 * max(N, 64):
            continue
        kept.append(cfg)
    return kept or _smallest(fitting or configs)


def _tma_set_block_shapes(nargs):
    """Autotune pre-hook: a descriptor's block shape must match the config being tried."""
    bm, bn, bk = nargs["BLOCK_SIZE_M"], nargs["BLOCK_SIZE_N"], nargs["BLOCK_SIZE_K"]
    nargs["a_desc"].block_shape = [bm, bk]
    nargs["b_desc"].block_shape = [bn, bk] if nargs["B_K_MAJOR"] else [bk, bn]
    nargs["c_desc"].block_shape = [bm, bn // 2] if nargs["EPILOGUE_SUBTILE"] else [bm, bn]


# --------------------------------------------------------------------------- kernels


@triton.jit
def _grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M: tl.constexpr):
    """Map a linear tile id to (pid_m, pid_n), GROUP_SIZE_M tile rows at a time (L2 reuse)."""
    num_pid_in_group = GROUP_SIZE_M * num_pid_n
    group_id = tile_id // num_pid_in_group
    first_pid_m = group_id * GROUP_SIZE_M
    group_size_m = tl.minimum(num_pid_m - first_pid_m, GROUP_SIZE_M)
    pid_m = first_pid_m + ((tile_id % num_pid_in_group) % group_size_m)
    pid_n = (tile_id % num_pid_in_group) // group_size_m
    return pid_m, pid_n


@triton.autotune(
    configs=matmul_configs(),
    key=["M", "N", "K", "ALLOW_TF32"],
    prune_configs_by={"early_config_prune": _prune_configs},
)
@triton.jit
def _matmul_kernel(
    a_ptr,
    b_ptr,
    c_ptr,
    scale_a_ptr,
    scale_b_ptr,
    M,
    N,
    K,
    stride_am,
    stride_ak,
    stride_bk,
    stride_bn,
    stride_cm,
    stride_cn,
    HAS_SCALES: tl.constexpr,
    ALLOW_TF32: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
):
    pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    pid_m, pid_n = _grouped_tile(pid, num_pid_m, num_pid_n, GROUP_SIZE_M)

    # Rows/columns past the edge are wrapped onto valid ones (their results are never stored),
    # so A and B loads need a mask only along K.
    offs_am = (pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)) % M
    offs_bn = (pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)) % N
    offs_k = tl.arange(0, BLOCK_SIZE_K)
    a_ptrs = a_ptr + offs_am[:, None].to(tl.int64) * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :].to(tl.int64) * stride_bn

    accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_SIZE_K)):
        k_left = K - k * BLOCK_SIZE_K
        a = tl.load(a_ptrs, mask=offs_k[None, :] < k_left, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < k_left, other=0.0)
        if _widen_dot_operands():
            a, b = a.to(tl.float32), b.to(tl.float32)
        if ALLOW_TF32:
            accumulator = tl.dot(a, b, accumulator, input_precision="tf32")
        else:
            accumulator = tl.dot(a, b, accumulator, input_precision="ieee", max_num_imprecise_acc=BLOCK_SIZE_K)
        a_ptrs += BLOCK_SIZE_K * stride_ak
        b_ptrs += BLOCK_SIZE_K * stride_bk

    if HAS_SCALES:
        accumulator = accumulator * (tl.load(scale_a_ptr) * tl.load(scale_b_ptr))
    c = accumulator.to(c_ptr.dtype.element_ty)

    offs_cm = pid_m * BLOCK_SIZE_M + tl.arange(0, BLOCK_SIZE_M)
    offs_cn = pid_n * BLOCK_SIZE_N + tl.arange(0, BLOCK_SIZE_N)
    c_ptrs = c_ptr + offs_cm[:, None].to(tl.int64) * stride_cm + offs_cn[None, :] * stride_cn
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


@triton.autotune(
    configs=tma_persistent_configs(),
    key=["M", "N", "K", "B_K_MAJOR"],
    prune_configs_by={"early_config_prune": _prune_tma_configs},
)
@triton.jit
def _matmul_kernel_tma_persistent(
    a_desc,
    b_desc,
    c_desc,
    scale_a_ptr,
    scale_b_ptr,
    M,
    N,
    K,
    HAS_SCALES: tl.constexpr,
    B_K_MAJOR: tl.constexpr,
    NUM_SMS: tl.constexpr,
    BLOCK_SIZE_M: tl.constexpr,
    BLOCK_SIZE_N: tl.constexpr,
    BLOCK_SIZE_K: tl.constexpr,
    GROUP_SIZE_M: tl.constexpr,
    EPILOGUE_SUBTILE: tl.constexpr,
):
    start_pid = tl.program_id(axis=0)
    num_pid_m = tl.cdiv(M, BLOCK_SIZE_M)
    num_pid_n = tl.cdiv(N, BLOCK_SIZE_N)
    k_tiles = tl.cdiv(K, BLOCK_SIZE_K)
    num_tiles = num_pid_m * num_pid_n
    if HAS_SCALES:
        scale = tl.load(scale_a_ptr) * tl.load(scale_b_ptr)

    # TMA zero-fills out-of-bounds reads and clips out-of-bounds writes: no masks needed.
    for tile_id in tl.range(start_pid, num_tiles, NUM_SMS, flatten=True):
        pid_m, pid_n = _grouped_tile(tile_id, num_pid_m, num_pid_n, GROUP_SIZE_M)
        offs_m = pid_m * BLOCK_SIZE_M
        offs_n = pid_n * BLOCK_SIZE_N
        accumulator = tl.zeros((BLOCK_SIZE_M, BLOCK_SIZE_N), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BLOCK_SIZE_K
            a = a_desc.load([offs_m, offs_k])
            if B_K_MAJOR:
                b = b_desc.load([offs_n, offs_k]).T
            else:
                b = b_desc.load([offs_k, offs_n])
            if _widen_dot_operands():
                a, b = a.to(tl.float32), b.to(tl.float32)
            accumulator = tl.dot(a, b, accumulator, max_num_imprecise_acc=BLOCK_SIZE_K)
        if HAS_SCALES:
            accumulator = accumulator * scale
        if EPILOGUE_SUBTILE:
            acc = tl.reshape(accumulator, (BLOCK_SIZE_M, 2, BLOCK_SIZE_N // 2))
            acc = tl.permute(acc, (0, 2, 1))
            acc0, acc1 = tl.split(acc)
            c_desc.store([offs_m, offs_n], acc0.to(c_desc.dtype))
            c_desc.store([offs_m, offs_n + BLOCK_SIZE_N // 2], acc1.to(c_desc.dtype))
        else:
            c_desc.store([offs_m, offs_n], accumulator.to(c_desc.dtype))


# --------------------------------------------------------------------------- launchers

_FLOAT_DTYPES = ("float32", "float16", "bfloat16")
_FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")


def _torch_dtypes(names):
    import torch

    return tuple(getattr(torch, n) for n in names if hasattr(torch, n))


def _check_operands(kernel: str, a, b, dtypes) -> None:
    check_tensor(kernel, "a", a, dtypes=dtypes, ndim=2, last_dim_contiguous=False)
    check_tensor(kernel, "b", b, dtypes=dtypes, ndim=2, last_dim_contiguous=False)
    check_same_device(kernel, a=a, b=b)
    check_device_runs_triton(kernel, a)
    if a.dtype != b.dtype and not (a.dtype.itemsize == 1 and b.dtype.itemsize == 1):
        raise ValueError(f"{kernel}: a is {a.dtype} but b is {b.dtype}; cast one so they match")
    if a.shape[1] != b.shape[0]:
        raise ValueError(
            f"{kernel}: inner dimensions differ: a is {tuple(a.shape)}, b is {tuple(b.shape)} "
            f"(a.shape[1] must equal b.shape[0])"
        )
    for name, t in (("a", a), ("b", b)):
        if t.numel() and t.stride(0) != 1 and t.stride(1) != 1:
            raise ValueError(
                f"{kernel}: {name} has strides {t.stride()}; it must be row-major or column-major "
                f"(pass {name}.contiguous())"
            )


def _b_is_k_major(b) -> bool:
    """B stored column-major ([N, K] contiguous, transposed): K is its contiguous dimension."""
    return b.stride(1) != 1


def _tma_row_major_ok(t) -> bool:
    """A TMA descriptor needs a contiguous last dimension, 16-byte aligned base and rows."""
    return t.stride(1) == 1 and t.data_ptr() % 16 == 0 and (t.stride(0) * t.element_size()) % 16 == 0


def _tma_usable(a, b, c) -> bool:
    """The Hopper path: Triton has host TMA descriptors, an sm_90 GPU, 16-byte aligned rows."""
    import torch

    if TensorDescriptor is None or a.device.type != "cuda":
        return False
    if torch.cuda.get_device_capability(a.device)[0] != 9 or a.dtype == torch.float32:
        return False
    b_rows = b.t() if _b_is_k_major(b) else b
    return all(_tma_row_major_ok(t) for t in (a, b_rows, c))


def _num_sms(device) -> int:
    import torch

    return torch.cuda.get_device_properties(device).multi_processor_count


def _launch_pointer(a, b, c, scale_a=None, scale_b=None, *, config=None) -> None:
    """The pointer kernel with ``config`` (a tuning ``Config``); by default the config the tuning
    cache holds for this problem and GPU, else the autotuner over ``matmul_configs()``."""
    import torch

    M, K = a.shape
    N = b.shape[1]
    allow_tf32 = a.dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32
    has_scales = scale_a is not None
    if config is None and not has_scales and a.dtype in (torch.float16, torch.bfloat16):
        config = _tuned(M, N, K, a.dtype, a.device)
    grid = lambda meta: (triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"]),)
    # A config of our own goes to the @triton.jit function under the autotuner, untimed.
    launch = _matmul_kernel[grid] if config is None else _matmul_kernel.fn[grid]
    extra = {} if config is None else {**config.kernel_kwargs, **config.options}
    launch(
        a,
        b,
        c,
        scale_a if has_scales else c,
        scale_b if has_scales else c,
        M,
        N,
        K,
        a.stride(0),
        a.stride(1),
        b.stride(0),
        b.stride(1),
        c.stride(0),
        c.stride(1),
        HAS_SCALES=has_scales,
        ALLOW_TF32=allow_tf32,
        **extra,
    )


def _launch_tma_persistent(a, b, c, scale_a=None, scale_b=None, *, num_sms: int | None = None, config=None) -> None:
    """Hopper persistent TMA matmul. ``num_sms`` defaults to the device's SM count. ``config`` (a
    tuning ``Config``); by default the tuning cache's config for this problem and GPU, else the
    autotuner over ``tma_persistent_configs()``."""
    if TensorDescriptor is None:
        raise RuntimeError("this Triton has no triton.tools.tensor_descriptor; use the pointer path")
    M, K = a.shape
    N = b.shape[1]
    if num_sms is None:
        num_sms = _num_sms(a.device)
    b_k_major = _b_is_k_major(b)
    has_scales = scale_a is not None
    if config is None and not has_scales:
        config = _tuned_tma(M, N, K, a.dtype, a.device)
    a_desc = TensorDescriptor.from_tensor(a, [16, 16])
    b_desc = TensorDescriptor.from_tensor(b.t() if b_k_major else b, [16, 16])
    c_desc = TensorDescriptor.from_tensor(c, [16, 16])
    grid = lambda meta: (min(num_sms, triton.cdiv(M, meta["BLOCK_SIZE_M"]) * triton.cdiv(N, meta["BLOCK_SIZE_N"])),)
    args = dict(HAS_SCALES=has_scales, B_K_MAJOR=b_k_major, NUM_SMS=num_sms)
    if config is None:  # block shapes are placeholders; the autotune pre-hook sets them per config
        launch = _matmul_kernel_tma_persistent[grid]
    else:  # a config of our own: set the block shapes here, launch the @triton.jit function untimed
        args.update(config.kernel_kwargs)
        _tma_set_block_shapes({"a_desc": a_desc, "b_desc": b_desc, "c_desc": c_desc, **args})
        args.update(config.options)
        launch = _matmul_kernel_tma_persistent.fn[grid]
    launch(a_desc, b_desc, c_desc, scale_a if has_scales else c, scale_b if has_scales else c, M, N, K, **args)


def matmul(a, b, *, out_dtype=None):
    """``a @ b`` for 2-D fp32/fp16/bf16 tensors with fp32 accumulation.

    ``out_dtype`` defaults to the input dtype. A and B may each be row- or column-major.
    """
    import torch

    _check_operands("matmul", a, b, _torch_dtypes(_FLOAT_DTYPES))
    out_dtype = a.dtype if out_dtype is None else out_dtype
    if out_dtype not in _torch_dtypes(_FLOAT_DTYPES):
        raise ValueError(f"matmul: out_dtype {out_dtype} is not one of float32, float16, bfloat16")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=out_dtype)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    if _tma_usable(a, b, c):
        _launch_tma_persistent(a, b, c)
    else:
        _launch_pointer(a, b, c)
    return c


def matmul_fp8(a, b, scale_a, scale_b, *, out_dtype=None):
    """``(a @ b) * scale_a * scale_b`` for fp8 (e4m3/e5m2) a and b, fp32 accumulation.

    ``scale_a``/``scale_b`` are per-tensor fp32 scales (one element each), the convention of
    ``torch._scaled_mm``. ``out_dtype`` defaults to bfloat16. B is best column-major
    (``b = b_t.t()`` with ``b_t`` contiguous [N, K]).
    """
    import torch

    _check_operands("matmul_fp8", a, b, _torch_dtypes(_FP8_DTYPES))
    out_dtype = torch.bfloat16 if out_dtype is None else out_dtype
    if out_dtype not in _torch_dtypes(_FLOAT_DTYPES):
        raise ValueError(f"matmul_fp8: out_dtype {out_dtype} is not one of float32, float16, bfloat16")
    for name, s in (("scale_a", scale_a), ("scale_b", scale_b)):
        if not isinstance(s, torch.Tensor) or s.numel() != 1 or s.dtype != torch.float32:
            raise ValueError(
                f"matmul_fp8: {name} must be a one-element float32 tensor (a per-tensor scale), got {s!r:.60}"
            )
        if s.device != a.device:
            raise ValueError(f"matmul_fp8: {name} is on {s.device} but a is on {a.device}")
    M, K = a.shape
    N = b.shape[1]
    c = torch.empty((M, N), device=a.device, dtype=out_dtype)
    if M == 0 or N == 0:
        return c
    if K == 0:
        return c.zero_()
    scale_a, scale_b = scale_a.reshape(1), scale_b.reshape(1)
    if _tma_usable(a, b, c):
        _launch_tma_persistent(a, b, c, scale_a, scale_b)
    else:
        _launch_pointer(a, b, c, scale_a, scale_b)
    return c


# --------------------------------------------------------------------------- tuning (tesserabench tune)


def tuning_space(problem: Problem) -> ConfigSpace:
    """The pointer kernel's search space (``TUNABLE``; on Hopper matmul() runs ``TUNABLE_TMA``):
    wider than ``matmul_configs()``, which autotune times on every new shape;
    ``tesserabench tune kernels.matmul:TUNABLE`` prunes it statically."""
    return ConfigSpace(
        params={
            "BLOCK_SIZE_M": [64, 128, 256],
            "BLOCK_SIZE_N": [64, 128, 256],
            "BLOCK_SIZE_K": [32, 64, 128],
            "GROUP_SIZE_M": [8],
            "num_warps": [4, 8],
            "num_stages": [2, 3, 4, 5],
        },
        constraints=[
            # At most 128 fp32 accumulators per thread: twice that cannot fit 255 registers.
            "BLOCK_SIZE_M * BLOCK_SIZE_N <= 128 * 32 * num_warps",
            # The operand ring alone (num_stages - 1 buffers of A and B tiles) must fit; the
            # compiled figure, epilogue included, is checked by static pruning.
            "(num_stages - 1) * (BLOCK_SIZE_M + BLOCK_SIZE_N) * BLOCK_SIZE_K * itemsize <= shared_per_block",
            # Tiles far larger than the problem only waste work (as _prune_configs).
            "BLOCK_SIZE_M <= 2 * max(M, 16) and BLOCK_SIZE_N <= 2 * max(N, 16) and BLOCK_SIZE_K <= 2 * max(K, 16)",
        ],
    )


def _tuning_specialize(config, problem: Problem):
    """What Triton compiles for ``config`` on row-major operands, from stand-in tensors (the
    unused scale pointers as None: without HAS_SCALES the kernel never reads them)."""
    import torch

    from pytest_tesserabench.inspect import specialize
    from pytest_tesserabench.tuning.tunable import torch_dtype

    M, N, K = (problem.shape[n] for n in ("M", "N", "K"))
    x = torch.empty(16, 16, dtype=torch_dtype(problem.dtypes[0]))  # only dtype and alignment matter
    return specialize(
        _matmul_kernel,
        (x, x, x, None, None, M, N, K, K, 1, N, 1, N, 1),
        {"HAS_SCALES": False, "ALLOW_TF32": False, **config.kernel_kwargs, **config.options},
    )


def _tuning_work(config, problem: Problem) -> Work:
    M, N, K = (problem.shape[n] for n in ("M", "N", "K"))
    bm, bn = config["BLOCK_SIZE_M"], config["BLOCK_SIZE_N"]
    itemsize = problem.itemsize
    return Work(
        programs=triton.cdiv(M, bm) * triton.cdiv(N, bn),
        flops_per_program=2.0 * bm * bn * K,
        bytes_per_program=float((bm + bn) * K * itemsize + bm * bn * itemsize),
        precision=problem.dtypes[0],
    )


def _runner_for(launch):
    """``(problem, device) -> (config -> call)``: inputs allocated once, ``launch`` run with a config."""

    def runner(problem: Problem, device):
        import torch

        from pytest_tesserabench.tuning.tunable import torch_dtype

        M, N, K = (problem.shape[n] for n in ("M", "N", "K"))
        dtype = torch_dtype(problem.dtypes[0])
        a = torch.randn(M, K, device=device).to(dtype)
        b = torch.randn(K, N, device=device).to(dtype)
        c = torch.empty(M, N, device=device, dtype=dtype)
        return lambda config: lambda: launch(a, b, c, config=config)

    return runner


TUNABLE = Tunable(
    name="matmul",
    shape_names=("M", "N", "K"),
    dtypes=("fp16", "bf16"),
    kernel=lambda: _matmul_kernel,
    space=tuning_space,
    specialize=_tuning_specialize,
    work=_tuning_work,
    runner=_runner_for(_launch_pointer),
    default_problems=(Problem({"M": 4096, "N": 4096, "K": 4096}, ("bf16",)),),
)


def tma_tuning_space(problem: Problem) -> ConfigSpace:
    """The Hopper TMA persistent kernel's search space (sm_90 only: TMA needs Hopper)."""
    return ConfigSpace(
        params={
            "BLOCK_SIZE_M": [64, 128],
            "BLOCK_SIZE_N": [64, 128, 256],
            "BLOCK_SIZE_K": [64, 128],
            "GROUP_SIZE_M": [8],
            "EPILOGUE_SUBTILE": [False, True],
            "num_warps": [4, 8],
            "num_stages": [2, 3, 4, 5],
        },
        constraints=[
            "capability == 90",  # TMA descriptors and wgmma: Hopper
            "BLOCK_SIZE_M * BLOCK_SIZE_N <= 128 * 32 * num_warps",  # see tuning_space
            # num_stages buffers of A and B tiles (the Hopper pipeline keeps all of them).
            "num_stages * (BLOCK_SIZE_M + BLOCK_SIZE_N) * BLOCK_SIZE_K * itemsize <= shared_per_block",
            "BLOCK_SIZE_M <= 2 * max(M, 64) and BLOCK_SIZE_N <= 2 * max(N, 64)",
        ],
    )


# SMs of the GPU the TMA kernel is compiled for when no GPU is present (H100 SXM); NUM_SMS is a
# constexpr, so the live GPU's count gives its own binary, alike but for that constant.
_REFERENCE_SMS = 132


def _tma_tuning_specialize(config, problem: Problem):
    import torch

    from pytest_tesserabench.inspect import specialize
    from pytest_tesserabench.tuning.tunable import torch_dtype

    M, N, K = (problem.shape[n] for n in ("M", "N", "K"))
    bm, bn, bk = (config[k] for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K"))
    x = torch.empty(16, dtype=torch_dtype(problem.dtypes[0]))  # only dtype and alignment matter

    def descriptor(shape, block):
        return TensorDescriptor(x, shape, [shape[1], 1], block)

    c_block = [bm, bn // 2] if config["EPILOGUE_SUBTILE"] else [bm, bn]
    descriptors = (descriptor([M, K], [bm, bk]), descriptor([K, N], [bk, bn]), descriptor([M, N], c_block))
    return specialize(
        _matmul_kernel_tma_persistent,
        (*descriptors, None, None, M, N, K),
        {
            "HAS_SCALES": False,
            "B_K_MAJOR": False,
            "NUM_SMS": _REFERENCE_SMS,
            **config.kernel_kwargs,
            **config.options,
        },
    )


#: What matmul() runs on Hopper for fp16/bf16 with 16-byte aligned rows.
TUNABLE_TMA = Tunable(
    name="matmul_tma",
    shape_names=("M", "N", "K"),
    dtypes=("fp16", "bf16"),
    kernel=lambda: _matmul_kernel_tma_persistent,
    space=tma_tuning_space,
    specialize=_tma_tuning_specialize,
    work=_tuning_work,
    runner=_runner_for(_launch_tma_persistent),
    default_problems=(Problem({"M": 4096, "N": 4096, "K": 4096}, ("bf16",)),),
)


def _tuned_tma(M, N, K, dtype, device):
    return tuned_config(TUNABLE_TMA, {"M": M, "N": N, "K": K}, (dtype_name(dtype),), device)


def _tuned(M, N, K, dtype, device):
    """The tuning cache's measured config for this problem on this GPU, or None (no GPU, no entry)."""
    return tuned_config(TUNABLE, {"M": M, "N": N, "K": K}, (dtype_name(dtype),), device)


# --------------------------------------------------------------------------- references, models


def reference(a, b, *, out_dtype=None):
    """``a @ b`` computed in fp64 on the inputs' values, cast to ``out_dtype`` (default a's)."""
    out_dtype = a.dtype if out_dtype is None else out_dtype
    return (a.double() @ b.double()).to(out_dtype)


def reference_fp8(a, b, scale_a, scale_b, *, out_dtype=None):
    import torch

    out_dtype = torch.bfloat16 if out_dtype is None else out_dtype
    scale = scale_a.double().reshape(()) * scale_b.double().reshape(())
    return ((a.double() @ b.double()) * scale).to(out_dtype)


def flops(M: int, N: int, K: int) -> int:
    return 2 * M * N * K


def bytes(M: int, N: int, K: int, itemsize: int, out_itemsize: int | None = None) -> int:
    """Compulsory traffic: read A and B once, write C once."""
    out_itemsize = itemsize if out_itemsize is None else out_itemsize
    return (M * K + K * N) * itemsize + M * N * out_itemsize


#: (M, N, K) worth testing for correctness: edges, primes, sizes no block divides.
CORRECTNESS_SHAPES = [
    (1, 1, 1),
    (1, 64, 32),
    (17, 13, 29),
    (31, 97, 65),
    (64, 64, 64),
    (100, 37, 131),
]

#: LLM projection shapes (tokens, out features, in features): Llama-3-8B/70B QKV, MLP, output.
LLM_SHAPES = [
    (4096, 6144, 4096),  # 8B fused QKV
    (4096, 28672, 4096),  # 8B gate+up
    (4096, 4096, 14336),  # 8B down
    (8192, 10240, 8192),  # 70B fused QKV
    (8192, 8192, 28672),  # 70B down
]


__all__ = [
    "matmul",
    "matmul_fp8",
    "reference",
    "reference_fp8",
    "flops",
    "bytes",
    "matmul_configs",
    "tma_persistent_configs",
    "tuning_space",
    "tma_tuning_space",
    "TUNABLE",
    "TUNABLE_TMA",
    "CORRECTNESS_SHAPES",
    "LLM_SHAPES",
]
