"""The static estimate: a wave-quantised tile roofline on the target's reference GPU."""

import math

import pytest

from pytest_tesserabench.machine.roofline import PEAK_TABLE
from pytest_tesserabench.tuning.estimate import estimate_ms
from pytest_tesserabench.tuning.tunable import Work

H100 = PEAK_TABLE["NVIDIA H100 SXM"]


def test_one_full_wave_of_compute_bound_programs():
    # 132 SMs x 1 block: one wave; each program gets 1/132 of the bf16 peak.
    work = Work(programs=132, flops_per_program=1e9, bytes_per_program=1.0, precision="bf16")
    expected = 1e9 / (H100.tflops["bf16"] * 1e12 / 132) * 1e3
    assert estimate_ms(work, {"blocks_per_sm": 1}, "sm_90") == pytest.approx(expected)


def test_a_partial_last_wave_costs_a_full_one():
    one = Work(programs=132, flops_per_program=1e9, bytes_per_program=1.0, precision="bf16")
    spill_over = Work(programs=133, flops_per_program=1e9, bytes_per_program=1.0, precision="bf16")
    assert estimate_ms(spill_over, {"blocks_per_sm": 1}, "sm_90") == pytest.approx(
        2 * estimate_ms(one, {"blocks_per_sm": 1}, "sm_90")
    )
    # Two blocks per SM hold 264 programs in one wave.
    assert estimate_ms(spill_over, {"blocks_per_sm": 2}, "sm_90") == pytest.approx(
        2 * estimate_ms(one, {"blocks_per_sm": 1}, "sm_90")
    )


def test_memory_bound_programs_are_charged_dram_bandwidth():
    work = Work(programs=108, flops_per_program=1.0, bytes_per_program=1e6, precision="bf16")
    a100 = PEAK_TABLE["NVIDIA A100 SXM 80GB"]
    assert estimate_ms(work, {"blocks_per_sm": 1}, "sm_80") == pytest.approx(1e6 / (a100.gbps * 1e9 / 108) * 1e3)


def test_unlaunchable_and_unknown_targets():
    work = Work(programs=10, flops_per_program=1.0, bytes_per_program=1.0, precision="bf16")
    assert estimate_ms(work, {"blocks_per_sm": 0}, "sm_90") == math.inf
    assert estimate_ms(work, {"blocks_per_sm": 1}, "sm_86") is None  # no reference GPU in the table
    assert estimate_ms(work, {}, "sm_90") is None  # no compiled figures
