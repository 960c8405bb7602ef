"""Results that cannot cheat: what bench() checks around a measurement, cheaply.

A timing is only worth gating if every timed call did the work the first call did, and the timer
saw all of it. Four ways it goes wrong without an error (the ways kernel leaderboards get gamed):

- ``inplace``: the calls change their own inputs (an accumulating ``x.add_(1)``), so each timed
  call works on different data. Seen as tensors or arrays among the arguments that differ after
  the timed calls from right after the first call. Writing into an output argument the same way
  each call (``out=``, ``dst.copy_(src)``) changes nothing after the first call and passes.
- ``cached`` and ``alias``, from one extra call on perturbed copies of the array arguments (each
  array given noise of its own, so no function of one matches another): the very same object as the first
  call's with the same values is a cached result, and the timed calls measured a lookup (a buffer
  the function owns and writes anew each call has new values and passes); a result that is one of
  those copies, or a view of it, left unchanged by the call is nothing computed (``x.t()``,
  ``lambda x: x``; an output argument the call writes, ``dst.copy_(src)``, changes and passes).
  Skipped for kernels run in the Triton interpreter (their timings are never gated and a call
  costs seconds) and for calls that fail on the perturbed inputs (nothing can be told).
- ``lazy``: the first call returned work not yet done, a generator or other iterator, a coroutine
  or other awaitable, or a ``concurrent.futures.Future``: the timed calls measured creating it.
  And ``cached`` again: a function memoised by ``functools.lru_cache``/``cache`` (it has
  ``cache_info``) answers every timed call from its cache, whatever the arguments' type.
- ``async`` (CUDA timers): after one more call timed by events on the current stream, the device
  stays busy for longer than the events read and than ``ASYNC_FLOOR_MS``: work on a side stream,
  or events recorded on another stream than the work's.

``bench(fn, ..., allow=("inplace",))`` turns a check off for a kernel that is in place by design.
Tensors and arrays are copied for the comparisons up to ``SNAPSHOT_BYTES`` in all (beyond that
the checks that need the copies are skipped: they would cost more than the call).
"""

from __future__ import annotations

import concurrent.futures
import inspect
import io
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

CHECKS = ("inplace", "alias", "cached", "lazy", "async")
SNAPSHOT_BYTES = 256 * 1024**2
ASYNC_FLOOR_MS = 0.2


def parse_allow(allow: Any) -> frozenset[str]:
    """``allow=`` as a set of check names; a usage error names an unknown one."""
    if allow is None:
        return frozenset()
    names = (allow,) if isinstance(allow, str) else allow
    try:
        names = tuple(names)
    except TypeError:
        names = (allow,)
    unknown = [name for name in names if name not in CHECKS]
    if unknown:
        raise ValueError(
            f"bench(allow={allow!r}): unknown check(s) {unknown!r}; choose from {', '.join(CHECKS)}, "
            "e.g. allow=('inplace',) for a kernel that updates its input by design"
        )
    return frozenset(names)


