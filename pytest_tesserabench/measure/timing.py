"""Timers: how one round of repetitions is timed on each kind of device.

A timer owns a zero-argument ``call`` and answers ``round(samples)``: that many samples in
milliseconds per call, with the device synchronised once at the end of the round.

- ``CpuTimer``: perf_counter_ns around a calibrated inner loop, garbage collector off, less the
  time the thread waited for a CPU (``run_queue``: another process took it); the CPU other
  processes used meanwhile is counted too (``neighbours``), for the gate to know the machine was shared,
  and this process's own (all threads: how many CPUs a multi-threaded benchmark got).
- ``CudaEventTimer``: CUDA events around each repetition; the L2 cache is flushed before each
  repetition by writing a buffer twice the L2 size, outside the timed window. The stream is held
  by a spin kernel while the host enqueues the repetitions, so the GPU never waits for the host
  inside the window: a launch that costs more host time than the kernel takes GPU time (a Triton
  kernel's Python launch, tens of microseconds) would otherwise be timed as the kernel's.
- ``CudaGraphTimer``: the repetitions (flushes included) are captured in a CUDA graph and replayed;
  a flush-only graph's time is subtracted, so launch overhead is out of the figure.
Torch is imported only by the CUDA timers.
"""

from __future__ import annotations

import gc
import math
import sys
import time
from collections.abc import Callable, Iterable
from typing import Any

from pytest_tesserabench.machine import device as machine
from pytest_tesserabench.machine import neighbours, run_queue

Call = Callable[[], Any]


class TimerError(RuntimeError):
    """A timer that cannot run here (e.g. a CUDA timer without CUDA tensors)."""


class CpuTimer:
    name = "cpu"
    # A sample lasts at least this long, so perf_counter's resolution and call overhead vanish.
    MIN_SAMPLE_S = 200e-6

    def __init__(self, call: Call, *, label: str = "cpu"):
        self.call = call
        self.name = label  # "cpu", or "interpreter" for Triton kernels run by the interpreter
        self.inner = 1
        self.run_queue_wait_ns = 0  # left out of the samples so far: time spent waiting for a CPU
        self.others_cpu_ns = 0  # CPU time other processes used during the rounds so far
        self.others_wall_ns = 0  # ... and those rounds' wall time
        self.own_cpu_ns = 0  # CPU time this process (all its threads) used during those rounds

    def time_once(self) -> float:
        """One untimed-looking warm-up call; returns its duration in seconds."""
        __tracebackhide__ = True  # a user's error shows in their code, not in the plugin's frames
        t0 = time.perf_counter_ns()
        self.call()
        return (time.perf_counter_ns() - t0) * 1e-9

    def calibrate(self, seconds_per_call: float) -> None:
        # (the 1e-9 keeps float noise like 200.00000000000003 from adding a call)
        self.inner = max(1, math.ceil(self.MIN_SAMPLE_S / max(seconds_per_call, 1e-9) - 1e-9))

    def round(self, samples: int) -> list[float]:
        __tracebackhide__ = True
        call, inner = self.call, self.inner
        loop = range(inner)
        clock = time.perf_counter_ns
        waited, close = run_queue.wait_clock()
        others, close_others = neighbours.others_clock()
        out = []
        gc_was_enabled = gc.isenabled()
        gc.disable()  # a collection inside a sample would be billed to the kernel
        others_cpu, others_wall = others()
        own_cpu = time.process_time_ns()
        try:
            for _ in range(samples):
                # The wait is read inside the timed window: a preemption between a read and the
                # clock is then billed to the sample (never subtracted from time that was not in it).
                t0 = clock()
                w0 = waited()
                for _ in loop:
                    call()
                wait = waited() - w0
                out.append((clock() - t0 - wait) / inner / 1e6)
                self.run_queue_wait_ns += wait
        finally:
            self.own_cpu_ns += time.process_time_ns() - own_cpu
            cpu, wall = others()
            self.others_cpu_ns += cpu - others_cpu
            self.others_wall_ns += wall - others_wall
            close_others()
            close()
            if gc_was_enabled:
                gc.enable()
        return out


