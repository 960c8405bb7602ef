"""Softmax (row-resident and online looped kernels) against an fp64 reference."""

import pytest
import torch
from kernel_checks import DTYPE_OF, assert_close

from kernels import softmax as sm

# Lowering the fused limit sends the same shapes through the online kernel, several chunks a row.
PATHS = {"fused": sm.MAX_FUSED_COLS, "online": 64}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape", sm.CORRECTNESS_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_softmax_matches_reference(shape, precision, path, device):
    if path == "online" and shape[1] > 1000 and precision != "fp32":
        pytest.skip("long online rows are covered in fp32; the interpreter is slow")
    x = (torch.randn(*shape, device=device) * 3).to(DTYPE_OF[precision])
    assert_close(sm.softmax(x, max_fused_cols=PATHS[path]), sm.reference(x), precision)


@pytest.mark.parametrize("path", PATHS)
# -inf inputs: the interpreter's numpy warns on inf - inf and 0/0, which is how the fully
# masked row gets the NaN torch.softmax gives (asserted below)
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.filterwarnings("ignore:divide by zero encountered:RuntimeWarning")
def test_softmax_extreme_values(path, device):
    x = torch.randn(5, 150, device=device)
    x[0] = float("-inf")  # fully masked row: NaN, as torch.softmax gives
    x[1, ::3] = float("-inf")  # partly masked row
    x[2, 7] = 1e30  # one dominant element
    x[3] *= 1e4  # large spread: exp underflows for all but the maximum
    x[4, :140] = float("-inf")  # the only finite values sit in the last chunk
    out = sm.softmax(x, max_fused_cols=PATHS[path])
    assert torch.isnan(out[0]).all()
    assert (out[1, ::3] == 0).all()
    assert out[2, 7] == 1.0
    assert_close(out, sm.reference(x), "fp32")


def test_softmax_keeps_leading_dimensions(device):
    x = torch.randn(2, 3, 17, device=device).half()
    out = sm.softmax(x)
    assert out.shape == x.shape
    assert_close(out, sm.reference(x), "fp16")


def test_softmax_rejects_bad_input(device):
    with pytest.raises(ValueError, match="supported: float32"):
        sm.softmax(torch.ones(3, 4, device=device, dtype=torch.int32))
    with pytest.raises(ValueError, match="must be a torch.Tensor"):
        sm.softmax([1.0, 2.0])


def test_models():
    assert sm.bytes(4, 8, 2) == 2 * 4 * 8 * 2
