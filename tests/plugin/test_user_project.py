"""A user's own project, as a new user has it: Triton kernels (one autotuned), tests that use
`bench`, no conftest, no GPU, no TRITON_INTERPRET. The plugin alone must make it work."""

import json
import os

import pytest
from snippets import ADD_KERNEL

from pytest_tesserabench.machine import device as machine

pytest.importorskip("triton")
pytestmark = pytest.mark.skipif(machine.gpu_plausibly_present(), reason="the no-GPU path: needs a machine without one")

KERNELS = (
    """
import torch
import triton
import triton.language as tl

"""
    + ADD_KERNEL
    + """

def add(x, y):
    out = torch.empty_like(x)
    _add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
    return out


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 128}, num_warps=4),
        triton.Config({"BLOCK": 1024}, num_warps=8),
        triton.Config({"BLOCK": 64}, num_warps=2),
    ],
    key=["n"],
)
@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


def scale(x, factor):
    out = torch.empty_like(x)
    _scale_kernel[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel(), factor)
    return out
"""
)

TESTS = """
import torch
import my_kernels


def test_add(bench):
    x, y = torch.randn(4096), torch.randn(4096)
    out = bench(my_kernels.add, x, y, bytes=3 * 4 * 4096)
    bench.check_accuracy(out, x + y, "fp32")


def test_scale(bench):
    x = torch.randn(4096)
    out = bench(my_kernels.scale, x, 3.0)
    bench.check_accuracy(out, x * 3.0, "fp32")
"""

ARGS = (
    "--bench-max-time=0.05",
    "--bench-warmup=0",
    "--bench-min-rounds=1",
    "-p",
    "no:randomly",
    "--bench-save-processes=0",
)


@pytest.fixture
def project(pytester, monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.setenv("COLUMNS", "250")
    monkeypatch.setenv("TRITON_DEFAULT_FP_FUSION", "1")
    pytester.makepyfile(my_kernels=KERNELS, test_my_kernels=TESTS)
    return pytester


def kernels_of(path):
    run = json.loads(path.read_text())
    return {
        record_id: [
            (k["name"], k["arch"], k["constexprs"].get("BLOCK"), k["num_warps"], k["registers"]) for k in rec["kernels"]
        ]
        for record_id, rec in run["benchmarks"].items()
    }, run


def test_a_project_without_triton_kernels_hears_nothing_of_them(pytester):
    # (a subprocess: this process has imported Triton already)
    pytester.makepyfile(test_plain="def test_sum(bench):\n    bench(sum, range(100))\n")
    result = pytester.runpytest_subprocess("--bench", "--bench-max-time=0.05", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    assert "Triton" not in result.stdout.str()
    with_triton = "import triton\n" + "def test_sum(bench):\n    bench(sum, range(100))\n"
    pytester.makepyfile(test_plain=with_triton)
    result = pytester.runpytest_subprocess("--bench", "--bench-max-time=0.05", "-p", "no:randomly")
    result.stdout.fnmatch_lines(
        ["collected 1 item", "tesserabench: Triton kernels in the interpreter*statically for sm_90"]
    )
    assert "Triton" not in pytester.runpytest_subprocess("-q", "--bench", "--bench-max-time=0.05").stdout.str()


def test_triton_kernels_run_in_the_interpreter_without_any_setup(project, tmp_path):
    assert "TRITON_INTERPRET" not in os.environ
    plain = project.runpytest_subprocess()
    plain.assert_outcomes(passed=2)
    plain.stdout.fnmatch_lines(
        ["tesserabench: off (--bench to measure)", "tesserabench: Triton kernels in the interpreter*no GPU driver*"]
    )

    first, second = tmp_path / "first.json", tmp_path / "second.json"
    project.runpytest_subprocess("--bench-save=main", f"--bench-json={first}", *ARGS).assert_outcomes(passed=2)
    compared = project.runpytest_subprocess("--bench-compare=main", f"--bench-json={second}", *ARGS)
    compared.assert_outcomes(passed=2)
    compared.stdout.fnmatch_lines(
        [
            "*compared with baseline main*",
            "*UNCHANGED*kernel figures compared; timings not (timed in the Triton interpreter)*",
        ]
    )

    kernels, run = kernels_of(first)
    assert {r["timer"] for r in run["benchmarks"].values()} == {"interpreter"}
    # The autotuner took the first config, without timing any in the interpreter...
    assert kernels["test_my_kernels.py::test_scale"][0][:4] == ("_scale_kernel", "sm_90", 128, 4)
    assert kernels["test_my_kernels.py::test_add"][0][:4] == ("_add_kernel", "sm_90", 256, 4)
    assert all(k[4] for ks in kernels.values() for k in ks)  # registers read from the sm_90 binary
    # ...and the same again: the static figures of unchanged code do not move between runs.
    assert kernels_of(second)[0] == kernels


def test_never_leaves_triton_without_a_driver(project):
    result = project.runpytest_subprocess("--bench-interpret=never")
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines(["*active drivers*"])
