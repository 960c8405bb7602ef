"""How the CUDA timers' L2 flush changes what they read, beside Nsight Compute (GPU only).

The timers flush L2 before each timed call by writing a buffer twice L2's size. A write leaves L2
full of dirty lines: a memory-bound kernel that follows pays for writing them back inside its
timed window. Reading the buffer instead leaves L2 just as cold but clean. This probe times
three memory-bound kernels and a compute-bound one with each flush (write, read, none), with both timers,
interleaved, beside ncu's gpu__time_duration (caches flushed and invalidated by ncu, clocks left
alone), and runs bench()'s async check on a warmed side-stream matmul.

    python3 benchmarks/gpu_flush_probe.py [--out DIR]     # on a GPU machine, about a minute
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_truth  # noqa: E402  (its timing loop, its ncu child; it puts the repository on sys.path)

ROOT = gpu_truth.ROOT
FLUSHES = ("write", "read", "none")


def kernels() -> dict:
    """name -> (call, substring of its kernel name in ncu's report)."""
    import torch

    from kernels import attention, layernorm, softmax

    torch.manual_seed(0)
    x = torch.randn(1 << 20, device="cuda")
    y, z = torch.randn_like(x), torch.empty_like(x)
    rows = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    wide = torch.randn(4096, 8192, device="cuda", dtype=torch.bfloat16)
    weight = torch.ones(8192, device="cuda", dtype=torch.bfloat16)
    q, k, v = (torch.randn(4, 16, 4096, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    return {  # memory-bound kernels of 6-60 us, then a compute-bound one of about 1 ms
        "vector_add 1M fp32": (lambda: torch.add(x, y, out=z), "elementwise"),
        "softmax 4096x4096 bf16": (lambda: softmax.softmax(rows), "softmax"),
        "rms_norm 4096x8192 bf16": (lambda: layernorm.rms_norm(wide, weight), "norm"),
        "attention B4 H16 S4096 D128 bf16": (lambda: attention.attention(q, k, v), "attn"),
    }


def with_flush(timer, flush: str):
    if flush == "read":
        timer.flush_l2 = lambda: timer.flush_buffer.sum()
    elif flush == "none":
        timer.flush_l2 = lambda: None
    return timer


def time_all(rounds: int = 5, samples: int = 20) -> dict:
    import triton.testing

    from pytest_tesserabench.measure.timing import CudaEventTimer, CudaGraphTimer

    table = {}
    for name, (call, _) in kernels().items():
        timers = {
            f"{kind}/{flush}": with_flush(cls(call, "cuda"), flush)
            for kind, cls in (("event", CudaEventTimer), ("graph", CudaGraphTimer))
            for flush in FLUSHES
        }
        medians = gpu_truth.interleaved_medians(timers, rounds, samples)
        row = {key: ms * 1e3 for key, ms in medians.items()}  # us
        row["do_bench"] = triton.testing.do_bench(call, warmup=25, rep=100, return_mode="median") * 1e3
        table[name] = row
        print(name, {key: round(value, 2) for key, value in row.items()}, flush=True)
    return table


def ncu_medians(out: Path) -> dict:
    from pytest_tesserabench.machine import profiling

    ncu = profiling.ncu_available()
    if ncu is None:
        return {"skipped": profiling.ncu_skip_reason()}
    log = out / "ncu-flush.csv"
    command = profiling.ncu_argv(
        [sys.executable, str(Path(__file__).resolve()), "--ncu-child"],
        [profiling.GPU_TIME],
        ncu=ncu,
        log_file=log,
        clock_control="none",
    )
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if not log.exists():
        return {"failed": (done.stdout + done.stderr)[-1500:]}
    launches = profiling.parse_ncu_csv(log.read_text())
    medians = {}
    for name, (_, match) in kernels().items():
        found = [profiling._gpu_time_ms(k) for k in launches if match in k["name"].lower()]
        times = [ms * 1e3 for ms in found if ms is not None]
        medians[name] = {"median_us": statistics.median(times) if times else None, "launches": len(times)}
    return medians


def async_check() -> dict:
    import torch

    from pytest_tesserabench.measure import integrity

    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    side = torch.cuda.Stream()

    def on_side_stream():
        with torch.cuda.stream(side):
            return a @ a

    for call in (on_side_stream, lambda: a @ a):  # warm: cuBLAS handles and workspaces per stream
        call()
    torch.cuda.synchronize()
    return {
        "side stream (warmed)": integrity.check_async(on_side_stream, torch, "cuda"),
        "current stream (warmed)": integrity.check_async(lambda: a @ a, torch, "cuda"),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", ROOT / ".bench-out")))
    parser.add_argument("--ncu-child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.ncu_child:
        gpu_truth.profile_calls([call for call, _ in kernels().values()])
        return 0
    args.out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    result = {"timers_us": time_all()}
    result["timers_seconds"] = round(time.monotonic() - started, 1)
    path = args.out / "flush.json"
    path.write_text(json.dumps(result, indent=1, default=str))
    result["async"] = async_check()
    print("async:", result["async"], flush=True)
    path.write_text(json.dumps(result, indent=1, default=str))
    result["ncu_us"] = ncu_medians(args.out)
    print("ncu:", result["ncu_us"], flush=True)
    result["seconds"] = round(time.monotonic() - started, 1)
    path.write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
