"""The static estimate: how the tuner ranks configs when no GPU can time them.

It is an ESTIMATE, not a measurement, and every output that shows it says so. The model is a
wave-quantised tile roofline on a reference GPU of the target architecture:

* ``resident = SMs x blocks per SM`` (blocks per SM from the compiled config's registers,
  shared memory and warps: the occupancy calculator of ``inspect``);
* ``waves = ceil(programs / resident)``: a partly filled last wave costs a full one;
* each resident program gets ``1 / resident`` of the peak tensor throughput and of the DRAM
  bandwidth, and needs ``max(flops / its share of compute, bytes / its share of bandwidth)``,
  with its tile loads counted at DRAM bandwidth (no credit for L2 reuse);
* estimate = waves x that time.

What it captures: wave quantisation, occupancy (fewer resident programs per wave), and the
traffic small tiles cause. What it ignores: latency hiding, L2 hits, instruction issue,
pipelining depth beyond its shared-memory cost. It is meant for CI to check that a space still
yields legal, spill-free configs and for ordering the first configs a search times, not to
pick the config that ships.
"""

from __future__ import annotations

import math

from pytest_tesserabench.machine.roofline import PEAK_TABLE

from .tunable import Work

# A reference GPU per architecture: (name in roofline.PEAK_TABLE, SM count from its datasheet).
REFERENCE_GPUS = {
    "sm_80": ("NVIDIA A100 SXM 80GB", 108),
    "sm_89": ("NVIDIA L40S", 142),
    "sm_90": ("NVIDIA H100 SXM", 132),
    "sm_100": ("NVIDIA B200", 148),
}


def reference_gpu(arch: str) -> str | None:
    entry = REFERENCE_GPUS.get(arch)
    return entry[0] if entry else None


def estimate_ms(work: Work, record: dict, arch: str) -> float | None:
    """Estimated milliseconds of one launch, or None when the arch has no reference GPU.

    ``math.inf`` when the compiled config cannot be resident at all (0 blocks per SM).
    """

    entry = REFERENCE_GPUS.get(arch)
    blocks = record.get("blocks_per_sm")
    if entry is None or blocks is None:
        return None
    name, sms = entry
    peaks = PEAK_TABLE[name]
    if blocks <= 0 or work.programs <= 0:
        return math.inf if blocks <= 0 else 0.0
    resident = sms * blocks
    waves = math.ceil(work.programs / resident)
    flops_per_s = peaks.tflops[work.precision] * 1e12 / resident
    bytes_per_s = peaks.gbps * 1e9 / resident
    per_program = max(work.flops_per_program / flops_per_s, work.bytes_per_program / bytes_per_s)
    return waves * per_program * 1e3


__all__ = ["REFERENCE_GPUS", "estimate_ms", "reference_gpu"]
