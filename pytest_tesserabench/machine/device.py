"""Which machine is this: device detection, the recorded fingerprint and the baseline key.

``machine_info()`` describes the device benchmarks run on (CUDA device 0 when a GPU is usable,
else the CPU) plus the software stack; ``machine_key()`` turns it into the slug that names a
baseline file. Software versions are recorded, never keyed: a new driver must not orphan a
baseline, it is shown next to the comparison instead.

Cheap and safe to call anywhere: on a machine with no trace of an NVIDIA/AMD driver torch is
never imported; versions come from package metadata. The probe runs once per process (hardware
does not change under a running process) and callers get a fresh copy each time.
"""

from __future__ import annotations

import copy
import functools
import importlib.metadata
import importlib.util
import os
import platform
import re
import socket
import sys
from pathlib import Path

# Device nodes a GPU driver creates; their absence means torch could only find a CPU.
# /dev/kfd is ROCm's, where torch.cuda also works.
GPU_DRIVER_PATHS = ("/dev/nvidiactl", "/proc/driver/nvidia", "/dev/kfd")

# Used only when torch cannot report a device's L2 size (torch builds without
# ``L2_cache_size``). Flushing with too big a buffer costs memory; too small a buffer leaves the
# cache warm and times look better than they are, so err high: 128 MiB exceeds the L2 of
# A100 (40 MB), H100 (50 MB), RTX 4090 (72 MB) and L40S (96 MB).
FALLBACK_L2_BYTES = 128 * 1024**2

# Distribution names triton ships under (upstream, PyTorch's nightly build, ROCm).
_TRITON_DISTRIBUTIONS = ("triton", "pytorch-triton", "pytorch-triton-rocm")

_SLUG_NOISE = re.compile(r"\((?:r|tm|c)\)", re.IGNORECASE)  # Intel(R) Xeon(R) -> intel xeon
_SLUG_UNSAFE = re.compile(r"[^a-z0-9.]+")
_MAX_KEY_LENGTH = 100


