"""How close to the hardware's limits did a kernel get: peak table, measured peaks, roofline.

``peaks_for(machine_info())`` looks the device up in a table of vendor datasheet figures;
``measure_peaks(cache_dir)`` measures them on the live GPU once per machine; ``roofline(...)``
turns a benchmark's flops, bytes and time into the record's ``roofline`` field.

Table figures are DENSE tensor-core peaks (NVIDIA datasheets print the 2:4-sparsity figures,
twice as high, with a footnote; those are halved here) at the maximum boost clock, and
theoretical DRAM bandwidth. Sustained clocks under load are often lower, so an efficiency
against the table is a conservative figure; ``measure_peaks`` gives the achievable one.
"""

from __future__ import annotations

import datetime
import json
import os
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path

from filelock import FileLock

from pytest_tesserabench.machine import device as machine
from pytest_tesserabench.record import files

# torch (~1.2 s, the optional GPU stack) loads only to measure a GPU's peaks.

# Peak keys: one per precision a roofline can be drawn for.
PRECISIONS = ("fp32", "tf32", "fp16", "bf16", "fp8")

# Storage spellings (precision.py policies, torch dtype names) -> peak key.
_STORAGE_ALIASES = {
    "fp32": "fp32",
    "float32": "fp32",
    "float": "fp32",
    "tf32": "tf32",
    "fp16": "fp16",
    "float16": "fp16",
    "half": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp8": "fp8",
    "fp8_e4m3": "fp8",
    "fp8_e5m2": "fp8",
    "float8_e4m3fn": "fp8",
    "float8_e5m2": "fp8",
}


class RooflineError(ValueError):
    """Inputs a roofline cannot be drawn from (no work given, no peak for the precision...)."""


@dataclass(frozen=True)
class Peaks:
    """Peak dense throughput per precision (TFLOP/s) and DRAM bandwidth (GB/s) of one device."""

    name: str
    tflops: Mapping[str, float]
    gbps: float
    # Which figures were measured on this machine ("dram" for the bandwidth); the rest are table.
    measured: frozenset[str] = field(default_factory=frozenset)
    declared: bool = False  # from a --bench-peaks file rather than the datasheet table
    cache_bytes: int | None = None  # last-level cache, when declared

    def source_of(self, key: str) -> str:
        return "measured" if key in self.measured else self.origin

    @property
    def origin(self) -> str:
        return "declared" if self.declared else "table"

    def to_json(self) -> dict:
        return {"name": self.name, "tflops": dict(self.tflops), "gbps": self.gbps, "measured": sorted(self.measured)}

    @classmethod
    def from_json(cls, data: Mapping) -> Peaks:
        return cls(
            str(data["name"]),
            {str(k): float(v) for k, v in data["tflops"].items()},
            float(data["gbps"]),
            frozenset(data.get("measured", ())),
        )


def _dense(sparse_tflops: float) -> float:
    """Datasheets print tensor-core peaks with 2:4 sparsity; dense is half."""
    return sparse_tflops / 2


