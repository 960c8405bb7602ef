"""Repository-wide test set-up.

Without a GPU, Triton kernels run in the interpreter: TRITON_INTERPRET must be set before any
kernel module is imported (``@triton.jit`` reads it at decoration time). A user's own setting wins.
"""

import os

pytest_plugins = ["pytester"]


def _gpu_present() -> bool:
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return os.path.exists("/dev/nvidiactl") or os.path.isdir("/proc/driver/nvidia/gpus")


# Triton 3.9 warns until this is set; "1" keeps its current default (fused multiply-add on).
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")

if not _gpu_present():
    os.environ.setdefault("TRITON_INTERPRET", "1")
