"""GPU validation: do different ways of timing a kernel agree, and which ones lie?

Run on a CUDA machine (written for an H100); prints a markdown table for the GPU-validation
document. For each kernel it reports the median time per call (microseconds) measured by
  do_bench        triton.testing.do_bench (flushes L2 before each call, events per call)
  cudagraph       triton.testing.do_bench_cudagraph (calls replayed from a CUDA graph, no flush)
  events          CUDA events around each call, L2 warm (the same inputs again and again)
  events+flush    CUDA events around each call, L2 flushed before each (a 2x-L2 buffer
                  is written outside the timed window, as TesseraBench's CUDA timer does)
  batched         CUDA events around a batch of back-to-back calls, divided by the batch size
  ncu             Nsight Compute gpu__time_duration.sum (with --ncu): the kernel's own duration
                  (run with --clock-control none so clocks are as free as for the other timers;
                  ncu still flushes caches between replay passes, so it is a cold-L2 figure)

Kernels: a bf16 4096^3 torch.matmul; a 1 GiB device-to-device copy; an fp32 add sized to take
about 10 us on an H100 (2.5 M elements, 30 MB of traffic: fits in the 50 MB L2, so warm and
flushed timings differ); a tiny add (64 K elements) taking about 2 us, dominated by launch cost.

    python benchmarks/gpu_validation.py                 # all kernels, all timers
    python benchmarks/gpu_validation.py --ncu           # adds the ncu column (needs ncu)
    python benchmarks/gpu_validation.py --json out.json # the raw figures as well

Nothing here runs at import time; ``--help`` works without a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

try:
    from pytest_tesserabench.machine import device as machine
    from pytest_tesserabench.machine import profiling
except ImportError:  # run from a checkout without installing the package
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from pytest_tesserabench.machine import device as machine
    from pytest_tesserabench.machine import profiling


@dataclass(frozen=True)
class KernelSpec:
    name: str
    description: str
    flops: float | None
    bytes: float


MATMUL_N = 4096
COPY_BYTES = 1024**3
ADD_10US_ELEMENTS = 2_500_000
ADD_2US_ELEMENTS = 65_536

KERNELS = {
    "matmul": KernelSpec("matmul", f"torch.matmul bf16 {MATMUL_N}^3", 2 * MATMUL_N**3, 3 * MATMUL_N**2 * 2),
    "copy": KernelSpec("copy", "1 GiB device-to-device copy", None, 2 * COPY_BYTES),
    "add_10us": KernelSpec("add_10us", f"fp32 add, {ADD_10US_ELEMENTS:,} elements", None, 3 * 4 * ADD_10US_ELEMENTS),
    "add_2us": KernelSpec("add_2us", f"fp32 add, {ADD_2US_ELEMENTS:,} elements", None, 3 * 4 * ADD_2US_ELEMENTS),
}
METHODS = ("do_bench", "cudagraph", "events", "events+flush", "batched", "ncu")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Compare kernel timers on a CUDA GPU (do_bench, CUDA graphs, CUDA events "
        "with and without an L2 flush, Nsight Compute) and print a markdown table."
    )
    parser.add_argument(
        "--kernels", default=",".join(KERNELS), help=f"comma-separated subset of {', '.join(KERNELS)} (default: all)"
    )
    parser.add_argument("--reps", type=int, default=200, help="timed calls per event-based method (default 200)")
    parser.add_argument(
        "--ncu", action="store_true", help="also run each kernel under Nsight Compute for gpu__time_duration"
    )
    parser.add_argument("--json", type=Path, help="also write the raw figures to this file")
    parser.add_argument("--ncu-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    names = [name.strip() for name in args.kernels.split(",") if name.strip()]
    unknown = [name for name in names if name not in KERNELS]
    if unknown or not names:
        parser.error(f"--kernels: unknown {unknown or 'empty list'}; choose from {', '.join(KERNELS)}")
    if args.reps < 10:
        parser.error(f"--reps must be at least 10 for a meaningful median, got {args.reps}")
    args.kernels = names
    return args


# ---- formatting (CPU-testable) -------------------------------------------------------------


def format_us(ms: float | None) -> str:
    """Milliseconds as microseconds with about four significant digits; a dash when absent."""
    if ms is None:
        return "—"
    us = ms * 1e3
    return f"{us:,.0f}" if us >= 1000 else f"{us:.4g}"


def format_table(results: dict[str, dict[str, float | None]]) -> str:
    """Markdown table: one row per kernel, one column per method, microseconds per call."""
    methods = [method for method in METHODS if any(row.get(method) is not None for row in results.values())]
    lines = [
        "| kernel | " + " | ".join(f"{method} (µs)" for method in methods) + " |",
        "|---|" + "---:|" * len(methods),
    ]
    for name, row in results.items():
        label = KERNELS[name].description if name in KERNELS else name
        lines.append(f"| {label} | " + " | ".join(format_us(row.get(m)) for m in methods) + " |")
    return "\n".join(lines)


def ncu_ms_per_call(csv_text: str, calls: int) -> float:
    """Total gpu__time_duration of the profiled kernels divided by the calls made."""
    summary = profiling.summarize_ncu(profiling.parse_ncu_csv(csv_text))
    if not summary["gpu_time_ms"]:
        raise profiling.NcuError("ncu reported no gpu__time_duration for the profiled kernels")
    return summary["gpu_time_ms"] / calls


# ---- GPU work ------------------------------------------------------------------------------


def make_kernel(name: str):
    """A zero-argument callable launching the kernel on freshly made random inputs."""
    import torch

    if name == "matmul":
        a = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=torch.bfloat16)
        b = torch.randn(MATMUL_N, MATMUL_N, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(a)
        return lambda: torch.matmul(a, b, out=out)
    if name == "copy":
        src = torch.randint(0, 256, (COPY_BYTES,), device="cuda", dtype=torch.uint8)
        dst = torch.empty_like(src)
        return lambda: dst.copy_(src)
    size = ADD_10US_ELEMENTS if name == "add_10us" else ADD_2US_ELEMENTS
    x, y = torch.randn(size, device="cuda"), torch.randn(size, device="cuda")
    out = torch.empty_like(x)
    return lambda: torch.add(x, y, out=out)


def time_with_events(fn, reps: int, flush: bool) -> float:
    import torch

    flush_buffer = None
    if flush:
        flush_buffer = torch.zeros(2 * machine.l2_cache_bytes() // 4, device="cuda", dtype=torch.float32)
    for _ in range(10):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for start, end in zip(starts, ends):
        if flush_buffer is not None:
            flush_buffer.sum()  # outside the timed window; a read leaves L2 clean, as bench's timers do
        start.record()
        fn()
        end.record()
    torch.cuda.synchronize()  # one synchronisation for the whole round
    return statistics.median(s.elapsed_time(e) for s, e in zip(starts, ends))


def time_batched(fn, reps: int, rounds: int = 11) -> float:
    import torch

    for _ in range(10):
        fn()
    times = []
    for _ in range(rounds):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / reps)
    return statistics.median(times)


def measure_kernel(name: str, reps: int) -> dict[str, float]:
    import torch
    import triton.testing

    fn = make_kernel(name)
    row = {
        "do_bench": triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"),
        "cudagraph": triton.testing.do_bench_cudagraph(fn, rep=100, return_mode="median"),
        "events": time_with_events(fn, reps, flush=False),
        "events+flush": time_with_events(fn, reps, flush=True),
        "batched": time_batched(fn, reps),
    }
    torch.cuda.empty_cache()
    return row


def ncu_child(names: list[str], calls: int) -> None:
    """Under ncu: warm up outside the NVTX range, then ``calls`` calls inside it."""
    import torch

    os.environ[profiling.NCU_ENV_VAR] = "1"
    for name in names:
        fn = make_kernel(name)
        for _ in range(5):
            fn()
        torch.cuda.synchronize()
        with profiling.ncu_region():
            for _ in range(calls):
                fn()


NCU_CALLS = 5


def measure_with_ncu(name: str) -> float | None:
    ncu = profiling.ncu_available()
    if ncu is None:
        print(f"ncu column skipped: {profiling.ncu_skip_reason()}", file=sys.stderr)
        return None
    with tempfile.TemporaryDirectory() as folder:
        log = Path(folder, "ncu.csv")
        # clocks left as they are: ncu otherwise locks base clocks and its times would not be
        # comparable with the other columns, measured at whatever clock the GPU boosts to
        child = [sys.executable, str(Path(__file__).resolve()), "--ncu-child", "--kernels", name]
        command = profiling.ncu_argv(child, [profiling.GPU_TIME], ncu=ncu, log_file=log, clock_control="none")
        done = subprocess.run(command, capture_output=True, text=True)
        text = log.read_text() if log.exists() else done.stdout
        try:
            return ncu_ms_per_call(text, NCU_CALLS)
        except profiling.NcuError as error:
            print(f"ncu failed for {name}: {error}\n{done.stderr[-800:]}", file=sys.stderr)
            return None


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.ncu_child:
        ncu_child(args.kernels, NCU_CALLS)
        return 0
    if machine.cuda_capability() is None:
        print("gpu_validation.py needs a CUDA GPU; none is usable here", file=sys.stderr)
        return 2
    info = machine.machine_info()
    print(
        f"device: {info['device']} ({info['arch']}), driver {info['driver']}, "
        f"CUDA {info['cuda']}, torch {info['torch']}, triton {info['triton']}, "
        f"L2 {info['l2_bytes']} bytes"
    )
    results = {}
    for name in args.kernels:
        results[name] = measure_kernel(name, args.reps)
        if args.ncu:
            results[name]["ncu"] = measure_with_ncu(name)
    print(format_table(results))
    if args.json:
        args.json.write_text(json.dumps({"machine": info, "results_ms": results}, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
