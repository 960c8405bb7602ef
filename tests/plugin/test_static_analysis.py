"""Static kernel analysis through the plugin: records, terminal section, IR dump, and the
deterministic gate on a GPU-less machine (kernels run in the Triton interpreter here)."""

import json
import os

import pytest

triton = pytest.importorskip("triton")
torch = pytest.importorskip("torch")

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1",
    reason="exercises the interpreter path; a GPU run covers the compiled one",
)

KERNEL_TEST = """
import torch, triton, triton.language as tl

@triton.jit
def _scale_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0, mask=mask)

def scale(x):
    y = torch.empty_like(x)
    # One warp over 2048 elements: many registers per thread, so occupancy is below 100%.
    _scale_kernel[(triton.cdiv(x.numel(), 2048),)](x, y, x.numel(), BLOCK=2048, num_warps=1)
    return y

def test_scale(bench):
    x = torch.arange(1000, dtype=torch.float32)
    y = bench(scale, x, bytes=8000)
    bench.check_accuracy(y, x * 2, "fp32")
"""
FAST = ("--bench-max-time=0.01", "--bench-warmup=0", "--bench-min-rounds=2", "--bench-save-processes=0")


def test_kernels_are_recorded_shown_and_dumped(pytester, tmp_path):
    pytester.makepyfile(test_k=KERNEL_TEST)
    out, dump = tmp_path / "run.json", tmp_path / "ir"
    result = pytester.runpytest(
        "--bench", "--bench-arch=sm_90,sm_80", f"--bench-json={out}", f"--bench-ir-dump={dump}", *FAST
    )
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        ["*static kernel analysis*", "*_scale_kernel sm_90*regs *occ *", "*_scale_kernel sm_80*"]
    )
    record = json.loads(out.read_text())["benchmarks"]["test_k.py::test_scale"]
    assert record["timer"] == "interpreter"
    kernels = {k["arch"]: k for k in record["kernels"]}
    assert set(kernels) == {"sm_90", "sm_80"}
    for kernel in kernels.values():
        assert kernel["name"] == "_scale_kernel" and not kernel.get("error")
        assert kernel["registers"] > 0 and kernel["spill_bytes"] == 0 and 0 < kernel["occupancy"] <= 1
        assert kernel["constexprs"] == {"BLOCK": 2048} and kernel["num_warps"] == 1
        assert set(kernel["compile_ms"]) >= {"ttir", "ttgir", "llir", "ptx", "cubin"}
    dumped = {p.suffix for p in dump.rglob("*") if p.is_file()}
    assert {".ttir", ".ttgir", ".llir", ".ptx", ".cubin"} <= dumped


