"""What consulting the tuning cache costs a kernel launch (no GPU needed).

    .venv/bin/python benchmarks/tune_lookup_overhead.py

The matmul launcher asks ``tuning.lookup.tuned_config`` on every call. This times that question
for a cached problem (a hit) and an uncached one (a miss), after the first call has read the file,
with the device's architecture answered as sm_90 (a CPU has none, and would skip the lookup).
"""

import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

import torch  # noqa: E402

from kernels import matmul  # noqa: E402
from pytest_tesserabench.tuning import lookup  # noqa: E402
from pytest_tesserabench.tuning.cache import ENV_CACHE, TuningCache, kernel_source_hash, triton_version  # noqa: E402

CALLS = int(os.environ.get("CALLS", 200_000))


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "tuning_cache.json"
        os.environ[ENV_CACHE] = str(path)
        shape = {"M": 4096, "N": 4096, "K": 4096}
        TuningCache(path).record(
            {
                "kernel": "matmul",
                "source_hash": kernel_source_hash(matmul.TUNABLE.kernel()),
                "bucket": shape,
                "shape": shape,
                "dtypes": ["bf16"],
                "arch": "sm_90",
                "triton": triton_version(),
                "config": {"BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 256, "BLOCK_SIZE_K": 64, "num_warps": 8},
                "method": "measured",
            }
        )
        lookup.device_arch = lambda device: "sm_90"
        device = torch.device("cpu")
        for label, M in (("hit", 4096), ("miss", 8192)):
            assert (matmul._tuned(M, 4096, 4096, torch.bfloat16, device) is not None) == (label == "hit")
            start = time.perf_counter()
            for _ in range(CALLS):
                matmul._tuned(M, 4096, 4096, torch.bfloat16, device)
            print(f"lookup {label}: {(time.perf_counter() - start) / CALLS * 1e6:.2f} us per launch")


if __name__ == "__main__":
    main()
