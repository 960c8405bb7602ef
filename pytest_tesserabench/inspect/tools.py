"""Find and run the NVIDIA binary tools (nvdisasm, cuobjdump) that Triton's wheel ships."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path


class ToolMissing(RuntimeError):
    """The tool is not installed; callers degrade to the levels still available."""


def find_tool(name: str) -> str:
    """Triton's configured path (knobs.nvidia.<name>), its bundled bin/, then PATH."""
    # triton (~0.2 s) is optional here: without it, PATH alone
    candidates = []
    try:
        from triton import knobs

        tool = getattr(knobs.nvidia, name, None)
        if tool is not None and getattr(tool, "path", None):
            candidates.append(tool.path)
    except Exception:  # noqa: BLE001 - an older Triton or a broken knob: try the others
        pass
    try:
        import triton

        candidates.append(str(Path(triton.__file__).parent / "backends" / "nvidia" / "bin" / name))
    except ImportError:
        pass
    candidates.append(shutil.which(name) or "")
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise ToolMissing(f"{name} not found (looked in Triton's bundled tools and on PATH)")


def run_on_cubin(tool: str, arguments: list[str], cubin: bytes, timeout: float = 60.0) -> str:
    """Run `tool *arguments <cubin file>` and return its stdout; failures raise RuntimeError."""
    path = find_tool(tool)
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as handle:
        handle.write(cubin)
    try:
        result = subprocess.run(
            [path, *arguments, handle.name], capture_output=True, text=True, timeout=timeout, check=False
        )
    finally:
        os.unlink(handle.name)
    if result.returncode != 0:
        raise RuntimeError(f"{tool} failed ({result.returncode}): {result.stderr.strip()[:500]}")
    return result.stdout


def disassemble(cubin: bytes) -> str:
    """SASS of the cubin's code sections (`nvdisasm -c`)."""
    return run_on_cubin("nvdisasm", ["-c"], cubin)


def res_usage(cubin: bytes) -> str:
    """`cuobjdump -res-usage`: NVIDIA's own report of registers, shared, local memory."""
    return run_on_cubin("cuobjdump", ["-res-usage"], cubin)
