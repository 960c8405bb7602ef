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
Importing this module imports no torch; ``prepare`` does.
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
    import torch
    import torch.distributed as dist

    if op not in OPS:
        raise ValueError(f"unknown collective {op!r}; one of {', '.join(OPS)}")
    n, rank = dist.get_world_size(group), dist.get_rank(group)
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
    device = device if device is not None else ("cuda" if dist.get_backend(group) == "nccl" else "cpu")
    chunk = count // n

    def full(size: int, value: float):
        return torch.full((size,), value, dtype=dtype, device=device)

    # Moved data must arrive exactly (values below 256 are exact in every float dtype); a sum may
    # round differently in another order: n rounding steps of the dtype's epsilon.
    rtol = n * torch.finfo(dtype).eps if op in ("all_reduce", "reduce_scatter") else 0.0

    def expect(name: str, actual, expected) -> None:
        actual, expected = actual.float().cpu(), expected.float().cpu()
        wrong = (~torch.isclose(actual, expected, rtol=rtol, atol=0.0)).nonzero()
        if len(wrong):
            first = int(wrong[0])
            raise AssertionError(
                f"{op} on rank {rank} of {n}: {name}[{first}] is {actual[first].item()}, "
                f"expected {expected[first].item()}"
            )

    def label(values):  # distinct small integers, exact in any dtype
        return (values % 256).to(dtype)

    triangle = n * (n + 1) / 2  # the sum of (rank + 1) over the ranks
    if op == "all_reduce":
        buf = full(count, 0.0)

        def run():
            dist.all_reduce(buf, group=group)

        def checker():
            buf.fill_(rank + 1)
            run()
            expect("buffer", buf, full(count, triangle))

        buffers = {"buffer": buf}
    elif op == "all_gather":
        src, out = full(chunk, 0.0), full(count, 0.0)
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

        def run():
            gather(out, src, group=group)

        def checker():
            src.fill_(rank % 256)
            run()
            expect("output", out, label(torch.arange(n, device=device).repeat_interleave(chunk)))

        buffers = {"input": src, "output": out}
    elif op == "reduce_scatter":
        src, out = full(count, 0.0), full(chunk, 0.0)
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor

        def run():
            scatter(out, src, group=group)

        def checker():
            src.fill_(rank + 1)
            run()
            expect("output", out, full(chunk, triangle))

        buffers = {"input": src, "output": out}
    elif op == "all_to_all":
        src, out = full(count, 0.0), full(count, 0.0)

        def run():
            dist.all_to_all_single(out, src, group=group)

        def checker():
            # chunk j of rank r holds r * n + j; after the exchange chunk j of rank r holds j * n + r
            src.copy_(label((rank * n + torch.arange(n, device=device)).repeat_interleave(chunk)))
            run()
            expect("output", out, label((torch.arange(n, device=device) * n + rank).repeat_interleave(chunk)))

        buffers = {"input": src, "output": out}
    elif op == "broadcast":
        buf = full(count, 0.0)
        root = dist.get_global_rank(group, 0) if group is not None else 0

        def run():
            dist.broadcast(buf, src=root, group=group)

        def checker():
            buf.fill_(7.0 if rank == 0 else -1.0)
            run()
            expect("buffer", buf, full(count, 7.0))

        buffers = {"buffer": buf}
    else:  # send_recv: each rank sends to the next and receives from the previous (nccl-tests)
        src, out = full(count, 0.0), full(count, 0.0)

        def peer(offset: int) -> int:
            local = (rank + offset) % n
            return dist.get_global_rank(group, local) if group is not None else local

        def run():
            ops = [dist.P2POp(dist.isend, src, peer(1), group), dist.P2POp(dist.irecv, out, peer(-1), group)]
            for request in dist.batch_isend_irecv(ops):
                request.wait()

        def checker():
            src.fill_(rank % 256)
            run()
            expect("received", out, full(count, ((rank - 1) % n) % 256))

        buffers = {"input": src, "output": out}

    def reset():
        for tensor in buffers.values():
            tensor.zero_()

    return Collective(op=op, nbytes=nbytes, world_size=n, run=run, checker=checker, reset=reset, buffers=buffers)
