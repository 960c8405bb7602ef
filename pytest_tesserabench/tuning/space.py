"""A declared config space: named parameters with their values, and constraints between them.

A parameter is a constexpr of the kernel (``BLOCK_SIZE_M``) or a launch option (``num_warps``,
``num_stages``, ``num_ctas``, ``maxnreg``). A constraint is a Python expression over the
parameters, the problem's sizes (``M``, ``itemsize``, ...) and the target's limits
(``shared_per_block``, ``max_registers_per_thread``, ...), e.g.
``"BLOCK_M % BLOCK_N == 0"``. Expressions are parsed once and may use only names, numbers,
arithmetic, comparisons, ``and``/``or``/``not`` and ``min``/``max``/``abs``: a constraint is
data a project commits, not code to run.

Bad input is a ``SpaceError`` naming the parameter or the constraint and the fix: a parameter
with no values, a value that is not a number/bool/string, a constraint that does not parse or
names something unknown, and a space whose constraints reject every config (contradictory).
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Launch options Triton takes beside the constexprs; everything else is a kernel keyword.
OPTION_NAMES = ("num_warps", "num_stages", "num_ctas", "maxnreg")
_FUNCTIONS = {"min": min, "max": max, "abs": abs}
_ALLOWED_NODES = (
    ast.Expression,
    ast.BoolOp,
    ast.And,
    ast.Or,
    ast.UnaryOp,
    ast.Not,
    ast.USub,
    ast.UAdd,
    ast.BinOp,
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.Compare,
    ast.Eq,
    ast.NotEq,
    ast.Lt,
    ast.LtE,
    ast.Gt,
    ast.GtE,
    ast.Name,
    ast.Load,
    ast.Constant,
    ast.Call,
)


class SpaceError(ValueError):
    """A config space that cannot be searched; the message names the culprit and the fix."""


class Config(Mapping):
    """One point of a space: parameter -> value, immutable and hashable, in declared order."""

    __slots__ = ("_items", "_hash")

    def __init__(self, values: Mapping[str, Any]):
        self._items = tuple(values.items())
        self._hash = hash(tuple(sorted(self._items, key=lambda item: item[0])))

    def __getitem__(self, name: str) -> Any:
        for key, value in self._items:
            if key == name:
                return value
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (key for key, _ in self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return self._hash

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Mapping):
            return NotImplemented
        return dict(self._items) == dict(other)

    def __repr__(self) -> str:
        return f"Config({self.label()})"

    @property
    def kernel_kwargs(self) -> dict[str, Any]:
        """The constexpr values, as keyword arguments of the kernel."""
        return {key: value for key, value in self._items if key not in OPTION_NAMES}

    @property
    def options(self) -> dict[str, Any]:
        """The launch options (num_warps, num_stages, ...)."""
        return {key: value for key, value in self._items if key in OPTION_NAMES}

    def label(self) -> str:
        """e.g. ``BLOCK_SIZE_M=128 BLOCK_SIZE_N=256 num_warps=8 num_stages=3``."""
        return " ".join(f"{key}={value}" for key, value in self._items)

    def to_json(self) -> dict[str, Any]:
        return dict(self._items)


@dataclass(frozen=True)
class Constraint:
    """A named rule a config must satisfy; ``text`` is the expression as written."""

    text: str
    _code: Any = field(repr=False, compare=False, default=None)
    names: frozenset[str] = field(default=frozenset(), compare=False)

    @classmethod
    def parse(cls, text: str) -> Constraint:
        if not isinstance(text, str) or not text.strip():
            raise SpaceError(f"constraint {text!r}: give a Python expression such as 'BLOCK_M % BLOCK_N == 0'")
        try:
            tree = ast.parse(text.strip(), mode="eval")
        except SyntaxError as error:
            raise SpaceError(f"constraint {text!r} does not parse: {error.msg} (column {error.offset})") from None
        names = set()
        for node in ast.walk(tree):
            if not isinstance(node, _ALLOWED_NODES):
                raise SpaceError(
                    f"constraint {text!r}: {type(node).__name__} is not allowed; use names, numbers, "
                    "arithmetic, comparisons, and/or/not, min/max/abs"
                )
            if isinstance(node, ast.Call):
                if not isinstance(node.func, ast.Name) or node.func.id not in _FUNCTIONS or node.keywords:
                    raise SpaceError(f"constraint {text!r}: the only functions are min, max and abs")
            elif isinstance(node, ast.Name) and node.id not in _FUNCTIONS:
                names.add(node.id)
            elif isinstance(node, ast.Constant) and not isinstance(node.value, (int, float, bool, str)):
                raise SpaceError(f"constraint {text!r}: constant {node.value!r} is not a number, bool or string")
        code = compile(tree, f"<constraint {text}>", "eval")
        return cls(text=text.strip(), _code=code, names=frozenset(names))

    def holds(self, values: Mapping[str, Any]) -> bool:
        try:
            return bool(eval(self._code, {"__builtins__": {}, **_FUNCTIONS}, dict(values)))  # noqa: S307 - parsed above
        except (ArithmeticError, TypeError) as error:
            raise SpaceError(f"constraint {self.text!r} fails on {dict(values)}: {error}") from None


@dataclass(frozen=True)
class Enumeration:
    """The legal configs of a space for one context, and what each constraint rejected."""

    legal: list[Config]
    size: int  # the full cartesian product
    rejected_by: dict[str, int]  # constraint text -> configs it rejected first


@dataclass(frozen=True)
class ConfigSpace:
    """Parameters (name -> values, in the order given) and constraints (expressions)."""

    params: Mapping[str, Sequence[Any]]
    constraints: Sequence[str] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.params, Mapping) or not self.params:
            raise SpaceError("the config space has no parameters; declare at least one, e.g. {'num_warps': [4, 8]}")
        params = {}
        for name, values in self.params.items():
            if not isinstance(name, str) or not name.isidentifier():
                raise SpaceError(f"parameter name {name!r} is not a Python identifier")
            if isinstance(values, (str, bytes)) or not isinstance(values, Sequence):
                raise SpaceError(f"parameter {name}: give a list of values, e.g. {name}=[64, 128], not {values!r}")
            if not values:
                raise SpaceError(f"parameter {name} has no values: the space is empty; give at least one value")
            for value in values:
                if not isinstance(value, (int, float, bool, str)):
                    raise SpaceError(f"parameter {name}: value {value!r} is not a number, bool or string")
            if len(set(values)) != len(values):
                raise SpaceError(f"parameter {name} lists a value twice: {list(values)}")
            params[name] = tuple(values)
        object.__setattr__(self, "params", params)
        object.__setattr__(self, "_parsed", tuple(Constraint.parse(text) for text in self.constraints))

    @property
    def size(self) -> int:
        size = 1
        for values in self.params.values():
            size *= len(values)
        return size

    def check_names(self, context: Mapping[str, Any]) -> None:
        known = set(self.params) | set(context)
        for constraint in self._parsed:
            unknown = sorted(constraint.names - known)
            if unknown:
                raise SpaceError(
                    f"constraint {constraint.text!r} names {', '.join(unknown)}, which is neither a parameter "
                    f"({', '.join(self.params)}) nor a problem or target value ({', '.join(sorted(context))})"
                )

    def enumerate(self, context: Mapping[str, Any] | None = None) -> Enumeration:
        """Every config of the product that satisfies all constraints in ``context``.

        A space whose constraints reject every config is contradictory: SpaceError says how
        many each constraint rejected, so the one to loosen is plain.
        """
        context = dict(context or {})
        self.check_names(context)
        clash = sorted(set(self.params) & set(context))
        if clash:
            raise SpaceError(f"parameter(s) {', '.join(clash)} shadow problem or target values of the same name")
        names = list(self.params)
        rejected = {constraint.text: 0 for constraint in self._parsed}
        legal = []
        for values in itertools.product(*self.params.values()):
            point = dict(zip(names, values))
            scope = {**context, **point}
            failed = next((c for c in self._parsed if not c.holds(scope)), None)
            if failed is None:
                legal.append(Config(point))
            else:
                rejected[failed.text] += 1
        if not legal:
            detail = "; ".join(f"{text!r} rejected {count}" for text, count in rejected.items() if count)
            raise SpaceError(
                f"the constraints reject all {self.size} configs of the space (contradictory): {detail}; "
                "loosen or remove one of them"
            )
        return Enumeration(legal=legal, size=self.size, rejected_by=rejected)


__all__ = ["OPTION_NAMES", "Config", "ConfigSpace", "Constraint", "Enumeration", "SpaceError"]


@dataclass(frozen=True)
class ConfigList:
    """An explicit list of configs (an ``@triton.autotune`` kernel's ``configs``): searched as
    given, no product, no constraints."""

    configs: Sequence[Mapping[str, Any]]

    def __post_init__(self) -> None:
        if not self.configs:
            raise SpaceError("the config list is empty; give at least one config")
        points = []
        for config in self.configs:
            for name, value in config.items():
                if not isinstance(name, str) or not name.isidentifier():
                    raise SpaceError(f"parameter name {name!r} is not a Python identifier")
                if not isinstance(value, (int, float, bool, str)):
                    raise SpaceError(f"parameter {name}: value {value!r} is not a number, bool or string")
            points.append(Config(config))
        object.__setattr__(self, "configs", tuple(dict.fromkeys(points)))  # (a config listed twice: once)

    @property
    def size(self) -> int:
        return len(self.configs)

    def check_names(self, context: Mapping[str, Any]) -> None:
        pass  # (no constraints)

    def enumerate(self, context: Mapping[str, Any] | None = None) -> Enumeration:
        return Enumeration(legal=list(self.configs), size=len(self.configs), rejected_by={})