def test_lower_occupancy_than_the_baseline_fails_without_statistics(pytester, monkeypatch):
    from pytest_tesserabench.machine import device as machine

    pytester.makepyfile(test_k=KERNEL_TEST)
    pytester.runpytest("--bench-save=main", *FAST).assert_outcomes(passed=1)
    path = pytester.path / "baselines" / "main" / f"{machine.machine_key()}.json"
    data = json.loads(path.read_text())
    (kernel,) = data["runs"][0]["benchmarks"]["test_k.py::test_scale"]["kernels"]
    assert kernel["occupancy"] < 1.0
    # Pretend the baseline's kernel reached full occupancy: this run's is lower, deterministically.
    kernel["occupancy"] = 1.0
    path.write_text(json.dumps(data))
    result = pytester.runpytest("--bench-compare=main", *FAST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*REGRESSED*kernel _scale_kernel (sm_90): occupancy 1.00 -> 0.*"])


def _saved_as_if_on(pytester, key: str, device: str) -> tuple:
    """Baseline main, saved here by the caller, moved to another machine's file (``key``,
    ``device``), this machine's removed: (its path, its data)."""
    from pytest_tesserabench.machine import device as machine

    here = pytester.path / "baselines" / "main" / f"{machine.machine_key()}.json"
    data = json.loads(here.read_text())
    here.unlink()
    other = here.with_name(f"{key}.json")
    data["machine_key"] = key
    data["runs"][0]["machine"]["device"] = device
    other.write_text(json.dumps(data))
    return other, data


def test_a_baseline_recorded_on_a_gpu_gates_the_kernel_figures_on_a_gpu_less_runner(pytester, monkeypatch):
    from pytest_tesserabench.machine import device as machine

    monkeypatch.setenv("COLUMNS", "250")
    pytester.makepyfile(test_k=KERNEL_TEST)
    pytester.runpytest("--bench-save=main", *FAST).assert_outcomes(passed=1)
    # The same run, as if recorded on an H100 runner: another machine key and device.
    gpu, data = _saved_as_if_on(pytester, "nvidia-h100-80gb-hbm3-sm90", "NVIDIA H100 80GB HBM3")

    result = pytester.runpytest("--bench-compare=main", *FAST)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(
        [
            f"*no baseline for this machine ({machine.machine_key()}); gating the static kernel figures against "
            f"{gpu} (recorded on NVIDIA H100 80GB HBM3); timings are not compared across machines*",
        ]
    )
    result.stdout.fnmatch_lines(
        ["*UNCHANGED*kernel figures compared; timings not (timings come from another machine)*"]
    )
    # the header names what it gates there: the kernels and their archs
    result.stdout.fnmatch_lines(
        ["tesserabench: baseline main (*; the figures of 1 kernel(s) on sm_90 only (another machine))"]
    )
    # Timings are not compared, so none are measured again in interleaved passes.
    result.stdout.fnmatch_lines(
        ["tesserabench: one pass over the benchmark tests: the baseline is another machine's, so no timing*"]
    )
    result.stdout.no_fnmatch_line("*pass 1 of *")

    (kernel,) = data["runs"][0]["benchmarks"]["test_k.py::test_scale"]["kernels"]
    kernel["occupancy"] = 1.0  # the GPU-recorded kernel reached full occupancy; this one does not
    gpu.write_text(json.dumps(data))
    result = pytester.runpytest("--bench-compare=main", *FAST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*REGRESSED (*); kernel _scale_kernel (sm_90): occupancy 1.00 -> 0.*"])

    # Compiled by another Triton: shown, not gated (one that is not this run's: 3.6 is supported too).
    other = "3.6.0" if data["runs"][0]["machine"]["triton"] != "3.6.0" else "3.9.0"
    data["runs"][0]["machine"]["triton"] = other
    gpu.write_text(json.dumps(data))
    result = pytester.runpytest("--bench-compare=main", *FAST)
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines([f"*kernel figures compared, not gated: Triton {other} in the baseline*"])


def test_timings_against_another_machines_baseline_are_said_loudly_and_fail_when_unresolved_fails(
    pytester, monkeypatch
):
    """A runner of another CPU model than the one that saved the baseline (a pool of CI runners):
    its kernel figures are judged, its timings cannot be, and a green job must not hide that."""
    from pytest_tesserabench.machine import device as machine

    monkeypatch.setenv("COLUMNS", "250")
    pytester.makepyfile(test_k=KERNEL_TEST + "\n\ndef test_cpu(bench):\n    bench(sorted, list(range(2000, 0, -1)))\n")
    pytester.runpytest("--bench-save=main", *FAST).assert_outcomes(passed=2)
    _saved_as_if_on(pytester, "cpu-x86-64-amd-epyc-7763", "AMD EPYC 7763 64-Core Processor")

    result = pytester.runpytest("--bench-compare=main", *FAST)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(
        [
            "TIMINGS NOT JUDGED (1 timed benchmark(s); the kernel figures of 1 were): baseline main holds no runs of "
            f"this machine ({machine.machine_key()}), only of cpu-x86-64-amd-epyc-7763 "
            "(AMD EPYC 7763 64-Core Processor)*"
            "`pytest --bench-save=main`*--bench-unresolved=fail fails them"
        ]
    )
    # CI that asks to fail what it could not judge: the timed test fails, the kernel's passes
    result = pytester.runpytest("--bench-compare=main", "--bench-unresolved=fail", *FAST)
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*test_cpu*", "*Its timing was not judged: baseline main holds no runs of this*"])
    assert "its test failed, not on this row's verdict" not in result.stdout.str()


DOT_TEST = """
import torch, triton, triton.language as tl

@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(a_ptr + offs[:, None] * BLOCK + offs[None, :])
    b = tl.load(b_ptr + offs[:, None] * BLOCK + offs[None, :])
    tl.store(c_ptr + offs[:, None] * BLOCK + offs[None, :], tl.dot(a, b, PRECISION))

def mm(a, b):
    c = torch.empty_like(a)
    _mm_kernel[(1,)](a, b, c, BLOCK=32)
    return c

def test_mm(bench):
    a, b = torch.randn(32, 32), torch.randn(32, 32)
    bench.check_accuracy(bench(mm, a, b), a.double() @ b.double(), "fp32")
"""


@pytest.mark.parametrize(("precision", "warned"), [("input_precision='tf32'", True), ("input_precision='ieee'", False)])
def test_an_fp32_check_of_a_tf32_dot_warns_that_a_gpu_would_not_hold_it(pytester, precision, warned):
    # The interpreter computes tl.dot in fp32, so the check passes on a GPU-less runner; the
    # static analysis sees the TF32 tensor-core dot a GPU would run, whose error fp32's tolerance does not hold.
    pytester.makepyfile(test_k=DOT_TEST.replace("PRECISION", precision))
    result = pytester.runpytest("--bench", *FAST)
    result.assert_outcomes(passed=1)
    said = "*check_accuracy(fp32): _mm_kernel multiplies fp32 inputs on TF32 tensor cores*input_precision='ieee'*"
    if warned:
        result.stdout.fnmatch_lines([said])
    else:
        result.stdout.no_fnmatch_line(said)


def test_more_work_in_a_kernel_fails_past_the_work_threshold(pytester):
    from pytest_tesserabench.machine import device as machine

    pytester.makepyfile(test_k=KERNEL_TEST)
    pytester.runpytest("--bench-save=main", *FAST).assert_outcomes(passed=1)
    path = pytester.path / "baselines" / "main" / f"{machine.machine_key()}.json"
    data = json.loads(path.read_text())
    (kernel,) = data["runs"][0]["benchmarks"]["test_k.py::test_scale"]["kernels"]
    # Pretend the baseline's kernel held two thirds of this one's instructions: this one does more work.
    kernel["sass_instructions"] = round(kernel["sass_instructions"] / 1.5)
    path.write_text(json.dumps(data))
    result = pytester.runpytest("--bench-compare=main", *FAST)
    result.assert_outcomes(passed=1)  # off by default: a note
    result.stdout.fnmatch_lines(["*work SASS instructions*(+5*%)*"])
    result = pytester.runpytest("--bench-compare=main", "--bench-work-threshold=20", *FAST)
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*REGRESSED (severe)*SASS instructions*(+5*%), past --bench-work-threshold*"])
