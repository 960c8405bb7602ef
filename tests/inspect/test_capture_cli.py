"""Capturing launches (interpreter on CPU, or GPU) and the `tesserabench inspect` command."""

import argparse
import json
import os

import pytest

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")

import inspect_sample_kernels as samples  # noqa: E402

from pytest_tesserabench.inspect import capture_launches, cli  # noqa: E402

device = "cuda" if torch.cuda.is_available() else "cpu"
needs_launch = pytest.mark.skipif(
    device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1",
    reason="launching kernels needs a GPU or TRITON_INTERPRET=1",
)


@needs_launch
def test_capture_deduplicates_specializations_and_restores_triton():
    from triton.runtime.jit import JITFunction

    original_run = JITFunction.run
    x = torch.ones(256, device=device)
    out = torch.empty_like(x)
    with capture_launches() as launches:
        for _ in range(5):
            samples.vector_add_kernel[(1,)](x, x, out, 256, BLOCK=256)
        samples.vector_add_kernel[(1,)](x, x, out, 256, BLOCK=256, num_warps=2)
    assert JITFunction.run is original_run
    assert [(k.name, k.constexprs["BLOCK"], k.num_warps) for k in launches] == [
        ("vector_add_kernel", 256, 4),
        ("vector_add_kernel", 256, 2),
    ]
    assert launches[0].signature == {
        "x_ptr": "*fp32",
        "y_ptr": "*fp32",
        "out_ptr": "*fp32",
        "n": "i32",
        "BLOCK": "constexpr",
    }
    assert launches[0].interpreted == (device == "cpu")
    assert torch.equal(out, x + x)
    samples.vector_add_kernel[(1,)](x, x, out, 256, BLOCK=256)  # outside: nothing recorded
    assert len(launches) == 2


@needs_launch
def test_capture_records_the_autotuners_chosen_config_only():
    x = torch.ones(300, device=device)
    out = torch.empty_like(x)
    with capture_launches() as launches:
        samples.tuned_add_kernel[lambda meta: (triton.cdiv(300, meta["BLOCK"]),)](x, x, out, 300)
    assert len(launches) == 1  # the candidates benchmarked are not "the kernel that ran"
    assert launches[0].config["BLOCK"] == launches[0].constexprs["BLOCK"]
    assert launches[0].num_warps == launches[0].config["num_warps"]
    assert torch.equal(out, x + x)


def run_cli(*argv, capsys):
    parser = argparse.ArgumentParser()
    cli.add_arguments(parser)
    status = cli.run(parser.parse_args(list(argv)))
    return status, capsys.readouterr()


KERNEL = "tests/inspect/inspect_sample_kernels.py:vector_add_kernel"
SIG = "x_ptr=*fp32,y_ptr=*fp32,out_ptr=*fp32,n=i32"


def test_cli_analyses_a_kernel_from_its_signature(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    status, out = run_cli(
        KERNEL,
        "--sig",
        SIG,
        "--const",
        "BLOCK=1024",
        "--num-warps",
        "8",
        "--arch",
        "sm_80",
        "--json",
        "--cache-dir",
        str(tmp_path),
        capsys=capsys,
    )
    assert status == 0, out.err
    record = json.loads(out.out)[0]
    assert (record["name"], record["arch"], record["num_warps"], record["constexprs"]) == (
        "vector_add_kernel",
        "sm_80",
        8,
        {"BLOCK": 1024},
    )
    assert record["registers"] > 0 and record["occupancy"] > 0


@pytest.mark.parametrize(
    "argv, message",
    [
        (["--sig", "x_ptr=*fp32"], "--sig lacks the types of y_ptr, out_ptr, n"),
        (["--sig", SIG], "--const lacks values for the constexpr parameters BLOCK"),
        (["--sig", SIG + ",z=i32", "--const", "BLOCK=64"], "NAME one of x_ptr, y_ptr, out_ptr, n, BLOCK"),
        (["--sig", "x_ptr=*float,y_ptr=*fp32,out_ptr=*fp32,n=i32"], "unknown type '*float'"),
        (["--sig", SIG, "--const", "BLOCK=64", "--arch", "sm_75"], "accepted are sm_80"),
    ],
)
def test_cli_usage_errors_name_the_culprit(argv, message, capsys, monkeypatch):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    status, out = run_cli(KERNEL, *argv, "--no-cache", capsys=capsys)
    assert status == 2 and message in out.err


@needs_launch
def test_cli_captures_the_kernels_a_callable_launches(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    status, out = run_cli(
        "tests/inspect/inspect_sample_kernels.py:add_two",
        "--args",
        "torch.ones(1000, device=device)",
        "--arch",
        "sm_90",
        "--cache-dir",
        str(tmp_path),
        capsys=capsys,
    )
    assert status == 0, out.err
    assert "vector_add_kernel[BLOCK=512] warps=4" in out.out and "regs" in out.out
