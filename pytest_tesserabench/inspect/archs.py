"""GPU targets accepted for static analysis and their documented per-SM limits.

Sources, checked against each other:
- CUDA C++ Programming Guide, "Compute Capabilities", table "Technical Specifications per
  Compute Capability" (max warps / blocks per SM, 32-bit registers per SM and per block,
  shared memory per SM and per block).
- CUDA Occupancy Calculator (the spreadsheet and its C implementation `cuda_occupancy.h`
  shipped with the CUDA toolkit): register allocation unit 256 registers per warp, registers
  allocated per warp in the SM's 4 sub-partitions, shared-memory allocation granularity
  128 bytes on compute capability 8.x and later, 1 KB of shared memory reserved by the
  system per block (`cudaDeviceProp::reservedSharedMemPerBlock`) on 8.x and later.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

KIB = 1024


@dataclass(frozen=True)
class ArchLimits:
    """What one streaming multiprocessor of a compute capability offers a kernel."""

    name: str  # "sm_90"
    capability: int  # 90, as Triton's GPUTarget wants it
    max_warps_per_sm: int
    max_blocks_per_sm: int
    registers_per_sm: int
    registers_per_block: int
    max_registers_per_thread: int
    register_allocation_unit: int  # registers, per warp
    register_sub_partitions: int  # warps' registers come from one of this many partitions
    shared_per_sm: int  # bytes, largest carveout
    shared_per_block: int  # bytes, the opt-in maximum (Triton opts in)
    shared_reserved_per_block: int  # bytes the system keeps per resident block
    shared_allocation_unit: int  # bytes
    max_threads_per_block: int = 1024
    warp_size: int = 32


def _limits(
    name: str, capability: int, *, warps: int, blocks: int, smem_sm_kib: int, smem_block_kib: int
) -> ArchLimits:
    # Registers (64K per SM and per block, 255 per thread, unit 256, 4 partitions), the 1 KB
    # per-block reservation and the 128-byte shared granularity are common to sm_80..sm_100.
    return ArchLimits(
        name=name,
        capability=capability,
        max_warps_per_sm=warps,
        max_blocks_per_sm=blocks,
        registers_per_sm=64 * KIB,
        registers_per_block=64 * KIB,
        max_registers_per_thread=255,
        register_allocation_unit=256,
        register_sub_partitions=4,
        shared_per_sm=smem_sm_kib * KIB,
        shared_per_block=smem_block_kib * KIB,
        shared_reserved_per_block=1 * KIB,
        shared_allocation_unit=128,
    )


# Programming Guide table: 8.0 A100; 8.6 GA10x; 8.9 Ada; 9.0 H100/H200; 10.0 B200.
ARCH_LIMITS: dict[str, ArchLimits] = {
    limits.name: limits
    for limits in (
        _limits("sm_80", 80, warps=64, blocks=32, smem_sm_kib=164, smem_block_kib=163),
        _limits("sm_86", 86, warps=48, blocks=16, smem_sm_kib=100, smem_block_kib=99),
        _limits("sm_89", 89, warps=48, blocks=24, smem_sm_kib=100, smem_block_kib=99),
        _limits("sm_90", 90, warps=64, blocks=32, smem_sm_kib=228, smem_block_kib=227),
        _limits("sm_100", 100, warps=64, blocks=32, smem_sm_kib=228, smem_block_kib=227),
    )
}

ACCEPTED_ARCHS: tuple[str, ...] = tuple(ARCH_LIMITS)
FALLBACK_ARCH = "sm_90"

_ARCH_PATTERN = re.compile(r"^sm_?(\d{2,3})a?$")


def normalise_arch(text: str) -> str:
    """'sm_90', 'SM90', 'sm_90a' -> 'sm_90'; anything not accepted is a ValueError."""
    match = _ARCH_PATTERN.match(text.strip().lower())
    name = f"sm_{match.group(1)}" if match else None
    if name not in ARCH_LIMITS:
        raise ValueError(
            f"unknown GPU architecture {text.strip()!r}: accepted are {', '.join(ACCEPTED_ARCHS)} "
            f"(e.g. --bench-arch=sm_90,sm_80)"
        )
    return name


def parse_archs(text: str | None) -> tuple[str, ...]:
    """'sm_90,sm_80' -> ('sm_90', 'sm_80'), de-duplicated in order; empty text is an error."""
    parts = [part for part in (text or "").split(",") if part.strip()]
    if not parts:
        raise ValueError(f"no GPU architecture given: pass a comma-separated list of {', '.join(ACCEPTED_ARCHS)}")
    return tuple(dict.fromkeys(normalise_arch(part) for part in parts))


def arch_from_capability(major: int, minor: int) -> str | None:
    name = f"sm_{major}{minor}"
    return name if name in ARCH_LIMITS else None


def default_archs() -> tuple[str, ...]:
    """The live GPU's architecture when torch sees one (and it is supported), else sm_90.

    Called only when analysis is requested, never at import time: torch (~1.2 s, optional) is
    imported here, not by `--bench-arch` parsing or `tesserabench inspect --help`.
    """
    try:
        import torch

        if torch.cuda.is_available():
            live = arch_from_capability(*torch.cuda.get_device_capability())
            if live:
                return (live,)
    except ImportError:
        pass
    return (FALLBACK_ARCH,)