class _CudaTimerBase:
    """Shared state of the CUDA timers: the device, its stream and the L2 flush buffer."""

    inner = 1

    def __init__(self, call: Call, device: Any, *, torch: Any = None):
        if torch is None:
            import torch  # ~1.2 s, the optional GPU stack: a CUDA timer only, where a test loaded it already

        self.torch = torch
        self.call = call
        self.device = torch.device(device)
        index = self.device.index if self.device.index is not None else torch.cuda.current_device()
        l2_bytes = machine.l2_cache_bytes(index)
        # Reading twice the L2 size evicts everything the kernel could reuse from the last call.
        self.flush_buffer = torch.zeros(max(2 * l2_bytes, 1 << 20) // 4, dtype=torch.int32, device=self.device)

    def flush_l2(self) -> None:
        # A read, not a write: writing the buffer would leave L2 full of dirty lines, and the
        # memory-bound kernel timed next would pay for writing them back inside its window
        # (docs/gpu-validation.md measures both). A read leaves L2 as cold, and clean.
        self.flush_buffer.sum()

    def time_once(self) -> float:
        __tracebackhide__ = True
        torch = self.torch
        torch.cuda.synchronize(self.device)
        t0 = time.perf_counter()
        self.call()
        torch.cuda.synchronize(self.device)
        return time.perf_counter() - t0

    def calibrate(self, seconds_per_call: float) -> None:
        pass


class CudaEventTimer(_CudaTimerBase):
    """Events around each (flush, call), enqueued in chunks behind a spin kernel that holds the
    stream until the host has enqueued the whole chunk."""

    name = "cuda_event"
    # Repetitions per hold: with four queue entries each, well inside CUDA's pending-launch queue
    # (a full queue blocks the host, and the GPU would wait for it again).
    MAX_CHUNK = 64
    # The longest hold: a host that needs longer to enqueue one call gets smaller chunks.
    MAX_HOLD_S = 0.1
    # Host time is measured per chunk and varies; hold for twice the last chunk's, plus a margin
    # for the spin kernel's own launch.
    HOLD_FACTOR = 2.0
    HOLD_EXTRA_S = 50e-6
    # torch.cuda._sleep counts SM clock cycles; at 2 GHz (above any data-centre GPU's boost
    # clock) a cycle count lasts at least the seconds asked for.
    CYCLES_PER_S = 2e9

    def __init__(self, call: Call, device: Any, *, torch: Any = None, clock: Callable[[], float] = time.perf_counter):
        super().__init__(call, device, torch=torch)
        self.clock = clock
        self.can_hold = hasattr(self.torch.cuda, "_sleep")
        # Host seconds to enqueue one repetition, measured on each chunk. Unknown at first: then
        # the first chunk is one repetition behind the longest hold.
        self.enqueue_s: float | None = None

    def calibrate(self, seconds_per_call: float) -> None:
        if self.enqueue_s is None:  # a warm-up call's wall time (GPU time included) bounds it above
            self.enqueue_s = seconds_per_call

    def _chunk(self) -> int:
        if self.enqueue_s is None:
            return 1
        return max(1, min(self.MAX_CHUNK, int(self.MAX_HOLD_S / (self.HOLD_FACTOR * max(self.enqueue_s, 1e-9)))))

    def _hold(self, repetitions: int) -> None:
        seconds = self.MAX_HOLD_S
        if self.enqueue_s is not None:
            seconds = min(seconds, self.HOLD_FACTOR * self.enqueue_s * repetitions)
        self.torch.cuda._sleep(int((seconds + self.HOLD_EXTRA_S) * self.CYCLES_PER_S))

    def round(self, samples: int) -> list[float]:
        __tracebackhide__ = True
        torch = self.torch
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(samples)]
        done = 0
        while done < samples:
            chunk = min(samples - done, self._chunk()) if self.can_hold else samples
            if self.can_hold:
                self._hold(chunk)
            t0 = self.clock()
            for start, end in zip(starts[done : done + chunk], ends[done : done + chunk]):
                self.flush_l2()
                start.record()
                self.call()
                end.record()
            self.enqueue_s = (self.clock() - t0) / chunk
            done += chunk
        torch.cuda.synchronize(self.device)  # one synchronisation per round
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]


