"""Device identity: the fingerprint, the baseline key, and that a CPU machine never imports torch."""

from __future__ import annotations

import re
import subprocess
import sys
import types

import pytest

from pytest_tesserabench.machine import device as machine

FINGERPRINT_KEYS = {
    "device",
    "arch",
    "driver",
    "cuda",
    "torch",
    "triton",
    "python",
    "gpu_count",
    "cpu_count",
    "hostname",
    "memory_gb",
    "l2_bytes",
    "sm_count",
}


@pytest.fixture
def fresh_probe():
    machine._probe.cache_clear()
    yield
    machine._probe.cache_clear()  # never leave a fake device cached for other tests


def fake_cuda_torch(l2_cache_size=50 * 1024**2, hip=None):
    props = types.SimpleNamespace(
        name="NVIDIA H100 80GB HBM3",
        major=9,
        minor=0,
        total_memory=85_029_158_912,
        multi_processor_count=132,
        gcnArchName="gfx942:sramecc+:xnack-",
    )
    if l2_cache_size is not None:
        props.L2_cache_size = l2_cache_size
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: 2,
        get_device_properties=lambda index=0: props,
        get_device_capability=lambda index=0: (props.major, props.minor),
    )
    return types.SimpleNamespace(cuda=cuda, version=types.SimpleNamespace(cuda="12.8", hip=hip))


@pytest.mark.parametrize(
    "device, arch, key",
    [
        ("NVIDIA H100 80GB HBM3", "sm_90", "nvidia-h100-80gb-hbm3-sm90"),
        ("NVIDIA H100 PCIe", "sm_90", "nvidia-h100-pcie-sm90"),
        ("NVIDIA A100-SXM4-40GB", "sm_80", "nvidia-a100-sxm4-40gb-sm80"),
        ("AMD Instinct MI300X", "gfx942", "amd-instinct-mi300x-gfx942"),
        ("Intel(R) Xeon(R) Platinum 8480+ CPU @ 2.00GHz", "x86_64", "cpu-x86-64-intel-xeon-platinum-8480-cpu-2.00ghz"),
        ("Apple M2 Pro", "arm64", "cpu-arm64-apple-m2-pro"),
    ],
)
def test_machine_key_is_a_slug_of_device_and_arch(device, arch, key):
    assert machine.machine_key({"device": device, "arch": arch, "torch": "2.11"}) == key


def test_machine_key_ignores_software_versions():
    base = {"device": "NVIDIA L4", "arch": "sm_89", "gpu_count": 1}
    assert machine.machine_key({**base, "driver": "550.1", "torch": "2.4"}) == machine.machine_key(
        {**base, "driver": "570.9", "torch": "2.11", "hostname": "other"}
    )


def test_machine_key_cannot_escape_a_folder():
    key = machine.machine_key({"device": "../../etc/passwd " + "x" * 300, "arch": "x86_64"})
    assert re.fullmatch(r"[a-z0-9.-]+", key) and ".." not in key.split("-")[0]
    assert len(key) <= 100 and not key.startswith(".")


def test_machine_key_names_what_is_missing():
    with pytest.raises(ValueError, match=r"'device'.*\['device'\]"):
        machine.machine_key({"arch": "sm_90"})


def test_fingerprint_of_this_machine_is_complete_and_keyed(fresh_probe):
    info = machine.machine_info()
    assert FINGERPRINT_KEYS <= set(info)
    assert info["python"] == "{}.{}.{}".format(*sys.version_info[:3])
    assert re.fullmatch(r"[a-z0-9.-]+", machine.machine_key(info))
    info["device"] = "changed by a caller"
    assert machine.machine_info()["device"] != "changed by a caller"  # callers get copies


@pytest.mark.skipif(machine.gpu_plausibly_present(), reason="checks the CPU-only path")
def test_cpu_machine_does_not_import_torch():
    code = (
        "import sys; from pytest_tesserabench.machine import device as m; "
        "info = m.machine_info(); key = m.machine_key(info); "
        "assert m.cuda_capability() is None; "
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules, sorted(sys.modules); "
        "assert info['gpu_count'] == 0 and info['sm_count'] is None; print(key)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("cpu-")


def test_gpu_plausibility_follows_driver_files_and_visibility(monkeypatch, tmp_path):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.setattr(machine, "GPU_DRIVER_PATHS", (str(tmp_path / "nvidiactl"),))
    assert not machine.gpu_plausibly_present()
    (tmp_path / "nvidiactl").touch()
    assert machine.gpu_plausibly_present()
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    assert not machine.gpu_plausibly_present()


def test_gpu_fingerprint_comes_from_torch_device_zero(monkeypatch, fresh_probe):
    monkeypatch.setitem(sys.modules, "torch", fake_cuda_torch())
    info = machine.machine_info()
    assert info["device"] == "NVIDIA H100 80GB HBM3"
    assert (info["arch"], info["gpu_count"], info["sm_count"]) == ("sm_90", 2, 132)
    assert info["memory_gb"] == pytest.approx(79.19, abs=0.01)
    assert info["l2_bytes"] == 50 * 1024**2
    assert info["cuda"] == "12.8"
    assert machine.machine_key(info) == "nvidia-h100-80gb-hbm3-sm90"
    assert machine.cuda_capability() == (9, 0)


def test_rocm_arch_is_the_gfx_name(monkeypatch, fresh_probe):
    monkeypatch.setitem(sys.modules, "torch", fake_cuda_torch(hip="6.2"))
    assert machine.machine_info()["arch"] == "gfx942"


def test_l2_size_from_torch_else_the_documented_fallback(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", fake_cuda_torch(l2_cache_size=50 * 1024**2))
    assert machine.l2_cache_bytes() == 50 * 1024**2
    monkeypatch.setitem(sys.modules, "torch", fake_cuda_torch(l2_cache_size=None))
    assert machine.l2_cache_bytes() == machine.FALLBACK_L2_BYTES == 128 * 1024**2


@pytest.mark.skipif(machine.gpu_plausibly_present(), reason="checks the no-GPU error")
def test_l2_size_without_a_gpu_is_a_clear_error():
    with pytest.raises(RuntimeError, match="needs a CUDA device"):
        machine.l2_cache_bytes()


def test_driver_version_read_from_proc_text():
    text = (
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  Tue Mar  5 22:23:56 UTC 2024\n"
        "GCC version:  gcc version 12.3.0\n"
    )
    assert machine._parse_proc_driver_version(text) == "550.54.15"
    open_text = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  Release Build\n"
    assert machine._parse_proc_driver_version(open_text) == "570.86.15"
    assert machine._parse_proc_driver_version("garbage") is None


def test_importing_the_machine_modules_imports_neither_torch_nor_triton():
    code = (
        "import sys; import pytest_tesserabench.machine.device, pytest_tesserabench.machine.roofline, "
        "pytest_tesserabench.machine.telemetry, pytest_tesserabench.machine.profiling; "
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
