"""Precision policies: what a kernel stores, how it accumulates, and how close it must be.

Grammar: ``<storage>[@accum(<accum>)]``; storage in fp64, fp32, tf32, fp16, bf16, fp8_e4m3,
fp8_e5m2; accum fp32 (the default; fp64's own for fp64), fp16 or fp64. ``Precision.parse("bf16")``,
``Precision.parse("fp16@accum(fp16)")``.
Torch is imported only when a torch dtype is asked for.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

# storage -> (itemsize in bytes, torch dtype name, minimum compute capability, rtol, atol)
# Tolerances are for outputs against a reference computed in fp32/fp64 and follow the unit roundoff
# of the storage type; atol is at least the accumulator's atol times the reference's rms magnitude
# (accuracy.py), so long reductions (a matmul's K in the thousands) are held to the same rule.
_STORAGE = {
    "fp32": (4, "float32", (0, 0), 1e-4, 1e-5),
    "tf32": (4, "float32", (8, 0), 1e-2, 1e-2),
    "fp16": (2, "float16", (0, 0), 1e-2, 1e-2),
    "bf16": (2, "bfloat16", (8, 0), 3e-2, 3e-2),
    "fp8_e4m3": (1, "float8_e4m3fn", (8, 9), 1e-1, 1e-1),
    "fp8_e5m2": (1, "float8_e5m2", (8, 9), 2e-1, 2e-1),
    # fp64 (numpy's default; unit roundoff 1.1e-16): another summation order passes, a kernel that
    # computes in fp32 underneath (errors near 1e-7 of the magnitude) fails
    "fp64": (8, "float64", (0, 0), 1e-12, 1e-13),
}
_ACCUM = {"fp32": "float32", "fp16": "float16", "fp64": "float64"}


def default_accum(storage: str) -> str:
    """The accumulator a policy that names none has: fp32, or fp64 for fp64 storage."""
    return "fp64" if storage == "fp64" else "fp32"


_GRAMMAR = re.compile(r"^(?P<storage>[a-z0-9_]+)(?:@accum\((?P<accum>[a-z0-9_]+)\))?$")


def policy_of_dtype(name: str) -> str | None:
    """The storage policy a torch dtype name stands for (float32 -> fp32, bfloat16 -> bf16), the
    first in _STORAGE's order (fp32 before tf32, which stores the same type); None for one no
    policy stores (an integer or complex type)."""
    return next((storage for storage, spec in _STORAGE.items() if spec[1] == name), None)


class PrecisionError(ValueError):
    """An unknown or malformed precision policy."""


@dataclass(frozen=True)
class Precision:
    storage: str
    accum: str = ""  # "": the storage's default (default_accum)

    def __post_init__(self) -> None:
        if not self.accum:
            object.__setattr__(self, "accum", default_accum(self.storage))

    @classmethod
    def parse(cls, text: str | Precision) -> Precision:
        if isinstance(text, Precision):
            return text
        match = _GRAMMAR.match(str(text).strip().lower())
        if not match:
            raise PrecisionError(
                f"precision {text!r} does not match <storage>[@accum(<accum>)], e.g. 'bf16' or 'fp8_e4m3@accum(fp32)'"
            )
        storage, accum = match["storage"], match["accum"] or default_accum(match["storage"])
        if storage not in _STORAGE:
            close = difflib.get_close_matches(storage, _STORAGE, n=1)
            guess = f" (did you mean {close[0]!r}?)" if close else ""
            raise PrecisionError(
                f"unknown storage type {storage!r} in precision {text!r}{guess}; choose one of {', '.join(_STORAGE)}"
            )
        if accum not in _ACCUM:
            raise PrecisionError(
                f"unknown accumulator {accum!r} in precision {text!r}; choose one of {', '.join(_ACCUM)}"
            )
        return cls(storage, accum)

    def __str__(self) -> str:
        return self.storage if self.accum == default_accum(self.storage) else f"{self.storage}@accum({self.accum})"

    @property
    def itemsize(self) -> int:
        return _STORAGE[self.storage][0]

    @property
    def is_fp8(self) -> bool:
        return self.storage.startswith("fp8")

    @property
    def rtol(self) -> float:
        """The storage's, or the accumulator's where that is coarser (fp16 accumulation, fp64
        storage summed in fp32)."""
        return max(_STORAGE[self.storage][3], _STORAGE[self.accum][3])

    @property
    def atol(self) -> float:
        return max(_STORAGE[self.storage][4], _STORAGE[self.accum][4])

    @property
    def dtype(self):
        """The torch storage dtype (tf32 is stored as float32)."""
        import torch  # ~1.2 s, the optional GPU stack: the package imports this module (__init__)

        return getattr(torch, _STORAGE[self.storage][1])

    @property
    def accum_dtype(self):
        import torch

        return getattr(torch, _ACCUM[self.accum])

    @property
    def min_capability(self) -> tuple[int, int]:
        return _STORAGE[self.storage][2]

    def unsupported_reason(self, capability: tuple[int, int] | None) -> str | None:
        """Why a device of this compute capability cannot run the policy (None: it can).

        ``capability`` None means no GPU: kernels run on the CPU or in the Triton interpreter,
        which emulate every type.
        """
        if capability is None:
            return None
        if tuple(capability) < self.min_capability:
            need = "sm_{}{}".format(*self.min_capability)
            have = "sm_{}{}".format(*capability)
            return f"precision {self} needs {need} or newer; this GPU is {have}"
        return None


def known_storage_types() -> tuple[str, ...]:
    return tuple(_STORAGE)
