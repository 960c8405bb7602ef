"""Telemetry logic against a fake pynvml: snapshots, energy per call, throttling verdicts."""

from __future__ import annotations

import sys
import types

import pytest

from pytest_tesserabench.machine import telemetry


class FakeNVMLError(Exception):
    pass


def fake_pynvml(readings, init_error=None, unsupported=()):
    """A pynvml stand-in; each getter pops the next value of its reading list."""
    module = types.ModuleType("pynvml")
    module.NVML_CLOCK_SM, module.NVML_CLOCK_MEM, module.NVML_TEMPERATURE_GPU = 1, 2, 0
    module.NVML_PERF_POLICY_POWER, module.NVML_PERF_POLICY_THERMAL = 0, 1
    module.init_calls = 0

    def reading(name):
        def get(*args):
            if name in unsupported:
                raise FakeNVMLError("Not Supported")
            return readings[name].pop(0)

        return get

    def init():
        module.init_calls += 1
        if init_error:
            raise FakeNVMLError(init_error)

    clocks = {1: reading("sm"), 2: reading("mem")}
    violations = {0: reading("power_violation_ns"), 1: reading("thermal_violation_ns")}
    module.nvmlInit = init
    module.nvmlDeviceGetHandleByIndex = lambda index: f"handle{index}"
    module.nvmlDeviceGetClockInfo = lambda handle, kind: clocks[kind]()
    module.nvmlDeviceGetTemperature = lambda handle, sensor: reading("temp")()
    module.nvmlDeviceGetPowerUsage = reading("power_mw")
    module.nvmlDeviceGetCurrentClocksEventReasons = reading("reasons")
    module.nvmlDeviceGetTotalEnergyConsumption = reading("energy_mj")
    module.nvmlDeviceGetViolationStatus = lambda handle, policy: types.SimpleNamespace(
        violationTime=violations[policy]()
    )
    return module


def steady_readings(**overrides):
    readings = {
        "sm": [1980, 1980],
        "mem": [2619, 2619],
        "temp": [45, 52],
        "power_mw": [120_000, 650_000],
        "reasons": [0x1, 0x0],
        "energy_mj": [1_000_000, 1_650_000],
        "power_violation_ns": [10**9, 10**9],
        "thermal_violation_ns": [0, 0],
    }
    readings.update(overrides)
    return readings


@pytest.fixture
def install(monkeypatch):
    def install(module):
        telemetry._nvml.cache_clear()
        monkeypatch.setitem(sys.modules, "pynvml", module)
        return module

    yield install
    telemetry._nvml.cache_clear()


def test_clean_run_records_snapshots_and_energy_per_call(install):
    install(fake_pynvml(steady_readings()))
    probe = telemetry.Telemetry()
    probe.start(device_index=0)
    record = probe.stop(calls=1000)
    assert record["available"] and not record["throttled"] and record["warning"] is None
    assert record["before"] == {
        "sm_clock_mhz": 1980,
        "mem_clock_mhz": 2619,
        "temperature_c": 45,
        "power_w": 120.0,
        "clock_reasons": ["gpu_idle"],
        "energy_mj": 1_000_000,
    }
    assert record["energy_j"] == pytest.approx(650.0)
    assert record["energy_j_per_call"] == pytest.approx(0.65)
    assert record["violation_ms"] == {"power": 0.0, "thermal": 0.0}
    assert record["throttle_reasons"] == []


def test_power_cap_and_thermal_slowdown_are_throttling(install):
    readings = steady_readings(sm=[1980, 1410], reasons=[0x0, 0x4 | 0x20 | 0x1], temp=[60, 87])
    install(fake_pynvml(readings))
    probe = telemetry.Telemetry()
    probe.start()
    record = probe.stop(calls=10)
    assert record["throttled"]
    assert record["throttle_reasons"] == ["sw_power_cap", "sw_thermal_slowdown"]
    assert "sw_power_cap" in record["warning"] and "1980->1410 MHz" in record["warning"]
    assert "87 C" in record["warning"]


def test_throttling_between_snapshots_is_caught_by_violation_counters(install):
    readings = steady_readings(thermal_violation_ns=[5 * 10**6, 30 * 10**6])
    install(fake_pynvml(readings))
    probe = telemetry.Telemetry()
    probe.start()
    record = probe.stop(calls=10)
    assert record["violation_ms"]["thermal"] == pytest.approx(25.0)
    assert record["throttled"] and record["throttle_reasons"] == ["thermal_violation"]


def test_idle_and_application_clocks_are_not_throttling(install):
    install(fake_pynvml(steady_readings(reasons=[0x1 | 0x2, 0x2 | 0x10])))
    probe = telemetry.Telemetry()
    probe.start()
    record = probe.stop(calls=1)
    assert not record["throttled"] and record["warning"] is None
    assert record["after"]["clock_reasons"] == ["applications_clocks_setting", "sync_boost"]


def test_unsupported_readings_are_none_not_errors(install):
    install(fake_pynvml(steady_readings(), unsupported={"energy_mj", "power_mw"}))
    probe = telemetry.Telemetry()
    probe.start()
    record = probe.stop(calls=5)
    assert record["available"] and record["energy_j_per_call"] is None
    assert record["before"]["power_w"] is None


def test_nvml_initialised_once_per_process(install):
    module = install(fake_pynvml({k: v * 3 for k, v in steady_readings().items()}))
    for _ in range(3):
        probe = telemetry.Telemetry()
        probe.start()
        probe.stop(calls=1)
    assert module.init_calls == 1


def test_no_driver_is_recorded_not_raised(install):
    install(fake_pynvml({}, init_error="Driver Not Loaded"))
    probe = telemetry.Telemetry()
    probe.start()
    assert probe.stop(calls=3) == {"available": False, "reason": "NVML could not start: Driver Not Loaded"}


def test_missing_pynvml_is_recorded_not_raised(install, monkeypatch):
    telemetry._nvml.cache_clear()
    monkeypatch.setitem(sys.modules, "pynvml", None)  # makes `import pynvml` fail
    probe = telemetry.Telemetry()
    probe.start()
    record = probe.stop(calls=3)
    assert record["available"] is False and "nvidia-ml-py" in record["reason"]


def test_misuse_is_reported(install):
    install(fake_pynvml(steady_readings()))
    with pytest.raises(RuntimeError, match="without Telemetry.start"):
        telemetry.Telemetry().stop(calls=1)
    probe = telemetry.Telemetry()
    probe.start()
    with pytest.raises(ValueError, match="number of calls measured"):
        probe.stop(calls=-1)


def test_stop_after_a_failed_measurement_has_no_per_call_energy(install):
    install(fake_pynvml(steady_readings()))
    probe = telemetry.Telemetry()
    probe.start()
    record = probe.stop(calls=0)
    assert record["energy_j"] == pytest.approx(650.0) and record["energy_j_per_call"] is None


def test_reason_mask_decoding():
    assert telemetry.decode_clock_reasons(0) == []
    assert telemetry.decode_clock_reasons(0x8 | 0x40 | 0x80) == [
        "hw_slowdown",
        "hw_thermal_slowdown",
        "hw_power_brake_slowdown",
    ]
    assert telemetry.decode_clock_reasons(0x1000) == ["unknown_0x1000"]
