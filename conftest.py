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


if not _gpu_present():
    os.environ.setdefault("TRITON_INTERPRET", "1")
