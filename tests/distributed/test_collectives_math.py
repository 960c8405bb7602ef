"""Bus bandwidth exactly as nccl-tests defines it, computed here independently of the module."""

import pytest
from nccl_tests_factors import FACTORS as NCCL_TESTS_FACTORS

from pytest_tesserabench.distributed import collectives


@pytest.mark.parametrize("op", collectives.OPS)
@pytest.mark.parametrize("n", [1, 2, 3, 4, 8, 72])
def test_bus_factor_is_nccl_tests(op, n):
    assert collectives.bus_factor(op, n) == pytest.approx(NCCL_TESTS_FACTORS[op](n), rel=0, abs=1e-15)


def test_known_values():
    assert collectives.bus_factor("all_reduce", 8) == 1.75
    assert collectives.bus_factor("all_gather", 4) == 0.75
    assert collectives.bus_factor("all_reduce", 1) == 0.0


def test_bandwidths_in_gb_per_s():
    # 1 GiB all-reduced on 8 ranks in 10 ms: algbw 107.37 GB/s, busbw 1.75x that.
    algbw, busbw = collectives.bandwidths("all_reduce", 1 << 30, 0.01, 8)
    assert algbw == pytest.approx(107.374182)
    assert busbw == pytest.approx(107.374182 * 1.75)


def test_unknown_operations_and_worlds_are_refused():
    with pytest.raises(ValueError, match="unknown collective 'allreduce'"):
        collectives.bus_factor("allreduce", 2)
    with pytest.raises(ValueError):
        collectives.bus_factor("all_reduce", 0)


def test_sizes_and_their_names():
    assert collectives.sizes(1024, 1 << 30, 4)[:3] == [1024, 4096, 16384]
    assert collectives.sizes(1024, 1 << 30, 4)[-1] == 1 << 30
    assert [collectives.format_size(s) for s in (1000, 1024, 3 << 20, 1 << 30)] == ["1000B", "1KiB", "3MiB", "1GiB"]
