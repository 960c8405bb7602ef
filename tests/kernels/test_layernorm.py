"""layer_norm and rms_norm (row-resident and looped kernels) against fp64 references."""

import pytest
import torch
from kernel_checks import DTYPE_OF, assert_close

from kernels import layernorm as ln

PATHS = {"fused": ln.MAX_FUSED_COLS, "looped": 64}


def _inputs(shape, dtype, device, param_dtype=None):
    x = (torch.randn(*shape, device=device) * 2 + 0.5).to(dtype)
    w = torch.randn(shape[-1], device=device).to(param_dtype or dtype)
    b = torch.randn(shape[-1], device=device).to(param_dtype or dtype)
    return x, w, b


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape", ln.CORRECTNESS_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_layer_norm_matches_reference(shape, precision, path, device):
    if path == "looped" and shape[1] > 1000 and precision != "fp32":
        pytest.skip("long looped rows are covered in fp32; the interpreter is slow")
    x, w, b = _inputs(shape, DTYPE_OF[precision], device)
    assert_close(ln.layer_norm(x, w, b, max_fused_cols=PATHS[path]), ln.reference_layer_norm(x, w, b), precision)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape", ln.CORRECTNESS_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_rms_norm_matches_reference(shape, precision, path, device):
    if path == "looped" and shape[1] > 1000 and precision != "fp32":
        pytest.skip("long looped rows are covered in fp32; the interpreter is slow")
    x, w, _ = _inputs(shape, DTYPE_OF[precision], device)
    assert_close(ln.rms_norm(x, w, max_fused_cols=PATHS[path]), ln.reference_rms_norm(x, w), precision)


@pytest.mark.parametrize("path", PATHS)
def test_layer_norm_large_offset_and_magnitude(path, device):
    # A large common offset: E[x^2] - E[x]^2 would cancel catastrophically; deviations do not.
    x = torch.randn(3, 300, device=device) + 1e4
    x[2] *= 1e3
    w, b = torch.ones(300, device=device), torch.zeros(300, device=device)
    out = ln.layer_norm(x, w, b, max_fused_cols=PATHS[path])
    assert_close(out, ln.reference_layer_norm(x, w, b), "tf32")


def test_fp32_parameters_with_half_input_and_no_affine(device):
    x, w, b = _inputs((9, 130), torch.bfloat16, device, param_dtype=torch.float32)
    assert_close(ln.layer_norm(x, w, b), ln.reference_layer_norm(x, w, b), "bf16")
    assert_close(ln.layer_norm(x, None, None), ln.reference_layer_norm(x, None, None), "bf16")
    assert_close(ln.rms_norm(x, None), ln.reference_rms_norm(x, None), "bf16")


def test_constant_row_normalises_to_bias(device):
    x = torch.full((2, 33), 7.0, device=device)
    w, b = torch.ones(33, device=device), torch.arange(33.0, device=device)
    out = ln.layer_norm(x, w, b)
    # Zero variance: no NaN, and the bias. A GPU's fp32 division is correct to 2 ulp, so the mean
    # may miss 7 by an ulp (4.8e-7), which 1/sqrt(eps) = 316 turns into 1.5e-4.
    assert torch.isfinite(out).all()
    torch.testing.assert_close(out, b.expand(2, 33), atol=2e-4, rtol=0)


@pytest.mark.parametrize(
    "args, message",
    [
        (lambda d: (torch.randn(4, 8, device=d), torch.ones(7, device=d), None), "weight has 7 elements"),
        (
            lambda d: (torch.randn(4, 8, device=d).half(), torch.ones(8, device=d).double(), None),
            "weight has dtype float64",
        ),
        (
            lambda d: (torch.randn(4, 8, device=d), torch.ones(8, device=d), torch.ones(8, 1, device=d)),
            "bias must have 1",
        ),
    ],
    ids=["weight-size", "weight-dtype", "bias-2d"],
)
def test_layer_norm_rejects_bad_input(args, message, device):
    x, w, b = args(device)
    with pytest.raises(ValueError, match=message):
        ln.layer_norm(x, w, b)


def test_rejects_negative_eps(device):
    with pytest.raises(ValueError, match="eps must be a non-negative number"):
        ln.rms_norm(torch.randn(2, 4, device=device), None, eps=-1.0)
