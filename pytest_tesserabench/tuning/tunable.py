"""What the tuner needs to know about one kernel: a ``Tunable``.

A kernel module declares one (``kernels/matmul.py: TUNABLE``) and ``tesserabench tune
kernels.matmul:TUNABLE`` finds it. It says, for a ``Problem`` (sizes and dtypes):

* ``space(problem)``: the declared config space (``space.ConfigSpace``);
* ``specialize(config, problem)``: the ``inspect.KernelLaunch`` Triton would compile for that
  config, built from stand-in tensors (no GPU, nothing launched): static pruning compiles it;
* ``work(config, problem)``: programs launched and each one's flops and bytes, for the static
  estimate (``estimate.py``);
* ``runner(problem, device)``: allocates the inputs once and returns ``config -> call``, a
  zero-argument launch of that config (the GPU timing);
* ``kernel()``: the ``@triton.jit`` function whose source (and the ``@triton.jit`` functions it
  calls) keys the cache.

Nothing here imports torch or triton.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .space import Config, ConfigSpace

# Short dtype names (as precision.py spells storage) -> torch attribute, and element size.
DTYPES: dict[str, tuple[str, int]] = {
    "fp32": ("float32", 4),
    "fp16": ("float16", 2),
    "bf16": ("bfloat16", 2),
    "fp8_e4m3": ("float8_e4m3fn", 1),
    "fp8_e5m2": ("float8_e5m2", 1),
}
_TORCH_NAMES = {torch_name: short for short, (torch_name, _) in DTYPES.items()}


class TunableError(ValueError):
    """A problem or a tunable that cannot be used as given; the message names the fix."""


def dtype_name(dtype: Any) -> str:
    """``torch.bfloat16`` (or ``"bfloat16"``, ``"bf16"``) -> ``"bf16"``."""
    text = str(dtype).replace("torch.", "")
    if text in DTYPES:
        return text
    if text in _TORCH_NAMES:
        return _TORCH_NAMES[text]
    raise TunableError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)}")


def torch_dtype(name: str):
    import torch  # ~1.2 s, the optional GPU stack: a kernel module imports this one at its top

    return getattr(torch, DTYPES[name][0])


@dataclass(frozen=True)
class Problem:
    """Sizes (name -> int; flags such as ``causal`` are 0/1) and operand dtypes."""

    shape: Mapping[str, int]
    dtypes: tuple[str, ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "shape", dict(self.shape))
        object.__setattr__(self, "dtypes", tuple(dtype_name(d) for d in self.dtypes))

    @property
    def itemsize(self) -> int:
        return DTYPES[self.dtypes[0]][1]

    def context(self) -> dict[str, Any]:
        """Names a constraint may use: the sizes, ``itemsize``, and ``dtype`` (the short name)."""
        return {**self.shape, "itemsize": self.itemsize, "dtype": self.dtypes[0]}

    def label(self) -> str:
        sizes = ",".join(f"{k}={v}" for k, v in self.shape.items())
        return f"{sizes} {'/'.join(self.dtypes)}"

    def to_json(self) -> dict[str, Any]:
        return {"shape": dict(self.shape), "dtypes": list(self.dtypes)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Problem:
        return cls(shape=dict(data["shape"]), dtypes=tuple(data["dtypes"]))


@dataclass(frozen=True)
class Work:
    """What one launch of a config does, for the static estimate."""

    programs: int  # grid size
    flops_per_program: float
    bytes_per_program: float  # loads and stores of one program's tiles
    precision: str  # peak key: fp32, tf32, fp16, bf16, fp8


def power_of_two_bucket(problem: Problem) -> dict[str, int]:
    """Each size rounded up to a power of two (0 and 1 stay): one tuned entry serves every
    shape of its bucket, as 3000 and 4096 rows usually want the same tiles."""
    return {name: value if value <= 1 else 1 << (int(value) - 1).bit_length() for name, value in problem.shape.items()}


@dataclass(frozen=True, eq=False)  # identity: lookups memoise per tunable
class Tunable:
    name: str  # the cache's kernel name
    shape_names: tuple[str, ...]
    dtypes: tuple[str, ...]  # accepted dtype names
    kernel: Callable[[], Any]
    space: Callable[[Problem], ConfigSpace]
    specialize: Callable[[Config, Problem], Any]
    work: Callable[[Config, Problem], Work]
    runner: Callable[[Problem, Any], Callable[[Config], Callable[[], Any]]] | None = None
    default_problems: tuple[Problem, ...] = ()
    bucket: Callable[[Problem], Mapping[str, int]] = power_of_two_bucket
    ref: str | None = field(default=None, compare=False)  # "module:NAME", set by load_tunable

    def problem(self, shape: Mapping[str, int], dtypes: tuple[str, ...]) -> Problem:
        """A validated problem for this kernel."""
        missing = [n for n in self.shape_names if n not in shape]
        extra = [n for n in shape if n not in self.shape_names]
        if missing or extra:
            raise TunableError(
                f"{self.name} takes the sizes {','.join(self.shape_names)}"
                + (f"; missing {','.join(missing)}" if missing else "")
                + (f"; unknown {','.join(extra)}" if extra else "")
                + f" (e.g. --shape {','.join(f'{n}=...' for n in self.shape_names)})"
            )
        for name, value in shape.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise TunableError(f"{self.name}: size {name}={value!r} must be an integer >= 0")
        names = tuple(dtype_name(d) for d in dtypes)
        unsupported = [d for d in names if d not in self.dtypes]
        if not names or unsupported:
            raise TunableError(
                f"{self.name} is tuned for the dtypes {', '.join(self.dtypes)}; got {', '.join(names) or 'none'}"
            )
        return Problem(shape={n: shape[n] for n in self.shape_names}, dtypes=names)


def parse_shape(text: str) -> dict[str, int]:
    """``"M=4096,N=4096,K=4096"`` -> ``{"M": 4096, ...}``; one clear error for anything else."""
    shape: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, equals, value = item.partition("=")
        name, value = name.strip(), value.strip()
        if not equals or not name.isidentifier():
            raise TunableError(f"--shape item {item!r}: expected NAME=INTEGER, e.g. M=4096")
        try:
            shape[name] = int(value.replace("_", ""))
        except ValueError:
            raise TunableError(f"--shape {name}={value!r}: not an integer") from None
    if not shape:
        raise TunableError(f"--shape {text!r} names no size; e.g. --shape M=4096,N=4096,K=4096")
    return shape


def load_tunable(ref: str) -> Tunable:
    """``"kernels.matmul:TUNABLE"`` (or ``path/to/file.py:NAME``) -> the Tunable it names."""
    # inspect.cli brings the static analysis (~23 modules, ~25 ms): only where a Tunable is loaded by name,
    # not in the kernel modules that import this one at their top (kernels/matmul.py)
    from pytest_tesserabench.inspect.cli import UsageError, load_object

    try:
        obj = load_object(ref, kind=(Tunable,), what="Tunables")
    except UsageError as error:
        raise TunableError(str(error)) from None
    if not isinstance(obj, Tunable) and hasattr(obj, "configs") and hasattr(obj, "fn"):
        raise TunableError(
            f"{ref} is an @triton.autotune kernel: declare a Tunable for it beside it, "
            "TUNABLE = pytest_tesserabench.tuning.from_autotune(kernel, shape_names=..., inputs=..., grid=...) "
            "(docs/tuning.md, 'A kernel you already autotune'), and tune MODULE:TUNABLE"
        )
    if not isinstance(obj, Tunable):
        raise TunableError(
            f"{ref} is a {type(obj).__name__}, not a pytest_tesserabench.tuning.Tunable "
            "(a kernel module declares one, e.g. kernels.matmul:TUNABLE)"
        )
    if obj.ref is None:
        object.__setattr__(obj, "ref", ref)
    return obj


__all__ = [
    "DTYPES",
    "Problem",
    "Tunable",
    "TunableError",
    "Work",
    "dtype_name",
    "load_tunable",
    "parse_shape",
    "power_of_two_bucket",
    "torch_dtype",
]
