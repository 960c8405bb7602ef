"""Collective benchmarks: the operations, their buffers, and bus bandwidth as nccl-tests defines it.

A collective of size S (nccl-tests' "size" column, doc/PERFORMANCE.md and the ``*GetBw``
functions of src/*.cu) taking t seconds has the algorithm bandwidth ``algbw = S / t`` and the bus
bandwidth ``busbw = algbw * factor(n)`` on n ranks, the rate each rank's link must sustain, so a
figure comparable with the hardware's link bandwidth whatever n:

=================  ========================================  =============
operation          S (bytes)                                 factor
=================  ========================================  =============
all_reduce         the buffer                                2 (n - 1) / n
all_gather         the gathered output (n x each input)      (n - 1) / n
reduce_scatter     the input (n x each output)               (n - 1) / n
all_to_all         each rank's send buffer (n chunks)        (n - 1) / n
broadcast          the buffer                                1
send_recv          what each rank sends (to rank + 1)        1
=================  ========================================  =============

Use: ``op = prepare("all_reduce", 1 << 20, torch.bfloat16, group)``, ``op.check()`` (the result
is right), then ``bench(op, op.buffers, comm_bytes=op.nbytes, bus_factor=op.bus_factor)``: the
buffers passed along let the timer see where the data lives (CUDA events for NCCL on GPUs).
Importing this module imports no torch (~1.2 s): the table, ``bus_factor`` and ``bandwidths`` need
none (the bench suite's configuration reads them at collection); ``prepare`` and the builders import it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
# Operations whose S is split into n equal chunks (one per rank).
SPLIT_OPS = ("all_gather", "reduce_scatter", "all_to_all")

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


class Unsupported(Exception):
    """This operation cannot run at this size or world size; the message is the skip reason."""


def bus_factor(op: str, n: int) -> float:
    """busbw / algbw for ``op`` on ``n`` ranks (nccl-tests' factors)."""
    if n < 1:
        raise ValueError(f"a world of {n} ranks")
    if op == "all_reduce":
        return 2 * (n - 1) / n
    if op in SPLIT_OPS:
        return (n - 1) / n
    if op in ("broadcast", "send_recv"):
        return 1.0
    raise ValueError(f"unknown collective {op!r}; one of {', '.join(OPS)}")


def bandwidths(op: str, nbytes: float, seconds: float, n: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s (1e9 bytes per second, as nccl-tests prints them)."""
    algbw = nbytes / seconds / 1e9
    return algbw, algbw * bus_factor(op, n)


def sizes(low: int, high: int, factor: int = 2) -> list[int]:
    """Message sizes from ``low`` to ``high`` bytes, each ``factor`` times the last (nccl-tests -f)."""
    out, size = [], low
    while size <= high:
        out.append(size)
        size *= factor
    return out


def format_size(nbytes: int) -> str:
    for unit, scale in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale}{unit}"
    return f"{nbytes}B"


@dataclass
class Collective:
    """One collective on prepared buffers: calling it runs it once (arguments are ignored: the
    buffers are passed to ``bench`` only to show the timer which device the data is on).

    Like any CUDA work it is only enqueued on a GPU; the timer synchronises."""

    op: str
    nbytes: int
    world_size: int
    run: Callable[[], Any]
    checker: Callable[[], None]
    reset: Callable[[], None]
    buffers: dict = field(default_factory=dict)

    @property
    def bus_factor(self) -> float:
        return bus_factor(self.op, self.world_size)

    def __call__(self, *_buffers):
        return self.run()

    def check(self) -> None:
        """Run once on rank-dependent data and assert the result (AssertionError names the rank
        and what differs); then leave buffers that stay finite however often the op runs."""
        self.checker()
        self.reset()


def prepare(op: str, nbytes: int, dtype, group=None, device=None) -> Collective:
    """Buffers for ``op`` of ``nbytes`` (S) in ``dtype`` on ``group`` (default: the world).

    Raises Unsupported when S does not split: not a whole number of elements, or (all_gather,
    reduce_scatter, all_to_all) not a whole number of elements per rank; send_recv on one rank.
    """
    import torch.distributed as dist

    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; one of {', '.join(OPS)}")
    n = dist.get_world_size(group)
    count = _elements(op, nbytes, dtype, n)
    device = device if device is not None else ("cuda" if dist.get_backend(group) == "nccl" else "cpu")
    setting = _Setting(op, dtype, group, device, n, dist.get_rank(group), count)
    run, checker, buffers = _BUILDERS[op](setting)

    def reset():
        for tensor in buffers.values():
            tensor.zero_()

    return Collective(op=op, nbytes=nbytes, world_size=n, run=run, checker=checker, reset=reset, buffers=buffers)


def _elements(op: str, nbytes: int, dtype, n: int) -> int:
    """The number of elements S bytes hold; Unsupported when S does not split for ``op``."""
    import torch

    itemsize = torch.empty((), dtype=dtype).element_size()
    dtype_name = str(dtype).removeprefix("torch.")
    if nbytes % itemsize:
        raise Unsupported(f"{op} of {nbytes} B: not a whole number of {dtype_name} elements ({itemsize} B each)")
    count = nbytes // itemsize
    if op in SPLIT_OPS and count % n:
        raise Unsupported(
            f"{op} of {nbytes} B in {dtype_name}: {count} elements do not split evenly over {n} ranks "
            "(pick a size divisible by the world size)"
        )
    if op == "send_recv" and n < 2:
        raise Unsupported("send_recv needs at least 2 ranks (each sends to the next)")
    return count


@dataclass(frozen=True)
class _Setting:
    """What every collective's buffers and checker are built from."""

    op: str
    dtype: Any
    group: Any
    device: Any
    n: int  # ranks in the group
    rank: int
    count: int  # elements of S

    @property
    def chunk(self) -> int:
        return self.count // self.n

    @property
    def triangle(self) -> float:
        return self.n * (self.n + 1) / 2  # the sum of (rank + 1) over the ranks

    def full(self, size: int, value: float):
        import torch

        return torch.full((size,), value, dtype=self.dtype, device=self.device)

    def arange(self):
        import torch

        return torch.arange(self.n, device=self.device)

    def label(self, values):  # distinct small integers, exact in any dtype
        return (values % 256).to(self.dtype)

    def expect(self, name: str, actual, expected) -> None:
        import torch

        # Moved data must arrive exactly (values below 256 are exact in every float dtype); a sum
        # may round differently in another order: n rounding steps of the dtype's epsilon.
        rtol = self.n * torch.finfo(self.dtype).eps if self.op in ("all_reduce", "reduce_scatter") else 0.0
        actual, expected = actual.float().cpu(), expected.float().cpu()
        wrong = (~torch.isclose(actual, expected, rtol=rtol, atol=0.0)).nonzero()
        if len(wrong):
            first = int(wrong[0])
            raise AssertionError(
                f"{self.op} on rank {self.rank} of {self.n}: {name}[{first}] is {actual[first].item()}, "
                f"expected {expected[first].item()}"
            )


def _all_reduce(c: _Setting):
    import torch.distributed as dist

    buf = c.full(c.count, 0.0)

    def run():
        dist.all_reduce(buf, group=c.group)

    def checker():
        buf.fill_(c.rank + 1)
        run()
        c.expect("buffer", buf, c.full(c.count, c.triangle))

    return run, checker, {"buffer": buf}


def _all_gather(c: _Setting):
    import torch.distributed as dist

    src, out = c.full(c.chunk, 0.0), c.full(c.count, 0.0)
    gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

    def run():
        gather(out, src, group=c.group)

    def checker():
        src.fill_(c.rank % 256)
        run()
        c.expect("output", out, c.label(c.arange().repeat_interleave(c.chunk)))

    return run, checker, {"input": src, "output": out}


def _reduce_scatter(c: _Setting):
    import torch.distributed as dist

    src, out = c.full(c.count, 0.0), c.full(c.chunk, 0.0)
    scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

    def run():
        scatter(out, src, group=c.group)

    def checker():
        src.fill_(c.rank + 1)
        run()
        c.expect("output", out, c.full(c.chunk, c.triangle))

    return run, checker, {"input": src, "output": out}


def _all_to_all(c: _Setting):
    import torch.distributed as dist

    src, out = c.full(c.count, 0.0), c.full(c.count, 0.0)

    def run():
        dist.all_to_all_single(out, src, group=c.group)

    def checker():
        # chunk j of rank r holds r * n + j; after the exchange chunk j of rank r holds j * n + r
        src.copy_(c.label((c.rank * c.n + c.arange()).repeat_interleave(c.chunk)))
        run()
        c.expect("output", out, c.label((c.arange() * c.n + c.rank).repeat_interleave(c.chunk)))

    return run, checker, {"input": src, "output": out}


def _broadcast(c: _Setting):
    import torch.distributed as dist

    buf = c.full(c.count, 0.0)
    root = dist.get_global_rank(c.group, 0) if c.group is not None else 0

    def run():
        dist.broadcast(buf, src=root, group=c.group)

    def checker():
        buf.fill_(7.0 if c.rank == 0 else -1.0)
        run()
        c.expect("buffer", buf, c.full(c.count, 7.0))

    return run, checker, {"buffer": buf}


def _send_recv(c: _Setting):
    """Each rank sends to the next and receives from the previous (as nccl-tests' sendrecv)."""
    import torch.distributed as dist

    src, out = c.full(c.count, 0.0), c.full(c.count, 0.0)

    def peer(offset: int) -> int:
        local = (c.rank + offset) % c.n
        return dist.get_global_rank(c.group, local) if c.group is not None else local

    def run():
        ops = [dist.P2POp(dist.isend, src, peer(1), c.group), dist.P2POp(dist.irecv, out, peer(-1), c.group)]
        for request in dist.batch_isend_irecv(ops):
            request.wait()

    def checker():
        src.fill_(c.rank % 256)
        run()
        c.expect("received", out, c.full(c.count, ((c.rank - 1) % c.n) % 256))

    return run, checker, {"input": src, "output": out}


_BUILDERS = {
    "all_reduce": _all_reduce,
    "all_gather": _all_gather,
    "reduce_scatter": _reduce_scatter,
    "all_to_all": _all_to_all,
    "broadcast": _broadcast,
    "send_recv": _send_recv,
}
