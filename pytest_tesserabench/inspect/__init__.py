"""Static kernel analysis: compile captured Triton kernels for named GPU targets (no GPU
needed) and read every level: TTIR, TTGIR, PTX, SASS, resources and occupancy.

Importing this package imports neither torch nor triton; they load when a function runs.
"""

from __future__ import annotations

from importlib import import_module

_EXPORTS = {
    "KernelLaunch": "capture",
    "capture_launches": "capture",
    "specialize": "capture",
    "analyse_launches": "analysis",
    "dump_paths": "analysis",
    "format_kernel_lines": "summary",
    "parse_archs": "archs",
    "default_archs": "archs",
    "ACCEPTED_ARCHS": "archs",
    "ARCH_LIMITS": "archs",
    "theoretical_occupancy": "occupancy",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