# Vendor datasheet figures. fp32 is the non-tensor (CUDA core) rate.
PEAK_TABLE: dict[str, Peaks] = {
    # NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100), SXM / PCIe / NVL
    # columns; tensor figures there are "with sparsity".
    "NVIDIA H100 SXM": Peaks(
        "NVIDIA H100 SXM",
        {"fp32": 67.0, "tf32": _dense(989), "fp16": _dense(1979), "bf16": _dense(1979), "fp8": _dense(3958)},
        3350.0,
    ),
    "NVIDIA H100 PCIe": Peaks(
        "NVIDIA H100 PCIe",
        {"fp32": 51.0, "tf32": _dense(756), "fp16": _dense(1513), "bf16": _dense(1513), "fp8": _dense(3026)},
        2000.0,
    ),
    "NVIDIA H100 NVL": Peaks(
        "NVIDIA H100 NVL",
        {"fp32": 60.0, "tf32": _dense(835), "fp16": _dense(1671), "bf16": _dense(1671), "fp8": _dense(3341)},
        3900.0,
    ),
    # NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200), SXM / NVL;
    # same compute as H100 SXM / NVL, HBM3e at 4.8 TB/s.
    "NVIDIA H200 SXM": Peaks(
        "NVIDIA H200 SXM",
        {"fp32": 67.0, "tf32": _dense(989), "fp16": _dense(1979), "bf16": _dense(1979), "fp8": _dense(3958)},
        4800.0,
    ),
    "NVIDIA H200 NVL": Peaks(
        "NVIDIA H200 NVL",
        {"fp32": 60.0, "tf32": _dense(835), "fp16": _dense(1671), "bf16": _dense(1671), "fp8": _dense(3341)},
        4800.0,
    ),
    # NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100): 19.5 FP32,
    # 156 TF32, 312 FP16/BF16 dense for every form factor; no FP8. Bandwidth per variant.
    "NVIDIA A100 SXM 40GB": Peaks(
        "NVIDIA A100 SXM 40GB", {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}, 1555.0
    ),
    "NVIDIA A100 SXM 80GB": Peaks(
        "NVIDIA A100 SXM 80GB", {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}, 2039.0
    ),
    "NVIDIA A100 PCIe 40GB": Peaks(
        "NVIDIA A100 PCIe 40GB", {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}, 1555.0
    ),
    "NVIDIA A100 PCIe 80GB": Peaks(
        "NVIDIA A100 PCIe 80GB", {"fp32": 19.5, "tf32": 156.0, "fp16": 312.0, "bf16": 312.0}, 1935.0
    ),
    # NVIDIA L4 datasheet (nvidia.com/en-us/data-center/l4): 30.3 FP32; 120 TF32, 242 FP16/BF16,
    # 485 FP8 with sparsity; 300 GB/s GDDR6.
    "NVIDIA L4": Peaks(
        "NVIDIA L4",
        {"fp32": 30.3, "tf32": _dense(120), "fp16": _dense(242), "bf16": _dense(242), "fp8": _dense(485)},
        300.0,
    ),
    # NVIDIA L40S datasheet (nvidia.com/en-us/data-center/l40s): 91.6 FP32; dense 183 TF32,
    # 362.05 FP16/BF16, 733 FP8 (the sheet prints both dense and sparse); 864 GB/s GDDR6.
    "NVIDIA L40S": Peaks(
        "NVIDIA L40S", {"fp32": 91.6, "tf32": 183.0, "fp16": 362.05, "bf16": 362.05, "fp8": 733.0}, 864.0
    ),
    # NVIDIA Ada GPU Architecture whitepaper, appendix table for GeForce RTX 4090 (boost clock
    # 2520 MHz): 82.6 FP32; dense 82.6 TF32, 165.2 FP16/BF16 with FP32 accumulate (GeForce runs
    # FP32-accumulate at half the FP16-accumulate rate), 330.3 FP8 with FP32 accumulate;
    # 1008 GB/s GDDR6X.
    "NVIDIA GeForce RTX 4090": Peaks(
        "NVIDIA GeForce RTX 4090", {"fp32": 82.6, "tf32": 82.6, "fp16": 165.2, "bf16": 165.2, "fp8": 330.3}, 1008.0
    ),
    # NVIDIA HGX B200 specifications (nvidia.com/en-us/data-center/hgx), "individual Blackwell
    # GPU" column at 1000 W: 75 FP32; 2.2 PF TF32, 4.5 PF FP16/BF16, 9 PF FP8 with sparsity;
    # 7.7 TB/s HBM3e. Earlier NVIDIA material quoted 80 FP32 and 8 TB/s; the newer sheet is used.
    "NVIDIA B200": Peaks(
        "NVIDIA B200",
        {"fp32": 75.0, "tf32": _dense(2200), "fp16": _dense(4500), "bf16": _dense(4500), "fp8": _dense(9000)},
        7700.0,
    ),
}