def _arrays(value: Any, path: str) -> Iterator[tuple[str, Any]]:
    """(where, array) for every torch tensor or numpy array in nested arguments."""
    torch, numpy = sys.modules.get("torch"), sys.modules.get("numpy")
    if torch is not None and isinstance(value, torch.Tensor):
        yield path, value
    elif numpy is not None and isinstance(value, numpy.ndarray):
        yield path, value
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _arrays(item, f"{path}[{index}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _arrays(item, f"{path}[{key!r}]")


def arguments(args: tuple, kwargs: dict) -> list[tuple[str, Any]]:
    """The arrays among a call's arguments, named as a user reads them (``argument 1``, ``x=``)."""
    found = []
    for index, value in enumerate(args):
        found += _arrays(value, f"argument {index + 1}")
    for key, value in kwargs.items():
        found += _arrays(value, f"{key}=")
    return found


def _nbytes(array: Any) -> int:
    return int(array.nbytes) if hasattr(array, "nbytes") else int(array.numel() * array.element_size())


def _copy(array: Any) -> Any:
    return array.detach().clone() if hasattr(array, "detach") else array.copy()


# torch and numpy below are the array's own library: loaded already once such an array exists, where
# at the top they would cost a test that takes `bench` without --bench ~1.2 s and ~120 ms.
def _bytes_of(array: Any) -> Any:
    if hasattr(array, "detach"):
        import torch

        return array.detach().contiguous().reshape(-1).view(torch.uint8)
    import numpy

    return numpy.ascontiguousarray(array).reshape(-1).view(numpy.uint8)


def _same(a: Any, b: Any) -> bool:
    """Bitwise the same (a NaN where a NaN was is unchanged)."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    x, y = _bytes_of(a), _bytes_of(b)
    if hasattr(x, "detach"):
        import torch

        return bool(torch.equal(x, y))
    import numpy

    return bool(numpy.array_equal(x, y))


def _shares_memory(a: Any, b: Any) -> bool:
    if hasattr(a, "untyped_storage") and hasattr(b, "untyped_storage"):
        if a.device != b.device or a.numel() == 0 or b.numel() == 0:
            return False
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    if hasattr(a, "__array_interface__") and hasattr(b, "__array_interface__"):
        import numpy

        return bool(numpy.shares_memory(a, b))
    return False


class Snapshot:
    """Copies of a call's array arguments, to tell later what the calls changed."""

    def __init__(self, args: tuple, kwargs: dict):
        self.found = arguments(args, kwargs)
        self.complete = sum(_nbytes(array) for _, array in self.found) <= SNAPSHOT_BYTES
        self.copies = [_copy(array) for _, array in self.found] if self.complete else []

    def changed(self) -> list[str]:
        """The arguments whose values differ now from when the snapshot was taken."""
        if not self.complete:
            return []
        return [where for (where, array), copy in zip(self.found, self.copies) if not _same(array, copy)]


def perturbed(args: tuple, kwargs: dict) -> tuple[tuple, dict] | None:
    """Copies of the arguments with every array's values changed, each array by noise of its own
    (floats halved plus seeded noise, integers moved by their position, booleans flipped): no
    function of one perturbed array reproduces another's new values, as a shared affine change
    would for a linear kernel writing into an out= buffer. None when there is no array."""
    torch, numpy = sys.modules.get("torch"), sys.modules.get("numpy")
    count = 0

    def move(value):
        nonlocal count
        if torch is not None and isinstance(value, torch.Tensor):
            count += 1
            copy = value.detach().clone()
            if copy.dtype == torch.bool:
                return ~copy
            if copy.is_floating_point() or copy.is_complex():  # (in fp32: fp8 has no arithmetic)
                noise = torch.randn(
                    copy.shape, generator=torch.Generator(device=copy.device).manual_seed(count), device=copy.device
                )
                wide = copy.to(torch.complex64 if copy.is_complex() else torch.float32)
                return (wide * 0.5 + 0.25 * noise).to(copy.dtype)
            return copy + count
        if numpy is not None and isinstance(value, numpy.ndarray):
            count += 1
            if value.dtype == bool:
                return ~value
            if value.dtype.kind in "fc":
                noise = numpy.random.default_rng(count).standard_normal(value.shape)
                return (value * 0.5 + 0.25 * noise).astype(value.dtype)
            return value + count
        if isinstance(value, list):
            return [move(item) for item in value]
        if isinstance(value, tuple):
            return tuple(move(item) for item in value)
        if isinstance(value, dict):
            return {key: move(item) for key, item in value.items()}
        return value

    moved = (tuple(move(value) for value in args), {key: move(value) for key, value in kwargs.items()})
    return moved if count else None


def check_first_call(fn: Callable, result: Any, allowed: frozenset[str]) -> str | None:
    """Before anything is timed: a result that is work not yet done (``lazy``), or a function that
    answers from a memo (``cached``)."""
    if "lazy" not in allowed:
        kind = _deferred_kind(result)
        if kind is not None:
            if inspect.iscoroutine(result):
                result.close()  # (never to be awaited: no "never awaited" warning besides)
            return (
                f"the first call returned {kind}, work not yet done: the timed calls would measure creating it. "
                "Time the call that does the work (bench(lambda: list(gen(x))), bench(lambda: asyncio.run(f(x))), "
                "bench(lambda: pool.submit(f, x).result())), or pass allow=('lazy',)"
            )
    if "cached" not in allowed and _memoised(fn):
        return (
            f"{getattr(fn, '__name__', 'the function')} is memoised (functools.lru_cache or cache): every timed call "
            "after the first is answered from its cache. Time the function itself (fn.__wrapped__), or pass "
            "allow=('cached',)"
        )
    return None


def _memoised(fn: Callable) -> bool:
    """A function wrapped by functools.lru_cache/cache that keeps what it computed (maxsize 0 keeps
    nothing)."""
    if not (callable(getattr(fn, "cache_info", None)) and hasattr(fn, "__wrapped__")):
        return False
    parameters = getattr(fn, "cache_parameters", None)
    return not (callable(parameters) and parameters().get("maxsize") == 0)


def _deferred_kind(result: Any) -> str | None:
    """What kind of work-not-yet-done ``result`` is, in words; None for a result."""
    if inspect.isgenerator(result):
        return "a generator"
    if inspect.isasyncgen(result):
        return "an async generator"
    if inspect.iscoroutine(result) or inspect.isawaitable(result):
        return "a coroutine" if inspect.iscoroutine(result) else "an awaitable"
    if isinstance(result, concurrent.futures.Future):
        return "a Future"
    if isinstance(result, Iterator) and not isinstance(result, io.IOBase):
        return f"an iterator ({type(result).__name__})"
    return None


def check_perturbed(fn: Callable, args: tuple, kwargs: dict, result: Any, allowed: frozenset[str]) -> str | None:
    """One call on perturbed copies of the arguments: the very object of the first call again,
    with its values (``cached``), or a result that is an argument, or a view of one, the call left
    unchanged (``alias``)."""
    try:
        moved = perturbed(args, kwargs)
    except Exception:  # a dtype or container that cannot be perturbed: no verdict
        return None
    if moved is None:
        return None
    inputs = arguments(*moved)
    outputs = list(_arrays(result, "result"))
    if sum(_nbytes(array) for _, array in [*inputs, *outputs]) > SNAPSHOT_BYTES:
        return None
    inputs_before = [_copy(array) for _, array in inputs]
    outputs_before = [_copy(array) for _, array in outputs]
    try:
        again = fn(*moved[0], **moved[1])
    except Exception:  # the function may not accept other values (indices, masks): no verdict
        return None
    # A buffer the function owns and writes anew each call (a static output for CUDA graphs) is
    # the same object with new values: only the same object with the same values is a cache.
    cached = again is result and all(_same(array, copy) for (_, array), copy in zip(outputs, outputs_before))
    if "cached" not in allowed and cached and not isinstance(result, (bool, int, float, str, type(None))):
        return (
            "a call on different inputs returned the very same object: the result is cached, so the timed "
            "calls measured a lookup. Leave the cache out of the benchmark, or pass allow=('cached',)"
        )
    if "alias" not in allowed:
        written = {where for (where, array), copy in zip(inputs, inputs_before) if not _same(array, copy)}
        for where_out, out in _arrays(again, "result"):
            for where_in, array in inputs:
                if where_in not in written and _shares_memory(out, array):
                    return (
                        f"its {where_out} is {where_in} or a view of it, which the call left unchanged: nothing "
                        "was computed (a lazy or view result). Return the computed result, or pass allow=('alias',)"
                    )
    return None


def check_async(
    call: Callable[[], Any], torch: Any, device: Any, clock: Callable[[], float] = time.perf_counter
) -> str | None:
    """One call timed by events on the current stream; then how long the device stays busy."""
    torch.cuda.synchronize(device)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    call()
    end.record()
    end.synchronize()
    t0 = clock()
    torch.cuda.synchronize(device)
    lingered_ms = (clock() - t0) * 1e3
    timed_ms = start.elapsed_time(end)
    if lingered_ms > max(ASYNC_FLOOR_MS, timed_ms):
        return (
            f"work outlives the timed window: the GPU stayed busy {lingered_ms:.3g} ms after the last event the "
            f"timer reads ({timed_ms:.3g} ms for the call): work launched on another stream, or events recorded "
            "on another stream than the work's. Launch on the current stream (or make it wait for yours), or "
            "pass allow=('async',)"
        )
    return None
