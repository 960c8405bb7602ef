"""Nsight Compute command, CSV parsing and summary; torch.profiler traces on the CPU."""

from __future__ import annotations

import json
import stat
import sys
import textwrap

import pytest

from pytest_tesserabench.machine import device as machine
from pytest_tesserabench.machine import profiling

HEADER = (
    '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
    '"Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit",'
    '"Metric Value"'
)


def row(kernel_id, name, metric, unit, value, grid="(132, 1, 1)"):
    return (
        f'"{kernel_id}","41237","python3.12","127.0.0.1","{name}","1","7","(384, 1, 1)",'
        f'"{grid}","0","9.0","Command line profiler metrics","{metric}","{unit}","{value}"'
    )


GEMM = "nvjet_tst_128x256_64x4_1x2_h_bz_coopB_TNT"
ADD = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>>"
# What `ncu --csv --print-units base --metrics ...` prints (metrics sorted by name per kernel),
# interleaved with ncu's ==PROF== lines and the child pytest's own output.
NCU_OUTPUT = "\n".join(
    [
        "==PROF== Connected to process 41237 (/usr/bin/python3.12)",
        '==PROF== Profiling "nvjet_tst_128x256_64x4_1x2_h_..." - 0: 0%....50%....100% - 9 passes',
        '==PROF== Profiling "vectorized_elementwise_kernel" - 1: 0%....50%....100% - 9 passes',
        ".                                                                        [100%]",
        "1 passed in 14.02s",
        "==PROF== Disconnected from process 41237",
        HEADER,
        row(0, GEMM, "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "12.51"),
        row(0, GEMM, "gpu__time_duration.sum", "nsecond", "1,234,567"),
        row(0, GEMM, "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "81.30"),
        row(0, GEMM, "sm__warps_active.avg.pct_of_peak_sustained_active", "%", "18.75"),
        row(1, ADD, "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "91.20", "(8192, 1, 1)"),
        row(1, ADD, "gpu__time_duration.sum", "nsecond", "5,120", "(8192, 1, 1)"),
        row(1, ADD, "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "20.00", "(8192, 1, 1)"),
        row(1, ADD, "sm__warps_active.avg.pct_of_peak_sustained_active", "%", "80.00", "(8192, 1, 1)"),
        row(2, ADD, "dram__throughput.avg.pct_of_peak_sustained_elapsed", "%", "89.20", "(8192, 1, 1)"),
        row(2, ADD, "gpu__time_duration.sum", "usecond", "15.36", "(8192, 1, 1)"),
        row(2, ADD, "sm__throughput.avg.pct_of_peak_sustained_elapsed", "%", "24.00", "(8192, 1, 1)"),
        row(2, ADD, "sm__warps_active.avg.pct_of_peak_sustained_active", "%", "n/a", "(8192, 1, 1)"),
    ]
)


def test_parse_groups_rows_into_kernels_with_units():
    kernels = profiling.parse_ncu_csv(NCU_OUTPUT)
    assert [(k["id"], k["name"]) for k in kernels] == [(0, GEMM), (1, ADD), (2, ADD)]
    assert kernels[0]["metrics"]["gpu__time_duration.sum"] == {"value": 1234567.0, "unit": "nsecond"}
    assert kernels[0]["metrics"][profiling.ACHIEVED_OCCUPANCY] == {"value": 18.75, "unit": "%"}
    assert kernels[2]["metrics"][profiling.ACHIEVED_OCCUPANCY]["value"] == "n/a"


def test_summary_merges_launches_and_weights_by_gpu_time():
    summary = profiling.summarize_ncu(profiling.parse_ncu_csv(NCU_OUTPUT))
    assert summary["available"] and summary["launches"] == 3
    assert summary["gpu_time_ms"] == pytest.approx(1.234567 + 0.00512 + 0.01536)
    gemm, add = summary["kernels"]  # longest first
    assert (gemm["name"], gemm["launches"]) == (GEMM, 1)
    assert (add["name"], add["launches"]) == (ADD, 2)
    assert add["gpu_time_ms"] == pytest.approx(0.02048)
    # 5.12 us at 91.2% and 15.36 us at 89.2%: weighted 89.7%
    assert add["dram_throughput_pct"] == pytest.approx((91.2 * 5.12 + 89.2 * 15.36) / 20.48)
    assert add["achieved_occupancy_pct"] == pytest.approx(80.0)  # the "n/a" launch is left out
    total = 1.234567 + 0.02048
    assert summary["sm_throughput_pct"] == pytest.approx((81.3 * 1.234567 + 20.0 * 0.00512 + 24.0 * 0.01536) / total)


def test_output_without_csv_is_a_clear_error():
    with pytest.raises(profiling.NcuError, match="no ncu CSV"):
        profiling.parse_ncu_csv("==PROF== No kernels were profiled.\n")
    with pytest.raises(profiling.NcuError, match=r"lacks columns \['Metric Unit'"):
        profiling.parse_ncu_csv('"ID","Kernel Name","Metric Name","Metric Value"\n"0","k","m","1"')


def test_unknown_time_unit_is_named():
    text = "\n".join([HEADER, row(0, GEMM, "gpu__time_duration.sum", "cycle", "10")])
    with pytest.raises(profiling.NcuError, match="unknown time unit 'cycle'"):
        profiling.summarize_ncu(profiling.parse_ncu_csv(text))


def test_ncu_command_profiles_one_node_in_the_nvtx_range(tmp_path):
    command = profiling.ncu_command(
        "tests/bench/test_matmul.py::test_matmul[M=4096]",
        ["--rootdir", "/repo", "--bench-ncu", "--bench-save=main", "--bench-threshold=3"],
        ncu="/opt/ncu",
        log_file=tmp_path / "ncu.csv",
        python="/venv/bin/python",
    )
    assert command[:3] == ["/opt/ncu", "--csv", "--print-units"]
    metrics = command[command.index("--metrics") + 1].split(",")
    assert metrics == list(profiling.DEFAULT_METRICS)
    assert command[command.index("--target-processes") + 1] == "all"
    assert command[command.index("--clock-control") + 1] == "base"
    assert command[command.index("--nvtx-include") + 1] == "tesserabench/"
    assert command[command.index("--log-file") + 1] == str(tmp_path / "ncu.csv")
    child = command[command.index("/venv/bin/python") :]
    assert child[:4] == ["/venv/bin/python", "-m", "pytest", "tests/bench/test_matmul.py::test_matmul[M=4096]"]
    assert "--bench-ncu" not in child and "--bench-save=main" not in child  # no recursion
    assert "--bench-threshold=3" in child and "/repo" in child


def test_ncu_skip_reason_names_what_is_missing(monkeypatch):
    monkeypatch.setattr(machine, "gpu_plausibly_present", lambda: False)
    assert "needs an NVIDIA GPU" in profiling.ncu_skip_reason()
    monkeypatch.setattr(machine, "gpu_plausibly_present", lambda: True)
    monkeypatch.setattr(profiling, "ncu_available", lambda: None)
    assert "ncu` is not on PATH" in profiling.ncu_skip_reason()
    assert profiling.run_ncu("t.py::test")["available"] is False


FAKE_NCU = textwrap.dedent("""\
    #!{python}
    import os, sys
    args = sys.argv[1:]
    assert os.environ.get("TESSERABENCH_UNDER_NCU") == "1", "child must know it runs under ncu"
    log = args[args.index("--log-file") + 1]
    open(log, "w").write(open({sample!r}).read())
    print("1 passed")
""")


def _fake_ncu(tmp_path, monkeypatch, csv_text: str) -> None:
    """An ncu on this machine that writes ``csv_text`` as its report."""
    sample = tmp_path / "sample.csv"
    sample.write_text(csv_text)
    fake = tmp_path / "ncu"
    fake.write_text(FAKE_NCU.format(python=sys.executable, sample=str(sample)))
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(machine, "gpu_plausibly_present", lambda: True)
    monkeypatch.setattr(profiling, "ncu_available", lambda: str(fake))


def test_run_ncu_end_to_end_with_a_fake_ncu(tmp_path, monkeypatch):
    _fake_ncu(tmp_path, monkeypatch, NCU_OUTPUT)
    result = profiling.run_ncu("tests/test_x.py::test_y", cwd=tmp_path, timeout_s=60)
    assert result["available"] and result["launches"] == 3
    assert result["clock_control"] == "base"


MARKER = "void at::cuda::(anonymous namespace)::spin_kernel(long)"


def _timed(kernel_id, name, ns):
    return row(kernel_id, name, "gpu__time_duration.sum", "nsecond", str(ns))


# One test, two benchmarks: the first launched the GEMM, the second two adds.
TWO_BENCHMARKS = "\n".join(
    [
        HEADER,
        _timed(0, MARKER, 1000),
        _timed(1, GEMM, 2000),
        _timed(2, MARKER, 1000),
        _timed(3, ADD, 3000),
        _timed(4, ADD, 4000),
    ]
)


def test_each_benchmarks_kernels_are_those_after_its_marker():
    kernels = profiling.parse_ncu_csv(TWO_BENCHMARKS)
    groups = profiling.per_benchmark(kernels)
    assert [[k["name"] for k in group] for group in groups] == [[GEMM], [ADD, ADD]]
    assert profiling.per_benchmark(profiling.parse_ncu_csv(NCU_OUTPUT)) is None  # no marker


def test_run_ncu_gives_each_benchmark_its_own_counters(tmp_path, monkeypatch):
    _fake_ncu(tmp_path, monkeypatch, TWO_BENCHMARKS)
    counters = profiling.run_ncu("tests/test_x.py::test_y", cwd=tmp_path, timeout_s=60)
    assert counters["launches"] == 3  # the markers are not the test's kernels
    first, second = profiling.ncu_for_records(counters, 2)
    assert (first["launches"], first["gpu_time_ms"]) == (1, pytest.approx(0.002))
    assert (second["launches"], second["gpu_time_ms"]) == (2, pytest.approx(0.007))
    assert first["clock_control"] == second["clock_control"] == "base"
    # Records that do not match the markers (a benchmark skipped under ncu): the first gets all.
    whole, none, nothing = profiling.ncu_for_records(counters, 3)
    assert whole["launches"] == 3 and "could not be told apart" in whole["note"]
    assert none is None and nothing is None
    unavailable = {"available": False, "reason": "no ncu"}
    assert profiling.ncu_for_records(unavailable, 2) == [unavailable, None]


def test_run_ncu_reports_counter_permission(tmp_path, monkeypatch):
    fake = tmp_path / "ncu"
    fake.write_text(
        "#!/bin/sh\necho '==ERROR== ERR_NVGPUCTRPERM - The user does not have "
        "permission to access NVIDIA GPU Performance Counters'\nexit 1\n"
    )
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setattr(machine, "gpu_plausibly_present", lambda: True)
    monkeypatch.setattr(profiling, "ncu_available", lambda: str(fake))
    result = profiling.run_ncu("tests/test_x.py::test_y", cwd=tmp_path, timeout_s=60)
    assert result["available"] is False and "ERR_NVGPUCTRPERM" in result["reason"]


def test_ncu_region_is_a_no_op_outside_the_child(monkeypatch):
    monkeypatch.delenv(profiling.NCU_ENV_VAR, raising=False)
    assert not profiling.under_ncu()
    with profiling.ncu_region():
        pass
    monkeypatch.setenv(profiling.NCU_ENV_VAR, "1")
    assert profiling.under_ncu()


def test_trace_path_is_file_safe_and_distinct(tmp_path):
    path = profiling.trace_path(tmp_path, "tests/bench/test_mm.py::test_mm[M=1024-N=4096]::torch")
    assert path.parent == tmp_path and path.name.endswith(".trace.json")
    assert "/" not in path.name and "[" not in path.name and ":" not in path.name
    long_a, long_b = "t::" + "a" * 300 + "1", "t::" + "a" * 300 + "2"
    assert profiling.trace_path(tmp_path, long_a) != profiling.trace_path(tmp_path, long_b)
    assert len(profiling.trace_path(tmp_path, long_a).name) < 200


def test_trace_call_writes_a_chrome_trace_on_cpu(tmp_path):
    torch = pytest.importorskip("torch")
    a, b = torch.randn(64, 64), torch.randn(64, 64)
    path = profiling.trace_call(torch.matmul, (a, b), {}, tmp_path / "deep" / "mm.trace.json", calls=2)
    events = json.loads(path.read_text())["traceEvents"]
    names = {event.get("name") for event in events}
    assert {"tesserabench/call0", "tesserabench/call1"} <= names
    assert any(name and name.startswith("aten::") for name in names)
    with pytest.raises(ValueError, match="at least 1"):
        profiling.trace_call(torch.matmul, (a, b), path=tmp_path / "x.json", calls=0)


def test_clock_control_is_validated():
    with pytest.raises(ValueError, match="clock_control must be"):
        profiling.ncu_command("t.py::x", ncu="/opt/ncu", clock_control="boost")


def test_any_program_runs_under_ncu_with_the_clocks_left_alone():
    command = profiling.ncu_argv(["python", "bench.py"], [profiling.GPU_TIME], ncu="/x/ncu", clock_control="none")
    assert command[0] == "/x/ncu" and command[-2:] == ["python", "bench.py"]
    assert command[command.index("--clock-control") + 1] == "none"
    assert command[command.index("--nvtx-include") + 1] == f"{profiling.NVTX_RANGE}/"
