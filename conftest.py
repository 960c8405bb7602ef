"""Repository-wide test set-up.

Without a GPU, the plugin itself runs Triton kernels in the interpreter (``--bench-interpret``,
auto by default), so nothing here needs to. ``pytester`` drives the plugin's own tests.
"""

import os

pytest_plugins = ["pytester"]

# Triton 3.9 warns until this is set; "1" keeps its current default (fused multiply-add on).
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "1")