def _normalize_name(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", " ", name.lower()).strip()


def table_entry_for(device_name: str, memory_gb: float | None = None) -> str | None:
    """The PEAK_TABLE key for a device name as torch/NVML report it, or None if not listed.

    "NVIDIA H100 80GB HBM3" is the SXM part (the PCIe one says "PCIe", the NVL one "NVL");
    A100 names carry their form factor and memory ("NVIDIA A100-SXM4-80GB"), and when the memory
    is missing from the name the device memory decides.
    """
    name = f" {_normalize_name(device_name)} "
    if " gh200 " in name or " gb200 " in name:  # Grace superchips: other memory, not listed
        return None
    if " b200 " in name:
        return "NVIDIA B200"
    for chip in ("h100", "h200"):
        if f" {chip} " in name:
            form = "PCIe" if " pcie " in name else "NVL" if " nvl " in name else "SXM"
            key = f"NVIDIA {chip.upper()} {form}"
            return key if key in PEAK_TABLE else None
    if " a100 " in name:
        form = "PCIe" if " pcie " in name else "SXM"
        big = " 80gb " in name or (" 40gb " not in name and (memory_gb or 0) > 60)
        return f"NVIDIA A100 {form} {'80GB' if big else '40GB'}"
    if " l40s " in name:
        return "NVIDIA L40S"
    if " l4 " in name:
        return "NVIDIA L4"
    if " rtx 4090 " in name and " laptop " not in name and " 4090 d " not in name:
        return "NVIDIA GeForce RTX 4090"
    return None


def peaks_for(info: Mapping) -> Peaks | None:
    """Table peaks for the device in a machine_info() dict; None for a CPU or an unlisted GPU."""
    if not info.get("gpu_count") or not info.get("device"):
        return None
    key = table_entry_for(str(info["device"]), info.get("memory_gb"))
    return PEAK_TABLE[key] if key else None


def peak_key(storage: object) -> str:
    """The peak key for a storage precision: 'bf16', Precision('fp8_e4m3'), 'bfloat16'..."""
    text = str(storage).split("@", 1)[0].strip().lower().removeprefix("torch.")
    if text not in _STORAGE_ALIASES:
        raise RooflineError(
            f"no roofline peak for precision {storage!r}; use one of {', '.join(sorted(set(_STORAGE_ALIASES)))}"
        )
    return _STORAGE_ALIASES[text]


def roofline(flops: float | None, bytes: float | None, time_ms: float, peaks: Peaks, storage: object = "bf16") -> dict:
    """The record's ``roofline`` field for work done in ``time_ms``.

    attainable = min(peak compute, intensity x peak bandwidth); efficiency = achieved /
    attainable. Memory-only kernels (flops None or 0) get efficiency = achieved GB/s / peak GB/s
    and bound "memory". Raises RooflineError when nothing can be computed (no work, no time,
    or no compute peak for ``storage`` on this device, e.g. fp8 on an A100).
    """
    if not time_ms or time_ms <= 0:
        raise RooflineError(f"roofline needs a positive time, got time_ms={time_ms!r}")
    if not flops and not bytes:
        raise RooflineError("roofline needs flops= or bytes= (both are missing or zero)")
    seconds = time_ms / 1e3
    if not flops:
        achieved_gbps = bytes / seconds / 1e9
        return {
            "peak_tflops": None,
            "peak_gbps": peaks.gbps,
            "attainable_tflops": None,
            "efficiency": achieved_gbps / peaks.gbps,
            "bound": "memory",
            "intensity": None,
            "precision": None,
            "source": peaks.source_of("dram"),
        }
    key = peak_key(storage)
    peak_tflops = peaks.tflops.get(key)
    if not peak_tflops:
        raise RooflineError(
            f"no {key} peak for {peaks.name} (known: {', '.join(sorted(peaks.tflops))}); "
            f"this device has no {key} tensor cores or the table lacks the figure"
        )
    achieved_tflops = flops / seconds / 1e12
    if bytes:
        intensity = flops / bytes
        memory_roof_tflops = intensity * peaks.gbps / 1e3  # flop/byte x GB/s = GFLOP/s
        attainable = min(peak_tflops, memory_roof_tflops)
        bound = "memory" if memory_roof_tflops < peak_tflops else "compute"
        source = peaks.source_of("dram" if bound == "memory" else key)  # the binding roof's
    else:  # no traffic model: only the compute roof applies
        intensity, attainable, bound, source = None, peak_tflops, "compute", peaks.source_of(key)
    return {
        "peak_tflops": peak_tflops,
        "peak_gbps": peaks.gbps,
        "attainable_tflops": attainable,
        "efficiency": achieved_tflops / attainable,
        "bound": bound,
        "intensity": intensity,
        "precision": key,
        "source": source,
    }


# ---- measured peaks (GPU only) -------------------------------------------------------------

MATMUL_N = 8192  # 8192^3 matmuls run long enough (~1 ms+) for events to be accurate
COPY_BYTES = 1024**3  # 1 GiB: far beyond any L2, so the copy streams from DRAM
WARMUP_CALLS = 5
TIMED_CALLS = 15


def peaks_measurement_blocker() -> str | None:
    """Why measure_peaks() cannot run here, or None when it can."""

    if machine.cuda_capability() is None:
        return "measuring peaks needs a CUDA GPU and none is usable here; table peaks are used"
    return None


def _median_event_ms(torch, run, calls: int = TIMED_CALLS) -> float:
    for _ in range(WARMUP_CALLS):
        run()
    torch.cuda.synchronize()
    times = []
    for _ in range(calls):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


def _measure_matmul_tflops(torch, dtype, allow_tf32: bool = False) -> float:
    n = MATMUL_N
    a = torch.randn(n, n, device="cuda", dtype=dtype)  # random data: zeros draw less power
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    out = torch.empty(n, n, device="cuda", dtype=dtype)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = allow_tf32
    try:
        ms = _median_event_ms(torch, lambda: torch.matmul(a, b, out=out))
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return 2 * n**3 / (ms / 1e3) / 1e12


def _measure_copy_gbps(torch) -> float:
    free, _ = torch.cuda.mem_get_info()
    size = min(COPY_BYTES, free // 4)
    src = torch.randint(0, 256, (size,), device="cuda", dtype=torch.uint8)
    dst = torch.empty_like(src)
    ms = _median_event_ms(torch, lambda: dst.copy_(src))
    return 2 * size / (ms / 1e3) / 1e9  # a copy reads and writes every byte


def _measure_on_gpu(table: Peaks | None, device_name: str) -> Peaks:
    import torch

    tflops = dict(table.tflops) if table else {}
    measured = {
        "fp32": _measure_matmul_tflops(torch, torch.float32, allow_tf32=False),
        "tf32": _measure_matmul_tflops(torch, torch.float32, allow_tf32=True),
        "fp16": _measure_matmul_tflops(torch, torch.float16),
        "bf16": _measure_matmul_tflops(torch, torch.bfloat16),
    }
    tflops.update(measured)  # fp8 (needs scaled matmuls) stays the table figure when known
    return Peaks(
        table.name if table else device_name, tflops, _measure_copy_gbps(torch), frozenset(measured) | {"dram"}
    )


def measure_peaks(cache_dir: str | os.PathLike, refresh: bool = False) -> Peaks | None:
    """Peaks measured on this GPU, cached as JSON per machine key in ``cache_dir``.

    Runs once per machine (under a file lock, so parallel workers measure once): fp32/tf32/
    fp16/bf16 8192^3 matmuls and a 1 GiB device-to-device copy, each the median of several
    CUDA-event timings after warm-up. Returns None without a GPU: see
    ``peaks_measurement_blocker()`` for the reason.
    """
    if peaks_measurement_blocker() is not None:
        return None

    info = machine.machine_info()
    key = machine.machine_key(info)
    folder = Path(cache_dir)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"peaks-{key}.json"
    with FileLock(str(path) + ".lock"):
        if path.exists() and not refresh:
            try:
                return Peaks.from_json(json.loads(path.read_text())["peaks"])
            except (ValueError, KeyError, TypeError):
                pass  # a damaged cache is only a cache: measure again and replace it
        peaks = _measure_on_gpu(peaks_for(info), str(info["device"]))
        document = {
            "schema": 1,
            "machine_key": key,
            "machine": info,
            "peaks": peaks.to_json(),
            "measured": datetime.datetime.now(datetime.timezone.utc).isoformat(),
        }
        files.write_json(path, document)
    return peaks


# ---- declared peaks and the impossibility check --------------------------------------------

# Throughput this far above a theoretical roof is not a fast kernel but a wrong measurement. The
# margin absorbs boost clocks a little above the datasheet's and rounding in the flops model.
IMPOSSIBLE_MARGIN = 0.05


def load_declared_peaks(path: str | os.PathLike) -> Peaks:
    """Peaks declared in a JSON file, for devices the table lacks (or a CPU):
    ``{"name": "...", "tflops": {"fp32": 1.5, "bf16": 3.0}, "gbps": 40.0, "cache_bytes": 33554432}``.
    ``cache_bytes`` (optional) is the last-level cache: smaller working sets may legitimately
    beat the memory roof. RooflineError names what is wrong."""
    try:
        data = files.read_json(Path(path), "peaks file")
    except files.FileProblem as exc:
        raise RooflineError(str(exc)) from None
    example = 'e.g. {"name": "my-gpu", "tflops": {"bf16": 400}, "gbps": 2000}'
    if not isinstance(data, dict):
        raise RooflineError(f"{path}: expected a JSON object, {example}")
    name, tflops, gbps = data.get("name", Path(path).stem), data.get("tflops", {}), data.get("gbps")
    if not isinstance(name, str) or not isinstance(tflops, dict):
        raise RooflineError(f"{path}: 'name' must be a string and 'tflops' an object, {example}")
    unknown = sorted(set(tflops) - set(PRECISIONS))
    if unknown:
        raise RooflineError(
            f"{path}: unknown precision(s) {', '.join(unknown)} in 'tflops'; known: {', '.join(PRECISIONS)}"
        )
    for key, value in [*tflops.items(), ("gbps", gbps), ("cache_bytes", data.get("cache_bytes", 1))]:
        if value is None:
            raise RooflineError(f"{path}: {key} is missing; expected a positive number, {example}")
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < 1e12:
            raise RooflineError(f"{path}: {key} is {value!r}; expected a positive number, {example}")
    peaks = Peaks(name, {k: float(v) for k, v in tflops.items()}, float(gbps), frozenset(), declared=True)
    return peaks if "cache_bytes" not in data else replace(peaks, cache_bytes=int(data["cache_bytes"]))


def impossible_reason(
    *, flops: float | None, bytes: float | None, time_ms: float, peaks: Peaks, storage: object, cache_bytes: int | None
) -> str | None:
    """Why this throughput cannot be true on a device with these (theoretical) peaks, or None.

    The compute roof is checked whenever flops are given and the precision has a peak. The
    memory roof only when the working set is at least twice the last-level cache (or the cache
    size is unknown): a smaller one may be served by the cache, or its writes absorbed by it
    within the timed window, which legitimately beats DRAM bandwidth.
    """
    if not time_ms or time_ms <= 0:
        return None
    seconds = time_ms / 1e3
    limit = 1 + IMPOSSIBLE_MARGIN
    causes = (
        "usual causes: the call returns before the work is done (no synchronisation, or work on "
        "another stream), a lazy or cached result (the work is done once, not per call), or a "
        "wrong flops=/bytes="
    )
    if flops:
        try:
            key = peak_key(storage)
        except RooflineError:
            key = None
        peak = peaks.tflops.get(key) if key else None
        achieved = flops / seconds / 1e12
        if peak and achieved > peak * limit:
            return (
                f"{achieved:.4g} TFLOP/s is {achieved / peak:.1f}x the {key} peak of {peaks.name} "
                f"({peak:.4g} TFLOP/s, {peaks.origin} figure); {causes}"
            )
    if bytes and peaks.gbps:
        cache = cache_bytes if cache_bytes is not None else peaks.cache_bytes
        achieved = bytes / seconds / 1e9
        if (cache is None or bytes >= 2 * cache) and achieved > peaks.gbps * limit:
            return (
                f"{achieved:.4g} GB/s is {achieved / peaks.gbps:.1f}x the memory bandwidth of {peaks.name} "
                f"({peaks.gbps:.4g} GB/s, {peaks.origin} figure); {causes}"
            )
    return None
