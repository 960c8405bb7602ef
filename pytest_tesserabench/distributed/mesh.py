"""Device-mesh layouts for ``@pytest.mark.bench_mesh``: which shapes a test runs on.

``bench_mesh("dp", "tp")`` runs the test on every way of splitting the world into those
dimensions (world size 4: dp1xtp4, dp2xtp2, dp4xtp1); ``bench_mesh(dp=2, tp=-1)`` on one shape,
-1 standing for what is left. The test's ``mesh`` argument is then a
``torch.distributed.device_mesh.DeviceMesh`` of that shape (built once per shape and session), as
``init_device_mesh`` lays it out: the last dimension varies fastest, so with ``tp`` last and no
larger than a node, a tp group stays inside one machine and dp groups cross machines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class MeshError(ValueError):
    """A mesh marker written wrongly, or a shape that does not fit the world (``needed``: the
    number of ranks it needs, where that is known)."""

    def __init__(self, message: str, needed: int | None = None):
        super().__init__(message)
        self.needed = needed


def factorizations(world_size: int, dims: int) -> list[tuple[int, ...]]:
    """Every ordered tuple of ``dims`` positive sizes whose product is ``world_size``."""
    if dims == 1:
        return [(world_size,)]
    out = []
    for first in range(1, world_size + 1):
        if world_size % first == 0:
            out.extend((first, *rest) for rest in factorizations(world_size // first, dims - 1))
    return out


def describe(names: Iterable[str], sizes: Iterable[int]) -> str:
    """The parameter value and record entry of a shape: 'dp=2,tp=2'."""
    return ",".join(f"{n}={s}" for n, s in zip(names, sizes))


def parse(text: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """'dp=2,tp=-1' -> (('dp', 'tp'), (2, -1))."""
    names, sizes = [], []
    for part in str(text).split(","):
        name, _, size = part.partition("=")
        names.append(name.strip())
        sizes.append(int(size))
    return tuple(names), tuple(sizes)


def resolve(text: str, world_size: int) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The shape ``text`` takes on this world (-1 filled in); MeshError when it does not fit."""
    names, sizes = parse(text)
    fixed = 1
    for size in sizes:
        fixed *= size if size != -1 else 1
    if sizes.count(-1) == 1 and fixed > 0 and world_size % fixed == 0:
        sizes = tuple(world_size // fixed if s == -1 else s for s in sizes)
    product = 1
    for size in sizes:
        product *= size
    if -1 in sizes or product != world_size:
        needed = None if -1 in sizes else product
        raise MeshError(
            f"mesh {describe(names, sizes)} does not fit {world_size} rank(s)"
            + (f": it needs {needed}" if needed else ""),
            needed=needed,
        )
    return names, sizes


def mesh_parameters(args: tuple, kwargs: dict, where: str, world_size: int) -> tuple[list[str], list[str]]:
    """(values, ids) for ``@pytest.mark.bench_mesh`` on the test ``where``."""
    prefix = f"@pytest.mark.bench_mesh on {where}"
    if bool(args) == bool(kwargs):
        raise MeshError(
            f"{prefix}: give dimension names for every layout of the world, bench_mesh('dp', 'tp'), or one "
            "shape, bench_mesh(dp=2, tp=-1); not both, not neither"
        )
    names = tuple(args) if args else tuple(kwargs)
    bad = [n for n in names if not isinstance(n, str) or not _NAME.match(n)]
    if bad or len(set(names)) != len(names):
        raise MeshError(f"{prefix}: dimension names must be distinct identifiers like 'dp', 'tp'; got {names!r}")
    if args:
        shapes = factorizations(world_size, len(names))
    else:
        sizes = tuple(kwargs.values())
        if any(not isinstance(s, int) or isinstance(s, bool) or (s < 1 and s != -1) for s in sizes):
            raise MeshError(f"{prefix}: sizes must be positive whole numbers or -1 (the rest); got {kwargs!r}")
        if sizes.count(-1) > 1:
            raise MeshError(f"{prefix}: at most one dimension may be -1; got {kwargs!r}")
        shapes = [sizes]
    values = [describe(names, shape) for shape in shapes]
    ids = ["mesh=" + "x".join(f"{n}{'*' if s == -1 else s}" for n, s in zip(names, shape)) for shape in shapes]
    return values, ids
