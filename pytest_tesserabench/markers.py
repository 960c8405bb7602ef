"""The markers as plain Python: ``bench_sizes`` and ``bench_precision`` turned into parameters.

plugin.py hands each marker here and turns a ``MarkerError`` into a collection error naming the
test; nothing here talks to pytest.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from typing import Any

from pytest_tesserabench.measure.precision import Precision, PrecisionError

MARKERS = (
    "bench_sizes(**axes) or bench_sizes([{...}, ...]): parametrize a benchmark over sizes; "
    "the cartesian product of the axes, or explicit points",
    "bench_precision(*policies): parametrize the argument `precision` with Precision policies, "
    "grammar <storage>[@accum(<accum>)], e.g. 'bf16', 'fp8_e4m3@accum(fp32)'",
    "bench(group=, max_time=, min_rounds=, warmup=, timeout=, target_ci=, threshold=, timer=): "
    "per-test measurement overrides",
    "bench_mesh(*dims) or bench_mesh(**sizes): parametrize the `mesh` argument with device meshes: every "
    "layout of the world over the named dimensions, or one shape (-1: the rest)",
)


class MarkerError(ValueError):
    """A marker written wrongly; the message says how to write it."""


def size_parameters(
    args: tuple, kwargs: dict[str, Any], where: str, arguments: Iterable[str]
) -> tuple[list[str], list[tuple], list[str]]:
    """(names, points, ids) for ``@pytest.mark.bench_sizes`` on the test ``where``."""
    prefix = f"@pytest.mark.bench_sizes on {where}"
    if args and kwargs:
        raise MarkerError(
            f"{prefix}: give either axes (M=[...], N=[...]) or a list of points ([{{'M': 1, 'N': 2}}, ...]), not both"
        )
    if kwargs:
        names = list(kwargs)
        axes = []
        for name in names:
            values = kwargs[name]
            values = list(values) if isinstance(values, (list, tuple, range)) else [values]
            if not values:
                raise MarkerError(f"{prefix}: axis {name} has no values")
            axes.append(values)
        points = list(itertools.product(*axes))
    elif (
        len(args) == 1 and isinstance(args[0], (list, tuple)) and args[0] and all(isinstance(p, dict) for p in args[0])
    ):
        names = list(args[0][0])
        for i, point in enumerate(args[0]):
            if set(point) != set(names):
                raise MarkerError(
                    f"{prefix}: point {i} has keys {sorted(point)}, point 0 has {sorted(names)}; "
                    "every point needs the same keys"
                )
        points = [tuple(p[n] for n in names) for p in args[0]]
    else:
        raise MarkerError(
            f"{prefix}: expected axes like bench_sizes(M=[1024, 4096]) or points like "
            f"bench_sizes([{{'M': 1024}}, ...]), got {args!r}"
        )
    missing = [n for n in names if n not in set(arguments)]
    if missing:
        one = len(missing) == 1
        raise MarkerError(
            f"{prefix}: {', '.join(missing)} {'is not an argument' if one else 'are not arguments'} of the test; "
            f"add {'it' if one else 'them'} to its signature or remove from the marker"
        )
    ids = ["-".join(param_id(n, v) for n, v in zip(names, point)) for point in points]
    return names, points, ids


# Characters pytest's -k expression takes inside a name (besides letters, digits and "_"); any
# other character of a value becomes "_". "-" is kept for the separator between parameters.
_K_UNSAFE = re.compile(r"[^A-Za-z0-9_.+]")


def param_id(name: str, value: Any) -> str:
    """One parameter's part of a generated test id, in a form ``pytest -k`` accepts.

    The form keys baselines, so it is stable (docs/usage.md, "Test ids"): a number follows its
    name directly (``M4096``, ``scale0.5``, ``shift-1``), or after ``_`` when the name ends in a
    digit (``D2_64``); any other value follows ``_`` with unsafe characters as ``_``
    (``layout_row_major``, ``causal_True``).
    """
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        joint = "_" if name[-1:].isdigit() else ""
        return f"{_K_UNSAFE.sub('_', name)}{joint}{value!r}"
    return f"{_K_UNSAFE.sub('_', name)}_{_K_UNSAFE.sub('_', str(value))}"


def precision_id(policy: Precision) -> str:
    """A policy in a test id: ``bf16``, ``fp8_e4m3``; a non-default accumulator as
    ``fp16_accum_fp16`` (the grammar's ``@accum(...)`` is not something ``-k`` can type)."""
    return policy.storage if str(policy) == policy.storage else f"{policy.storage}_accum_{policy.accum}"


def precision_parameters(args: tuple, where: str, arguments: Iterable[str]) -> list[Precision]:
    """The policies of ``@pytest.mark.bench_precision`` on the test ``where``."""
    prefix = f"@pytest.mark.bench_precision on {where}"
    if "precision" not in set(arguments):
        raise MarkerError(f"{prefix}: the test has no `precision` argument; add one to its signature")
    if not args:
        raise MarkerError(f"{prefix}: name at least one policy, e.g. 'bf16'")
    try:
        return [Precision.parse(p) for p in args]
    except PrecisionError as exc:
        raise MarkerError(f"{prefix}: {exc}") from None


def record_params(callspec_params: dict[str, Any]) -> dict[str, Any]:
    """A test's parameters as JSON scalars for its records (policies by name, objects by repr)."""
    params = {k: (str(v) if isinstance(v, Precision) else v) for k, v in callspec_params.items()}
    return {k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v) for k, v in params.items()}
