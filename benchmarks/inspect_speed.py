"""Cold and warm cost of static analysis per kernel specialization and target.

    .venv/bin/python benchmarks/inspect_speed.py

Cold: empty analysis cache, real compile (TTIR..cubin) + nvdisasm + parsing. The first
compile in a process also pays Triton's one-time start-up; it is printed separately.
Warm: the same launches again against the filled cache.
"""

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "inspect"))

import inspect_sample_kernels as samples  # noqa: E402
import torch  # noqa: E402

from pytest_tesserabench.inspect import analyse_launches, specialize  # noqa: E402

ARCHS = ("sm_90", "sm_80")


def launches():
    x = torch.empty(4096)
    a = torch.empty(256, 256, dtype=torch.float16)
    yield "vector_add", specialize(samples.vector_add_kernel, (x, x, x, 4096), {"BLOCK": 1024})
    for stages in (2, 3):
        yield (
            f"matmul s{stages}",
            specialize(
                samples.small_matmul_kernel,
                (a, a, a, 256, 256, 256, 256, 256, 256),
                {"BM": 64, "BN": 64, "BK": 32, "num_warps": 4, "num_stages": stages},
            ),
        )


def main():
    with tempfile.TemporaryDirectory() as cache:
        start = time.perf_counter()
        analyse_launches([next(launches())[1]], ["sm_86"], cache_dir=None)
        print(f"first compile in this process (Triton start-up included): {time.perf_counter() - start:.2f} s")
        cold, warm = [], []
        for label, launch in launches():
            for arch in ARCHS:
                start = time.perf_counter()
                analyse_launches([launch], [arch], cache_dir=cache)
                cold.append(time.perf_counter() - start)
                print(f"cold {label:12s} {arch}: {cold[-1] * 1000:7.1f} ms")
        for _ in range(5):
            for _label, launch in launches():
                for arch in ARCHS:
                    start = time.perf_counter()
                    analyse_launches([launch], [arch], cache_dir=cache)
                    warm.append(time.perf_counter() - start)
        print(
            f"cold per kernel and target: median {statistics.median(cold) * 1000:.0f} ms, "
            f"max {max(cold) * 1000:.0f} ms (budget 2000 ms)"
        )
        print(
            f"warm per kernel and target: median {statistics.median(warm) * 1000:.1f} ms, "
            f"max {max(warm) * 1000:.1f} ms (budget 50 ms)"
        )


if __name__ == "__main__":
    main()
