"""The GPU-validation script's CPU-testable parts: import safety, arguments, the table."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from pytest_tesserabench.machine import device as machine

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "gpu_validation.py"


@pytest.fixture(scope="module")
def script():
    spec = importlib.util.spec_from_file_location("gpu_validation", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while being built
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


def test_help_works_without_a_gpu_and_without_importing_torch():
    code = (
        f"import runpy, sys; sys.argv = [{str(SCRIPT)!r}, '--help']\n"
        "try:\n    runpy.run_path(sys.argv[0], run_name='__main__')\n"
        "except SystemExit as done:\n    assert done.code == 0, done.code\n"
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "--ncu" in done.stdout and "--kernels" in done.stdout


def test_arguments(script):
    args = script.parse_args([])
    assert args.kernels == ["matmul", "copy", "add_10us", "add_2us"] and not args.ncu
    assert script.parse_args(["--kernels", "copy, add_2us", "--ncu"]).kernels == ["copy", "add_2us"]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--kernels", "matmul,conv"], "unknown ['conv']"),
        (["--kernels", ","], "empty list"),
        (["--reps", "3"], "at least 10"),
    ],
)
def test_bad_arguments_name_the_culprit(script, argv, message, capsys):
    with pytest.raises(SystemExit) as stopped:
        script.parse_args(argv)
    assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_table_in_microseconds_with_absent_methods_dropped(script):
    table = script.format_table(
        {
            "matmul": {
                "do_bench": 0.2051,
                "cudagraph": 0.1987,
                "events": 0.2003,
                "events+flush": 0.2049,
                "batched": 0.1990,
                "ncu": None,
            },
            "add_2us": {
                "do_bench": 0.00412,
                "cudagraph": 0.00183,
                "events": 0.00391,
                "events+flush": 0.0040,
                "batched": 0.00221,
                "ncu": None,
            },
            "copy": {
                "do_bench": 1.3104,
                "cudagraph": 1.301,
                "events": 1.30,
                "events+flush": 1.31,
                "batched": 1.30,
                "ncu": None,
            },
        }
    )
    lines = table.splitlines()
    assert lines[0] == (
        "| kernel | do_bench (µs) | cudagraph (µs) | events (µs) | events+flush (µs) | batched (µs) |"
    )  # no ncu column: never measured
    assert lines[1] == "|---|---:|---:|---:|---:|---:|"
    assert lines[2] == "| torch.matmul bf16 4096^3 | 205.1 | 198.7 | 200.3 | 204.9 | 199 |"
    assert lines[3] == "| fp32 add, 65,536 elements | 4.12 | 1.83 | 3.91 | 4 | 2.21 |"
    assert lines[4].startswith("| 1 GiB device-to-device copy | 1,310 | 1,301 |")


def test_format_us(script):
    assert script.format_us(None) == "—"
    assert script.format_us(0.0123456) == "12.35"
    assert script.format_us(2.5) == "2,500"


def test_ncu_figure_is_per_call(script):
    header = (
        '"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream",'
        '"Section Name","Metric Name","Metric Unit","Metric Value"'
    )
    rows = [
        f'"{i}","7","python","h","add_kernel","1","7","Command line profiler metrics",'
        f'"gpu__time_duration.sum","nsecond","{t}"'
        for i, t in enumerate([2000, 2100, 1900])
    ]
    assert script.ncu_ms_per_call("\n".join([header, *rows]), calls=3) == pytest.approx(0.002)


def test_kernel_traffic_models(script):
    assert script.KERNELS["copy"].bytes == 2 * 1024**3  # read and write
    assert script.KERNELS["add_10us"].bytes == 30_000_000  # fits in an H100's 50 MB L2


@pytest.mark.skipif(machine.cuda_capability() is not None, reason="checks the no-GPU exit")
def test_main_without_gpu_exits_with_a_reason(script, capsys):
    assert script.main([]) == 2
    assert "needs a CUDA GPU" in capsys.readouterr().err
