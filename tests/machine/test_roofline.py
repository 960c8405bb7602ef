"""Peak table lookup, the roofline arithmetic, and the measured-peaks cache."""

from __future__ import annotations

import json

import pytest

from pytest_tesserabench.machine import roofline as rl
from pytest_tesserabench.measure.precision import Precision

H100 = rl.PEAK_TABLE["NVIDIA H100 SXM"]


@pytest.mark.parametrize(
    "name, memory_gb, entry",
    [
        ("NVIDIA H100 80GB HBM3", 79.2, "NVIDIA H100 SXM"),
        ("NVIDIA H100 PCIe", 79.6, "NVIDIA H100 PCIe"),
        ("NVIDIA H100 NVL", 93.0, "NVIDIA H100 NVL"),
        ("NVIDIA H200", 139.8, "NVIDIA H200 SXM"),
        ("NVIDIA H200 NVL", 139.8, "NVIDIA H200 NVL"),
        ("NVIDIA A100-SXM4-40GB", 39.4, "NVIDIA A100 SXM 40GB"),
        ("NVIDIA A100-SXM4-80GB", 79.1, "NVIDIA A100 SXM 80GB"),
        ("NVIDIA A100-PCIE-40GB", 39.4, "NVIDIA A100 PCIe 40GB"),
        ("NVIDIA A100 80GB PCIe", 79.1, "NVIDIA A100 PCIe 80GB"),
        ("NVIDIA A100-SXM4", 79.1, "NVIDIA A100 SXM 80GB"),  # memory decides
        ("NVIDIA L4", 22.0, "NVIDIA L4"),
        ("NVIDIA L40S", 44.5, "NVIDIA L40S"),
        ("NVIDIA GeForce RTX 4090", 23.6, "NVIDIA GeForce RTX 4090"),
        ("NVIDIA B200", 178.4, "NVIDIA B200"),
        ("NVIDIA GH200 480GB", 95.0, None),
        ("NVIDIA L40", 44.5, None),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", 16.0, None),
        ("Tesla T4", 15.0, None),
    ],
)
def test_device_names_match_the_right_table_entry(name, memory_gb, entry):
    assert rl.table_entry_for(name, memory_gb) == entry


def test_table_holds_dense_figures_for_every_precision():
    assert H100.tflops["bf16"] == pytest.approx(989.5)  # datasheet 1979 is with sparsity
    assert H100.tflops["fp8"] == pytest.approx(2 * H100.tflops["bf16"])
    for peaks in rl.PEAK_TABLE.values():
        assert set(peaks.tflops) <= set(rl.PRECISIONS) and peaks.gbps > 0
        assert peaks.tflops["fp32"] <= peaks.tflops["tf32"] <= peaks.tflops["bf16"]
    assert "fp8" not in rl.PEAK_TABLE["NVIDIA A100 SXM 80GB"].tflops  # Ampere has no FP8


def test_peaks_for_machine_info():
    gpu = {"device": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "gpu_count": 1, "memory_gb": 79.2}
    assert rl.peaks_for(gpu) is H100
    assert rl.peaks_for({"device": "Intel Xeon", "arch": "x86_64", "gpu_count": 0}) is None


def test_compute_bound_matmul():
    # 4096^3 bf16 matmul in 0.2 ms: 687 TFLOP/s; intensity 1365 flop/byte is past the ridge
    n = 4096
    flops, traffic = 2 * n**3, 3 * n * n * 2
    result = rl.roofline(flops, traffic, 0.2, H100, storage=Precision.parse("bf16"))
    assert result["bound"] == "compute" and result["source"] == "table"
    assert result["intensity"] == pytest.approx(flops / traffic)
    assert result["attainable_tflops"] == pytest.approx(989.5)
    assert result["efficiency"] == pytest.approx(flops / 0.2e-3 / 1e12 / 989.5)


def test_memory_bound_kernel_is_judged_against_the_bandwidth_roof():
    # intensity 1 flop/byte: roof = 3350 GB/s x 1 = 3.35 TFLOP/s
    result = rl.roofline(1e9, 1e9, 0.5, H100, storage="fp16")
    assert result["bound"] == "memory"
    assert result["attainable_tflops"] == pytest.approx(3.35)
    assert result["efficiency"] == pytest.approx((1e9 / 0.5e-3 / 1e12) / 3.35)


