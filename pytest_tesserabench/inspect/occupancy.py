"""Theoretical occupancy, following the CUDA Occupancy Calculator's rules.

The rules mirror `cuda_occupancy.h` (CUDA toolkit; the spreadsheet computes the same):
- warps: a block occupies ceil(threads / 32) warp slots of the SM's maximum;
- registers: each warp gets registers_per_thread * 32 rounded up to the allocation unit
  (256); registers come from 4 sub-partitions of 64K / 4 each, so an SM holds
  4 * floor(16384 / regs_per_warp) warps; a block also must fit the per-block limit, checked
  with its warp count rounded up to a multiple of the 4 partitions (the hardware check);
- shared memory: static + dynamic + the 1 KB system reservation per block, rounded up to the
  128-byte granularity, out of the SM's largest carveout; a block needing more than the
  opt-in per-block maximum cannot launch at all;
- blocks: at most max_blocks_per_sm resident blocks.
The resident block count is the minimum of the four; the resource giving it is the limiter.
"""

from __future__ import annotations

from dataclasses import dataclass

from .archs import ArchLimits

# When several resources allow the same block count, the first one named here is reported:
# a kernel that reaches the architectural warp or block cap is not limited by its registers
# or shared memory (using fewer would not add a block).
LIMITER_ORDER = ("warps", "blocks", "registers", "shared_memory")


@dataclass(frozen=True)
class Occupancy:
    blocks_per_sm: int
    active_warps: int
    occupancy: float  # active warps / max warps per SM
    limiter: str  # one of LIMITER_ORDER
    per_resource: dict  # resource -> blocks it alone would allow
    note: str | None = None


def _round_up(value: int, unit: int) -> int:
    return -(-value // unit) * unit


def theoretical_occupancy(
    limits: ArchLimits, *, threads_per_block: int, registers_per_thread: int, shared_bytes_per_block: int
) -> Occupancy:
    if threads_per_block <= 0:
        raise ValueError(f"threads_per_block must be positive, got {threads_per_block}")
    warps_per_block = -(-threads_per_block // limits.warp_size)
    notes = []

    by_warps = limits.max_warps_per_sm // warps_per_block
    if threads_per_block > limits.max_threads_per_block:
        by_warps = 0
        notes.append(f"{threads_per_block} threads exceed the {limits.max_threads_per_block} per block")

    regs_per_warp = _round_up(registers_per_thread * limits.warp_size, limits.register_allocation_unit)
    regs_per_block_hw = regs_per_warp * _round_up(warps_per_block, limits.register_sub_partitions)
    if regs_per_warp == 0:
        by_registers = limits.max_blocks_per_sm
    elif max(regs_per_block_hw, regs_per_warp * warps_per_block) > limits.registers_per_block:
        by_registers = 0
        notes.append(
            f"{registers_per_thread} registers x {threads_per_block} threads exceed the per-block register file"
        )
    else:
        per_partition = limits.registers_per_sm // limits.register_sub_partitions
        warps_per_sm = (per_partition // regs_per_warp) * limits.register_sub_partitions
        by_registers = warps_per_sm // warps_per_block

    shared_allocated = _round_up(
        shared_bytes_per_block + limits.shared_reserved_per_block, limits.shared_allocation_unit
    )
    if shared_bytes_per_block > limits.shared_per_block:
        by_shared = 0
        notes.append(
            f"{shared_bytes_per_block} bytes of shared memory exceed the "
            f"{limits.shared_per_block} per block on {limits.name}"
        )
    else:
        by_shared = limits.shared_per_sm // shared_allocated

    per_resource = {
        "registers": by_registers,
        "shared_memory": by_shared,
        "warps": by_warps,
        "blocks": limits.max_blocks_per_sm,
    }
    blocks = min(per_resource.values())
    limiter = next(name for name in LIMITER_ORDER if per_resource[name] == blocks)
    active_warps = blocks * warps_per_block
    return Occupancy(
        blocks_per_sm=blocks,
        active_warps=active_warps,
        occupancy=active_warps / limits.max_warps_per_sm,
        limiter=limiter,
        per_resource=per_resource,
        note="; ".join(notes) or None,
    )
