"""A ``Tunable`` from a kernel a project already tunes with ``@triton.autotune``.

    @triton.autotune(configs=[triton.Config({"BLOCK": 256}, num_warps=4), ...], key=["n"])
    @triton.jit
    def add_kernel(x, y, out, n, BLOCK: tl.constexpr): ...

    TUNABLE = from_autotune(
        add_kernel,
        shape_names=("n",),
        inputs=lambda problem, device: ...,          # the kernel's arguments for a problem
        grid=lambda problem, meta: (triton.cdiv(problem.shape["n"], meta["BLOCK"]),),
        shape_of=lambda args: {"n": args["n"]},      # a launch's problem, from its arguments
        default_problems=(Problem({"n": 1 << 24}, ("fp32",)),),
    )

The autotuner's configs are the space; ``tesserabench tune module:TUNABLE`` prunes them
statically (no GPU), times what is left on a GPU and caches the winner. ``from_autotune`` also
hands the autotuner an ``early_config_prune`` that, for a launch whose problem (``shape_of``) has
a measured entry in the tuning cache on this GPU, leaves that one config: Triton then launches it
without timing any (its own pruning, if it had one, runs otherwise). The kernel's launches stay as
they are: ``add_kernel[grid](x, y, out, n)``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any

from pytest_tesserabench.inspect.capture import jit_function_for
from pytest_tesserabench.inspect.capture import specialize as specialize_launch

from . import lookup
from .space import Config, ConfigList
from .tunable import Problem, Tunable, TunableError, Work, dtype_name

_DEFAULT_OPTIONS = {"num_ctas": 1, "maxnreg": None}


def autotune_configs(kernel) -> list[dict[str, Any]]:
    """The autotuner's configs as plain dicts: the constexprs, then the launch options that differ
    from Triton's defaults (num_warps and num_stages always)."""
    configs = getattr(kernel, "configs", None)
    if not configs:
        raise TunableError(
            f"{getattr(kernel, '__name__', kernel)!r} is not an @triton.autotune kernel with configs; "
            "give the object @triton.autotune(configs=[...], key=[...]) returned"
        )
    return [_values(config) for config in configs]


def _values(config) -> dict[str, Any]:
    """A ``triton.Config`` as a plain dict (autotune_configs)."""
    values = dict(config.kwargs)
    values["num_warps"], values["num_stages"] = config.num_warps, config.num_stages
    for option, default in _DEFAULT_OPTIONS.items():
        value = getattr(config, option, default)
        if value != default:
            values[option] = value
    return values


def from_autotune(
    kernel,
    *,
    shape_names: tuple[str, ...],
    inputs: Callable[[Problem, Any], tuple[tuple, Mapping[str, Any]] | tuple],
    grid: Callable[[Problem, Mapping[str, Any]], tuple],
    shape_of: Callable[[Mapping[str, Any]], Mapping[str, int]] | None = None,
    dtypes: tuple[str, ...] = ("fp32", "fp16", "bf16"),
    default_problems: tuple[Problem, ...] = (),
    flops: Callable[[Problem], float] | None = None,
    bytes: Callable[[Problem], float] | None = None,  # noqa: A002 - as bench(..., bytes=) names it
    name: str | None = None,
) -> Tunable:
    """The Tunable of an ``@triton.autotune`` kernel (the module's docstring). ``inputs(problem,
    device)``: the kernel's positional arguments (and keyword arguments, as a pair), tensors on
    ``device`` (``"cpu"`` for the static analysis: only their dtype and alignment are read);
    ``grid(problem, meta)``: the launch grid for a config's values; ``shape_of(args)``: a launch's
    sizes from its arguments by name (without it, the tuned config is not applied at launch);
    ``flops``/``bytes``: the work of one launch, for the static estimate."""

    configs = autotune_configs(kernel)
    jit = jit_function_for(kernel)  # what Triton compiles
    launcher = kernel.fn  # what the autotuner launches (the interpreter's wrapper under TRITON_INTERPRET)
    kernel_name = name or jit.__name__

    def arguments(problem: Problem, device) -> tuple[tuple, dict]:
        made = inputs(problem, device)
        if isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], Mapping):
            return tuple(made[0]), dict(made[1])
        return tuple(made), {}

    def specialize(config: Config, problem: Problem):
        args, kwargs = arguments(problem, "cpu")
        return specialize_launch(jit, args, {**kwargs, **config.kernel_kwargs, **config.options})

    def work(config: Config, problem: Problem) -> Work:
        programs = max(math.prod(grid(problem, dict(config))), 1)
        return Work(
            programs=programs,
            flops_per_program=(flops(problem) if flops else 0.0) / programs,
            bytes_per_program=(bytes(problem) if bytes else 0.0) / programs,
            precision=problem.dtypes[0],
        )

    def runner(problem: Problem, device):
        args, kwargs = arguments(problem, device)

        def call_for(config: Config):
            def launch():
                return launcher[lambda meta: grid(problem, meta)](
                    *args, **kwargs, **config.kernel_kwargs, **config.options
                )

            return launch

        return call_for

    tunable = Tunable(
        name=kernel_name,
        shape_names=tuple(shape_names),
        dtypes=tuple(dtype_name(d) for d in dtypes),
        kernel=lambda: jit,
        space=lambda problem: ConfigList(configs),
        specialize=specialize,
        work=work,
        runner=runner,
        default_problems=tuple(default_problems),
    )
    if shape_of is not None:
        kernel.early_config_prune = _tuned_prune(tunable, shape_of, getattr(kernel, "early_config_prune", None))
    return tunable


def _tuned_prune(tunable: Tunable, shape_of, own_prune):
    """Triton's ``early_config_prune``: the cached config alone where the tuning cache has a
    measured one for this launch on this GPU, else the kernel's own pruning (or every config)."""

    def prune(configs, named_args, **kwargs):
        arguments = {**named_args, **kwargs}
        tensor = next(
            (value for value in arguments.values() if hasattr(value, "dtype") and hasattr(value, "device")), None
        )
        if tensor is not None:
            try:
                config = lookup.tuned_config(
                    tunable, dict(shape_of(arguments)), (dtype_name(tensor.dtype),), tensor.device
                )
            except TunableError:
                config = None
            if config is not None:
                chosen = [c for c in configs if _values(c) == dict(config)]
                if chosen:
                    return chosen[:1]
        return own_prune(configs, named_args, **kwargs) if own_prune is not None else configs

    return prune
