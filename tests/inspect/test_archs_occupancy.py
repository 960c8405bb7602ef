"""Arch names and the occupancy calculator: pure Python, no Triton."""

import pytest

from pytest_tesserabench.inspect.archs import ARCH_LIMITS, parse_archs
from pytest_tesserabench.inspect.occupancy import theoretical_occupancy


def test_parse_archs_normalises_and_deduplicates():
    assert parse_archs("sm_90,SM80, sm_90a ,sm100") == ("sm_90", "sm_80", "sm_100")


@pytest.mark.parametrize("text", ["sm_70", "sm_91", "hopper", ""])
def test_parse_archs_rejects_unknown_with_the_accepted_list(text):
    with pytest.raises(ValueError) as error:
        parse_archs(text)
    assert "sm_80, sm_86, sm_89, sm_90, sm_100" in str(error.value)


def test_documented_limits():
    table = {
        name: (lim.max_warps_per_sm, lim.max_blocks_per_sm, lim.shared_per_sm // 1024, lim.shared_per_block // 1024)
        for name, lim in ARCH_LIMITS.items()
    }
    assert table == {
        "sm_80": (64, 32, 164, 163),
        "sm_86": (48, 16, 100, 99),
        "sm_89": (48, 24, 100, 99),
        "sm_90": (64, 32, 228, 227),
        "sm_100": (64, 32, 228, 227),
    }


def occupancy(arch, warps, regs, smem):
    return theoretical_occupancy(
        ARCH_LIMITS[arch], threads_per_block=warps * 32, registers_per_thread=regs, shared_bytes_per_block=smem
    )


def test_register_limited_kernel_rounds_per_warp_allocation_up_to_256():
    # 168 regs * 32 = 5376 -> 5376 (a multiple of 256); 16384 / 5376 = 3 warps per partition
    # -> 12 warps per SM -> one 8-warp block: 8 / 64 warps.
    result = occupancy("sm_90", warps=8, regs=168, smem=0)
    assert (result.blocks_per_sm, result.active_warps, result.limiter) == (1, 8, "registers")
    assert result.occupancy == pytest.approx(0.125)
    # 130 regs * 32 = 4160 -> 4352 after rounding: 3 warps per partition, not 3.76.
    assert occupancy("sm_80", warps=4, regs=130, smem=0).blocks_per_sm == 3


def test_shared_memory_counts_the_1kb_reservation_and_128_byte_granularity():
    # 80 KiB + 1 KiB reserved = 82944 B; 164 KiB / 82944 = 2.02 -> 2 blocks on sm_80.
    assert occupancy("sm_80", warps=4, regs=32, smem=80 * 1024).blocks_per_sm == 2
    # 81.5 KiB + 1 KiB = 84480 B: 167936 / 84480 = 1.98 -> 1 block, limited by shared memory.
    result = occupancy("sm_80", warps=4, regs=32, smem=81 * 1024 + 512)
    assert (result.blocks_per_sm, result.limiter) == (1, "shared_memory")
    # 100 B rounds up with the reservation to 1152 B: 233472 // 1152 = 202 blocks, capped at 32.
    assert occupancy("sm_90", warps=1, regs=16, smem=100).limiter == "blocks"


def test_warp_and_block_caps_differ_between_ampere_and_ada():
    assert occupancy("sm_86", warps=4, regs=16, smem=0).active_warps == 48  # 48 warps per SM
    assert occupancy("sm_86", warps=1, regs=16, smem=0).blocks_per_sm == 16  # 16 blocks per SM
    assert occupancy("sm_89", warps=1, regs=16, smem=0).blocks_per_sm == 24
    full = occupancy("sm_90", warps=4, regs=32, smem=0)
    assert (full.occupancy, full.limiter) == (1.0, "warps")  # a tie with registers names warps


def test_a_block_over_the_per_block_limit_cannot_launch():
    result = occupancy("sm_86", warps=4, regs=32, smem=100 * 1024)
    assert result.blocks_per_sm == 0 and result.occupancy == 0
    assert result.limiter == "shared_memory" and "per block on sm_86" in result.note
    assert occupancy("sm_90", warps=4, regs=32, smem=227 * 1024).blocks_per_sm == 1
