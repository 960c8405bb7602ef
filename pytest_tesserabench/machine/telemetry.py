"""What the GPU was doing while a benchmark ran: clocks, temperature, power, throttling, energy.

``Telemetry().start(device_index)`` before the timed rounds and ``.stop(calls)`` after them give
the record's ``telemetry`` field. A benchmark measured while the GPU throttled (power cap,
thermal or hardware slowdown) reads slower than the kernel is; the field says so, with a warning
text the report can show. Everything comes from NVML (module ``pynvml`` of nvidia-ml-py); without
it, or without an NVIDIA GPU, the field is ``{"available": False, "reason": ...}``, never an error.
"""

from __future__ import annotations

import functools
import sys

# nvmlClocksEventReason* bits (nvml.h; formerly nvmlClocksThrottleReason*) -> name.
CLOCK_EVENT_REASONS = {
    0x001: "gpu_idle",
    0x002: "applications_clocks_setting",
    0x004: "sw_power_cap",
    0x008: "hw_slowdown",
    0x010: "sync_boost",
    0x020: "sw_thermal_slowdown",
    0x040: "hw_thermal_slowdown",
    0x080: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
    0x200: "board_limit",
    0x400: "reliability",
}
# Reasons that make a kernel run slower than the GPU can: power and heat. Idle, application
# clocks, sync boost and display settings only say who chose the clock.
THROTTLING_REASONS = frozenset(
    {"sw_power_cap", "hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"}
)


def decode_clock_reasons(mask: int) -> list[str]:
    """Names of the bits set in an NVML clock-event (throttle) reason mask."""
    names = [name for bit, name in CLOCK_EVENT_REASONS.items() if mask & bit]
    unknown = mask & ~sum(CLOCK_EVENT_REASONS)
    if unknown:
        names.append(f"unknown_0x{unknown:x}")
    return names


@functools.lru_cache(maxsize=1)
def _nvml():
    """(pynvml, None) once NVML is initialised in this process, else (None, why not)."""
    try:
        import pynvml  # optional (nvidia-ml-py, ~25 ms): telemetry of a GPU run only
    except ImportError:
        return None, "pynvml is not installed (pip install nvidia-ml-py)"
    try:
        pynvml.nvmlInit()
    except Exception as error:  # NVMLError_LibraryNotFound / DriverNotLoaded: no NVIDIA driver
        return None, f"NVML could not start: {error}"
    return pynvml, None


def _torch_device_uuid(device_index: int) -> str | None:
    """NVML name of a CUDA device index when torch is already loaded: CUDA_VISIBLE_DEVICES
    renumbers devices for CUDA but not for NVML, so match by UUID rather than by index."""

    torch = sys.modules.get("torch")
    try:
        if torch is None or not torch.cuda.is_available():
            return None
        uuid = str(torch.cuda.get_device_properties(device_index).uuid)
    except Exception:  # older torch without .uuid, or a device index out of range
        return None
    return uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"


def _handle(nvml, device_index: int):
    uuid = _torch_device_uuid(device_index)
    if uuid:
        try:
            return nvml.nvmlDeviceGetHandleByUUID(uuid)
        except Exception:
            pass  # fall back to the index, right whenever CUDA_VISIBLE_DEVICES is unset
    return nvml.nvmlDeviceGetHandleByIndex(device_index)


def _query(call, *args):
    """One NVML reading; None where this GPU or driver does not support it."""
    try:
        return call(*args)
    except Exception:
        return None


def _clock_reason_mask(nvml, handle) -> int | None:
    getter = (
        getattr(nvml, "nvmlDeviceGetCurrentClocksEventReasons", None)
        or nvml.nvmlDeviceGetCurrentClocksThrottleReasons  # before NVML 12.2
    )
    return _query(getter, handle)


def _snapshot(nvml, handle) -> dict:
    power_mw = _query(nvml.nvmlDeviceGetPowerUsage, handle)
    mask = _clock_reason_mask(nvml, handle)
    return {
        "sm_clock_mhz": _query(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_SM),
        "mem_clock_mhz": _query(nvml.nvmlDeviceGetClockInfo, handle, nvml.NVML_CLOCK_MEM),
        "temperature_c": _query(nvml.nvmlDeviceGetTemperature, handle, nvml.NVML_TEMPERATURE_GPU),
        "power_w": None if power_mw is None else power_mw / 1000,
        "clock_reasons": None if mask is None else decode_clock_reasons(mask),
        "energy_mj": _query(nvml.nvmlDeviceGetTotalEnergyConsumption, handle),
    }