def gpu_plausibly_present() -> bool:
    """True when a GPU driver is installed and GPUs are not hidden; imports nothing."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return any(os.path.exists(path) for path in GPU_DRIVER_PATHS)


def _usable_torch_cuda():
    """torch when it can see a CUDA (or ROCm) device, else None.

    torch is imported only when it already is, or when a driver makes a GPU plausible: on a
    CPU-only machine collecting benchmarks must not pay for importing torch (~1.2 s).
    """
    if "torch" not in sys.modules and not gpu_plausibly_present():
        return None
    try:
        import torch
    except ImportError:
        return None
    try:
        return torch if torch.cuda.is_available() else None
    except RuntimeError:  # a broken driver install: treat as no GPU rather than crash collection
        return None


def cuda_capability() -> tuple[int, int] | None:
    """Compute capability of CUDA device 0, e.g. (9, 0); None without a usable GPU."""
    torch = _usable_torch_cuda()
    if torch is None:
        return None
    major, minor = torch.cuda.get_device_capability(0)
    return int(major), int(minor)


def cuda_device_count() -> int:
    """CUDA devices this process can use (0 without a usable GPU)."""
    torch = _usable_torch_cuda()
    return 0 if torch is None else int(torch.cuda.device_count())


def l2_cache_bytes(device_index: int = 0) -> int:
    """L2 size of a CUDA device in bytes, for sizing the buffer that flushes it.

    From torch's device properties (``L2_cache_size``); when this torch build lacks the field,
    ``FALLBACK_L2_BYTES`` (128 MiB, larger than any common GPU's L2). NVML has no L2 query.
    """
    torch = _usable_torch_cuda()
    if torch is None:
        raise RuntimeError(
            "l2_cache_bytes() needs a CUDA device and none is usable here; time CPU tensors with the CPU timer instead"
        )
    props = torch.cuda.get_device_properties(device_index)
    size = int(getattr(props, "L2_cache_size", 0) or 0)
    return size if size > 0 else FALLBACK_L2_BYTES


def _package_version(*distributions: str) -> str | None:
    for name in distributions:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue
    return None


def _torch_cuda_version() -> str | None:
    """torch.version.cuda without importing torch: read torch/version.py as text."""
    if "torch" in sys.modules:
        return getattr(getattr(sys.modules["torch"], "version", None), "cuda", None)
    spec = importlib.util.find_spec("torch")  # locates the package; does not import it
    if spec is None or not spec.submodule_search_locations:
        return None
    version_file = Path(next(iter(spec.submodule_search_locations))) / "version.py"
    try:
        text = version_file.read_text()
    except OSError:
        return None
    match = re.search(r"^cuda\b[^=\n]*=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
    return match.group(1) if match else None


def _nvidia_driver_version() -> str | None:
    """The kernel driver's version, from NVML or else the text the driver exposes in /proc."""
    try:
        import pynvml  # optional (nvidia-ml-py, ~25 ms); /proc below without it

        pynvml.nvmlInit()
        try:
            version = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
        return version.decode() if isinstance(version, bytes) else str(version)
    except Exception:  # pynvml missing, or no NVIDIA driver: fall through to /proc
        pass
    try:
        return _parse_proc_driver_version(Path("/proc/driver/nvidia/version").read_text())
    except OSError:
        return None


def _parse_proc_driver_version(text: str) -> str | None:
    # "NVRM version: NVIDIA UNIX x86_64 Kernel Module  550.54.15  ..." (proprietary) or
    # "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.86.15  ..." (open modules)
    match = re.search(r"Kernel Module\s+(?:for \S+\s+)?(\d+(?:\.\d+)+)", text)
    return match.group(1) if match else None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip().lower() in ("model name", "hardware", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def _system_memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):  # not POSIX (Windows) or not reported
        return None


def _gib(size: int | None) -> float | None:
    return None if size is None else round(size / 1024**3, 2)


def _gpu_fields(torch) -> dict:
    props = torch.cuda.get_device_properties(0)
    if getattr(torch.version, "hip", None):
        arch = str(getattr(props, "gcnArchName", "")).split(":")[0] or "gfx"
    else:
        arch = f"sm_{props.major}{props.minor}"
    l2 = int(getattr(props, "L2_cache_size", 0) or 0)
    return {
        "device": props.name,
        "arch": arch,
        "gpu_count": torch.cuda.device_count(),
        "memory_gb": _gib(props.total_memory),
        "l2_bytes": l2 or None,
        "sm_count": props.multi_processor_count,
    }


def _cpu_fields() -> dict:
    return {
        "device": _cpu_model(),
        "arch": platform.machine() or "unknown",
        "gpu_count": 0,
        "memory_gb": _gib(_system_memory_bytes()),
        "l2_bytes": None,
        "sm_count": None,
    }


@functools.lru_cache(maxsize=1)
def _probe() -> dict:
    torch = _usable_torch_cuda()
    fields = _gpu_fields(torch) if torch is not None else _cpu_fields()
    return {
        **fields,
        "driver": _nvidia_driver_version() if torch is not None else None,
        "cuda": _torch_cuda_version(),
        "torch": _package_version("torch"),
        "triton": _package_version(*_TRITON_DISTRIBUTIONS),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "hostname": socket.gethostname(),
    }


def machine_info(refresh: bool = False) -> dict:
    """The fingerprint recorded with every run.

    Keys: device, arch, driver, cuda, torch, triton, python, gpu_count, cpu_count, hostname,
    memory_gb (device memory for a GPU, RAM for a CPU; GiB), l2_bytes and sm_count (None on a
    CPU). Describes CUDA device 0, the one benchmarks run on. ``refresh=True`` probes again.
    """
    if refresh:
        _probe.cache_clear()
    return copy.deepcopy(_probe())


def _slug(text: str) -> str:
    text = _SLUG_NOISE.sub(" ", text.lower())
    return _SLUG_UNSAFE.sub("-", text).strip("-.")


def machine_key(info: dict | None = None) -> str:
    """The baseline key: a slug of device name and architecture, only ``[a-z0-9.-]``.

    ``nvidia-h100-80gb-hbm3-sm90`` for a GPU, ``cpu-x86-64-<model slug>`` for a CPU. A torchrun
    run adds its backend and world size (``...-nccl-x8``): eight ranks are another machine.
    """
    info = machine_info() if info is None else info
    missing = [key for key in ("device", "arch") if not info.get(key)]
    if missing:
        raise ValueError(
            f"machine_key() needs 'device' and 'arch' in the machine info; {missing} missing "
            f"or empty in {info!r}; pass machine_info() or a record's 'machine' field"
        )
    device, arch = _slug(str(info["device"])), str(info["arch"])
    if arch.startswith(("sm_", "gfx")):  # a GPU architecture: sm_90 -> sm90
        key = f"{device}-{_slug(arch.replace('_', ''))}"
    else:  # a CPU: x86_64 -> x86-64
        key = f"cpu-{_slug(arch)}-{device}"
    if info.get("backend"):
        suffix = f"-{_slug(str(info['backend']))}-x{int(info.get('world_size') or 1)}"
        key = key[: _MAX_KEY_LENGTH - len(suffix)].strip("-.") + suffix
    key = key[:_MAX_KEY_LENGTH].strip("-.")
    return re.sub(r"-{2,}", "-", key)
