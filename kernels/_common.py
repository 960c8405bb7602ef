"""Helpers shared by the kernel modules: input validation, interpreter detection, AOT compiles.

Nothing here imports torch or triton at module import time, and nothing queries a device.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from typing import Any


def is_interpreting() -> bool:
    """True when Triton kernels run in the CPU interpreter (``TRITON_INTERPRET=1``)."""
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "on", "yes")


@functools.cache
def interpreting_at_trace_time() -> Any:
    """A ``@triton.constexpr_function`` telling a kernel, while it is traced, whether it runs in
    the CPU interpreter. At module level ``_widen = interpreting_at_trace_time()``, then
    ``if _widen():`` in the ``@triton.jit`` body.

    Use it instead of a module constant such as ``tl.constexpr(is_interpreting())`` for
    interpreter-only workarounds. A constant is fixed when the module is imported, so a kernel
    captured under the interpreter and then compiled for a GPU target (static analysis,
    ``pytest_tesserabench.inspect``) would keep the workaround. This reads Triton's own flag
    (``triton.knobs.runtime.interpret``, set from ``TRITON_INTERPRET``) when the kernel is
    traced: True in the interpreter, a compile-time False in every compile, so the branch
    costs nothing on a GPU. Built on first use, so importing this module imports no Triton.
    """
    import triton

    def interpreting() -> bool:
        return bool(triton.knobs.runtime.interpret)

    return triton.constexpr_function(interpreting)


def next_power_of_2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


def as_rows(x):
    """``x`` viewed as [rows, cols] with unit column stride, and an empty output of that shape."""
    import torch

    n_cols = x.shape[-1]
    x2 = x.reshape(-1, n_cols) if n_cols else x.reshape(-1, 0)
    if x2.numel() and x2.stride(-1) != 1:
        x2 = x2.contiguous()
    return x2, torch.empty(x2.shape, dtype=x.dtype, device=x.device)


def row_num_warps(block: int) -> int:
    """Warps for a program that owns one row chunk of ``block`` elements (row kernels)."""
    if block <= 1024:
        return 4
    if block <= 4096:
        return 8
    return 16


def persistent_row_programs(n_rows: int, num_warps: int, device) -> int:
    """Persistent grid: as many programs as the SMs hold at once (64 warps each), at most one per row."""
    if device.type != "cuda":
        return n_rows
    import torch

    sms = torch.cuda.get_device_properties(device).multi_processor_count
    return max(1, min(n_rows, sms * max(1, 64 // num_warps)))


def check_tensor(
    kernel: str,
    name: str,
    tensor: Any,
    *,
    dtypes: Iterable[Any],
    ndim: int | Iterable[int] | None = None,
    last_dim_contiguous: bool = True,
) -> None:
    """Raise ValueError naming ``kernel``, the argument and the fix when ``tensor`` is unfit."""
    import torch

    if not isinstance(tensor, torch.Tensor):
        raise ValueError(f"{kernel}: {name} must be a torch.Tensor, got {type(tensor).__name__}")
    dtypes = tuple(dtypes)
    if tensor.dtype not in dtypes:
        allowed = ", ".join(str(d).replace("torch.", "") for d in dtypes)
        raise ValueError(
            f"{kernel}: {name} has dtype {str(tensor.dtype).replace('torch.', '')}; "
            f"supported: {allowed} (convert with {name}.to(...))"
        )
    if ndim is not None:
        allowed_ndims = (ndim,) if isinstance(ndim, int) else tuple(ndim)
        if tensor.dim() not in allowed_ndims:
            raise ValueError(
                f"{kernel}: {name} must have {' or '.join(map(str, allowed_ndims))} dimensions, "
                f"got shape {tuple(tensor.shape)}"
            )
    if last_dim_contiguous and tensor.dim() > 0 and tensor.shape[-1] > 1 and tensor.stride(-1) != 1:
        raise ValueError(
            f"{kernel}: {name} must be contiguous in its last dimension (stride {tensor.stride()}); "
            f"pass {name}.contiguous()"
        )


def check_same_device(kernel: str, **tensors: Any) -> None:
    devices = {name: t.device for name, t in tensors.items()}
    if len(set(devices.values())) > 1:
        listing = ", ".join(f"{name} on {dev}" for name, dev in devices.items())
        raise ValueError(f"{kernel}: all tensors must be on one device, got {listing}")


def check_device_runs_triton(kernel: str, tensor: Any) -> None:
    """Triton runs on CUDA tensors, or on CPU tensors under the interpreter."""
    if tensor.device.type == "cuda":
        return
    if tensor.device.type == "cpu" and is_interpreting():
        return
    raise ValueError(
        f"{kernel}: tensors on {tensor.device} cannot run Triton kernels; move them to a CUDA "
        f"device, or set TRITON_INTERPRET=1 before importing triton to use the CPU interpreter"
    )


def compile_for_target(
    jit_fn: Any,
    signature: Mapping[str, str],
    constexprs: Mapping[str, Any],
    *,
    arch: int = 90,
    num_warps: int = 4,
    num_stages: int = 3,
    aligned: Iterable[str] | None = None,
) -> Any:
    """Compile a ``@triton.jit`` kernel ahead of time for ``sm_<arch>``; no GPU needed.

    ``signature`` maps every argument to its Triton type (``"*fp16"``, ``"i32"``,
    ``"tensordesc<bf16[128,64]>"``) or ``"constexpr"``; ``constexprs`` gives the constexpr values.
    ``aligned`` names the arguments known to be multiples of 16 (pointers: 16-byte aligned), as
    the launcher specialises them at run time; None means every pointer and integer argument,
    the case of power-of-two LLM shapes. Without it loads cannot be vectorised or pipelined.
    Under ``TRITON_INTERPRET=1`` ``@triton.jit`` yields an InterpretedFunction, which cannot be
    compiled, so a JITFunction is rebuilt from its Python function.
    """
    import inspect

    import triton
    from triton.backends.compiler import GPUTarget
    from triton.runtime.jit import JITFunction

    fn = jit_fn
    # Autotuner and heuristics wrappers keep the kernel in .fn, an InterpretedFunction keeps
    # the plain Python function there.
    while not isinstance(fn, JITFunction) and not inspect.isfunction(fn):
        if not hasattr(fn, "fn"):
            raise TypeError(f"compile_for_target: {jit_fn!r} is not a triton.jit kernel")
        fn = fn.fn
    if inspect.isfunction(fn):
        fn = JITFunction(fn)
    target = GPUTarget("cuda", arch, 32)
    options = {"num_warps": num_warps, "num_stages": num_stages}
    if aligned is None:
        aligned = [k for k, t in signature.items() if t.startswith("*") or t in ("i32", "i64")]
    attrs = {(fn.arg_names.index(k),): [["tt.divisibility", 16]] for k in aligned}
    try:
        source = triton.compiler.ASTSource(fn=fn, signature=dict(signature), constexprs=dict(constexprs), attrs=attrs)
    except (TypeError, ValueError, AttributeError):
        # Older spellings key constexprs by argument position tuples.
        by_index = {(fn.arg_names.index(k),): v for k, v in constexprs.items()}
        source = triton.compiler.ASTSource(fn=fn, signature=dict(signature), constexprs=by_index, attrs=attrs)
    return triton.compile(source, target=target, options=options)