def _violation_ns(nvml, handle) -> dict[str, int | None]:
    """Cumulative time the driver held clocks down for power and for heat (ns since boot):
    the difference over a benchmark catches throttling between the two snapshots."""
    policies = {"power": nvml.NVML_PERF_POLICY_POWER, "thermal": nvml.NVML_PERF_POLICY_THERMAL}
    result = {}
    for name, policy in policies.items():
        status = _query(nvml.nvmlDeviceGetViolationStatus, handle, policy)
        result[name] = None if status is None else int(status.violationTime)
    return result


class Telemetry:
    """Bracket one benchmark's timed rounds with NVML readings."""

    def __init__(self) -> None:
        self._started: tuple | None = None
        self._unavailable: str | None = None

    def start(self, device_index: int = 0) -> None:
        nvml, reason = _nvml()
        self._started, self._unavailable = None, reason
        if nvml is None:
            return
        try:
            handle = _handle(nvml, device_index)
        except Exception as error:
            self._unavailable = f"no NVML device for CUDA device {device_index}: {error}"
            return
        self._started = (nvml, handle, _snapshot(nvml, handle), _violation_ns(nvml, handle))

    def stop(self, calls: int) -> dict:
        """The ``telemetry`` field; ``calls`` is how many kernel calls ran since start().

        ``calls=0`` is allowed (stop() often runs in a ``finally`` after a failed measurement,
        where raising would hide the real error): the per-call energy is then None.
        """
        if self._unavailable is not None:
            return {"available": False, "reason": self._unavailable}
        if self._started is None:
            raise RuntimeError("Telemetry.stop() called without Telemetry.start()")
        if not isinstance(calls, int) or calls < 0:
            raise ValueError(f"Telemetry.stop(calls=...) needs the number of calls measured (0 or more), got {calls!r}")
        nvml, handle, before, violations_before = self._started
        self._started = None
        after, violations_after = _snapshot(nvml, handle), _violation_ns(nvml, handle)

        energy_j = None
        if before["energy_mj"] is not None and after["energy_mj"] is not None:
            energy_j = (after["energy_mj"] - before["energy_mj"]) / 1000
        violation_ms = {
            name: (violations_after[name] - violations_before[name]) / 1e6
            for name in violations_before
            if violations_before[name] is not None and violations_after[name] is not None
        }
        seen = {reason for snap in (before, after) for reason in snap["clock_reasons"] or ()}
        throttle_reasons = sorted(seen & THROTTLING_REASONS)
        throttle_reasons += [f"{name}_violation" for name, ms in sorted(violation_ms.items()) if ms > 0]
        return {
            "available": True,
            "before": before,
            "after": after,
            "energy_j": energy_j,
            # no calls (a benchmark that failed before measuring): no per-call figure
            "energy_j_per_call": None if energy_j is None or not calls else energy_j / calls,
            "violation_ms": violation_ms,
            "throttled": bool(throttle_reasons),
            "throttle_reasons": throttle_reasons,
            "warning": _warning(throttle_reasons, before, after),
        }


def _warning(reasons: list[str], before: dict, after: dict) -> str | None:
    if not reasons:
        return None
    details = []
    if before["sm_clock_mhz"] is not None and after["sm_clock_mhz"] is not None:
        details.append(f"SM clock {before['sm_clock_mhz']}->{after['sm_clock_mhz']} MHz")
    if after["temperature_c"] is not None:
        details.append(f"{after['temperature_c']} C")
    if after["power_w"] is not None:
        details.append(f"{after['power_w']:.0f} W")
    suffix = f" ({', '.join(details)})" if details else ""
    return (
        f"GPU throttled while measuring: {', '.join(reasons)}{suffix}; times may be slower "
        f"than the kernel is (check cooling, power limits, other jobs on the GPU)"
    )