def test_memory_only_kernel_efficiency_is_bandwidth_fraction():
    result = rl.roofline(None, 2 * 1024**3, 1.0, H100)
    assert result["bound"] == "memory" and result["attainable_tflops"] is None
    assert result["efficiency"] == pytest.approx(2 * 1024**3 / 1e-3 / 1e9 / 3350)


def test_flops_without_bytes_uses_the_compute_roof():
    result = rl.roofline(1e12, None, 10.0, H100, storage="fp8_e4m3")
    assert result["bound"] == "compute" and result["intensity"] is None
    assert result["efficiency"] == pytest.approx(100 / H100.tflops["fp8"])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"flops": 1e9, "bytes": 1e6, "time_ms": 0}, "positive time"),
        ({"flops": None, "bytes": 0, "time_ms": 1}, "flops= or bytes="),
        ({"flops": 1e9, "bytes": 1e6, "time_ms": 1, "storage": "int4"}, "no roofline peak for"),
    ],
)
def test_bad_roofline_input_names_the_culprit(kwargs, message):
    with pytest.raises(rl.RooflineError, match=message):
        rl.roofline(peaks=H100, **kwargs)


def test_precision_without_tensor_cores_is_reported():
    with pytest.raises(rl.RooflineError, match="no fp8 peak for NVIDIA A100 SXM 80GB"):
        rl.roofline(1e12, 1e9, 1.0, rl.PEAK_TABLE["NVIDIA A100 SXM 80GB"], storage="fp8_e5m2")


def test_measured_source_follows_the_binding_roof():
    peaks = rl.Peaks("x", {"bf16": 800.0}, 3000.0, frozenset({"dram"}))
    assert rl.roofline(1e9, 1e9, 1.0, peaks)["source"] == "measured"  # memory roof binds
    assert rl.roofline(1e12, 1e6, 1.0, peaks)["source"] == "table"  # compute roof binds


def test_peaks_round_trip_through_json():
    peaks = rl.Peaks("x", {"bf16": 800.0, "fp32": 50.0}, 3000.0, frozenset({"bf16", "dram"}))
    assert rl.Peaks.from_json(json.loads(json.dumps(peaks.to_json()))) == peaks


@pytest.mark.skipif(rl.peaks_measurement_blocker() is None, reason="checks the no-GPU path")
def test_measure_peaks_without_gpu_returns_none_with_a_reason(tmp_path):
    assert rl.measure_peaks(tmp_path) is None
    assert "needs a CUDA GPU" in rl.peaks_measurement_blocker()
    assert list(tmp_path.iterdir()) == []


def test_measure_peaks_runs_once_per_machine(tmp_path, monkeypatch):
    calls = []

    def fake_measure(table, device_name):
        calls.append(device_name)
        return rl.Peaks(device_name, {"bf16": 700.0}, 3000.0, frozenset({"bf16", "dram"}))

    from pytest_tesserabench.machine import device as machine

    info = {"device": "NVIDIA H100 80GB HBM3", "arch": "sm_90", "gpu_count": 1, "memory_gb": 79.2}
    monkeypatch.setattr(rl, "peaks_measurement_blocker", lambda: None)
    monkeypatch.setattr(rl, "_measure_on_gpu", fake_measure)
    monkeypatch.setattr(machine, "machine_info", lambda refresh=False: dict(info))
    first = rl.measure_peaks(tmp_path)
    second = rl.measure_peaks(tmp_path)
    assert first == second and calls == ["NVIDIA H100 80GB HBM3"]
    cache = tmp_path / "peaks-nvidia-h100-80gb-hbm3-sm90.json"
    assert json.loads(cache.read_text())["peaks"]["tflops"] == {"bf16": 700.0}
    cache.write_text("{not json")  # a damaged cache is measured again, not an error
    assert rl.measure_peaks(tmp_path) == first and len(calls) == 2
