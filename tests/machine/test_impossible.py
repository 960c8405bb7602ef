"""No figure that cannot be true: throughput beyond the device's roofline fails as IMPOSSIBLE."""

import json

import pytest

from pytest_tesserabench.machine import roofline
from pytest_tesserabench.machine.roofline import PEAK_TABLE, RooflineError, impossible_reason, load_declared_peaks

H100 = PEAK_TABLE["NVIDIA H100 SXM"]


def test_compute_beyond_the_peak_is_impossible_and_says_why():
    # 8192^3 bf16 in 0.5 ms would be 2199 TFLOP/s: more than twice the dense peak.
    reason = impossible_reason(
        flops=2 * 8192**3, bytes=None, time_ms=0.5, peaks=H100, storage="bf16", cache_bytes=50 * 2**20
    )
    assert reason.startswith("2199 TFLOP/s is 2.2x the bf16 peak of NVIDIA H100 SXM (989.5 TFLOP/s, table figure)")
    assert "no synchronisation" in reason and "lazy or cached" in reason and "flops=/bytes=" in reason


def test_near_the_peak_is_possible():
    time_ms = 2 * 8192**3 / (H100.tflops["bf16"] * 1.04) / 1e9  # 4% above: within the margin
    assert (
        impossible_reason(flops=2 * 8192**3, bytes=None, time_ms=time_ms, peaks=H100, storage="bf16", cache_bytes=None)
        is None
    )


def test_bandwidth_beyond_dram_is_impossible_only_beyond_the_cache():
    # 8 GB/s... of a 1 GiB copy in 0.1 ms is 21 TB/s: impossible on 3.35 TB/s HBM.
    big = 2 * 2**30
    assert "memory bandwidth" in impossible_reason(
        flops=None, bytes=big, time_ms=0.1, peaks=H100, storage="bf16", cache_bytes=50 * 2**20
    )
    # 16 MiB in the same ratio fits in a 50 MiB L2: the cache may serve it; not judged.
    small = 16 * 2**20
    assert (
        impossible_reason(
            flops=None, bytes=small, time_ms=small / big * 0.1, peaks=H100, storage="bf16", cache_bytes=50 * 2**20
        )
        is None
    )


def test_unknown_precision_peak_is_not_judged():
    a100 = PEAK_TABLE["NVIDIA A100 SXM 80GB"]
    assert (
        impossible_reason(flops=1e18, bytes=None, time_ms=1.0, peaks=a100, storage="fp8_e4m3", cache_bytes=None) is None
    )


def test_declared_peaks_file(tmp_path):
    path = tmp_path / "peaks.json"
    path.write_text(json.dumps({"name": "box", "tflops": {"fp32": 2.0}, "gbps": 40, "cache_bytes": 1024}))
    peaks = load_declared_peaks(path)
    assert (peaks.name, peaks.tflops, peaks.gbps, peaks.cache_bytes, peaks.origin) == (
        "box",
        {"fp32": 2.0},
        40.0,
        1024,
        "declared",
    )
    assert "declared figure" in impossible_reason(
        flops=1e12, bytes=None, time_ms=1.0, peaks=peaks, storage="fp32", cache_bytes=None
    )


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[1]", "expected a JSON object"),
        (json.dumps({"tflops": {"fp64": 1}, "gbps": 1}), "unknown precision(s) fp64"),
        (json.dumps({"tflops": {"fp32": -1}, "gbps": 1}), "fp32 is -1"),
        (json.dumps({"tflops": {}, "gbps": "fast"}), "gbps is 'fast'"),
        ("{", "not valid JSON"),
    ],
)
def test_bad_declared_peaks_name_the_problem(tmp_path, content, message):
    path = tmp_path / "peaks.json"
    path.write_text(content)
    with pytest.raises(RooflineError, match=message.replace("(", r"\(").replace(")", r"\)")) as info:
        load_declared_peaks(path)
    assert str(path) in str(info.value)


def test_declared_peaks_reach_the_table_figures_untouched():
    assert roofline.Peaks("x", {"fp32": 1.0}, 1.0).origin == "table"