class CudaGraphTimer(_CudaTimerBase):
    """Replays of a graph holding ``reps`` (flush, call) pairs minus a graph of ``reps`` flushes."""

    name = "cuda_graph"
    REPS = 10

    def __init__(self, call: Call, device: Any, *, torch: Any = None):
        super().__init__(call, device, torch=torch)
        self.work_graph = None
        self.flush_graph = None

    def _capture(self) -> None:
        torch = self.torch
        stream = torch.cuda.Stream(device=self.device)
        stream.wait_stream(torch.cuda.current_stream(self.device))
        with torch.cuda.stream(stream):
            self.call()  # a warm call on the capture stream (allocator pools, lazy init)
        torch.cuda.current_stream(self.device).wait_stream(stream)
        torch.cuda.synchronize(self.device)
        self.work_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.work_graph):
            for _ in range(self.REPS):
                self.flush_l2()
                self.call()
        self.flush_graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.flush_graph):
            for _ in range(self.REPS):
                self.flush_l2()
        torch.cuda.synchronize(self.device)

    def round(self, samples: int) -> list[float]:
        __tracebackhide__ = True
        torch = self.torch
        if self.work_graph is None:
            try:
                self._capture()
            except RuntimeError as exc:
                raise TimerError(
                    f"cuda_graph timer: the benchmarked function cannot be captured in a CUDA graph "
                    f"({exc}); use --bench-timer=cuda_event or @pytest.mark.bench(timer='cuda_event')"
                ) from exc
        events = [[torch.cuda.Event(enable_timing=True) for _ in range(4)] for _ in range(samples)]
        for e0, e1, e2, e3 in events:
            e0.record()
            self.work_graph.replay()
            e1.record()
            e2.record()
            self.flush_graph.replay()
            e3.record()
        torch.cuda.synchronize(self.device)
        return [max(e0.elapsed_time(e1) - e2.elapsed_time(e3), 0.0) / self.REPS for e0, e1, e2, e3 in events]


def cuda_device_of(values: Iterable[Any]) -> Any | None:
    """The device of the first CUDA tensor among ``values`` (nested lists/tuples/dicts too)."""

    torch = sys.modules.get("torch")
    if torch is None:  # no tensor can exist if torch was never imported
        return None
    stack = list(values)
    while stack:
        value = stack.pop()
        if isinstance(value, torch.Tensor):
            if value.is_cuda:
                return value.device
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
        elif isinstance(value, dict):
            stack.extend(value.values())
    return None


def make_timer(kind: str, call: Call, args: tuple, kwargs: dict, *, interpreted: bool, result: Any = None):
    """The timer for this call: ``kind`` from settings ("auto" picks from where the data lives:
    the arguments, or else what the first call returned, for a closure over its tensors)."""
    device = cuda_device_of((args, kwargs, result))
    if interpreted:
        # The kernel ran in the Triton interpreter on the CPU: recorded, never gated.
        return CpuTimer(call, label="interpreter")
    if kind == "auto":
        kind = "cuda_event" if device is not None else "cpu"
    if kind == "cpu":
        return CpuTimer(call)
    if device is None:
        raise TimerError(
            f"timer {kind} needs CUDA tensors among the benchmark's arguments or what it returns, and there are none; "
            f"use --bench-timer=auto or cpu"
        )
    if kind == "cuda_event":
        return CudaEventTimer(call, device)
    return CudaGraphTimer(call, device)
