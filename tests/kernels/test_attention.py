"""Flash-attention forward against a plain fp64/fp32 softmax(QK^T)V reference."""

import pytest
import torch
from kernel_checks import DTYPE_OF, assert_close

from kernels import attention as attn


def _ids(shape):
    B, H, S, D, causal = shape
    return f"B{B}-H{H}-S{S}-D{D}-{'causal' if causal else 'full'}"


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("shape", attn.CORRECTNESS_SHAPES, ids=_ids)
def test_attention_matches_reference(shape, precision, device):
    B, H, S, D, causal = shape
    dtype = DTYPE_OF[precision]
    q, k, v = (torch.randn(B, H, S, D, device=device).to(dtype) for _ in range(3))
    assert_close(attn.attention(q, k, v, causal=causal), attn.reference(q, k, v, causal=causal), precision)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_large_scores_and_custom_scale(causal, device):
    # Scores in the hundreds: exp overflows unless the running maximum is subtracted right,
    # and the rescaling of earlier blocks (alpha) is exercised as the maximum keeps growing.
    S, D = 75, 64
    q = (torch.randn(1, 2, S, D, device=device) * 4).half()
    k = (torch.randn(1, 2, S, D, device=device) * 4).half()
    v = torch.randn(1, 2, S, D, device=device).half()
    out = attn.attention(q, k, v, causal=causal, sm_scale=0.5)
    assert torch.isfinite(out.float()).all()
    assert_close(out, attn.reference(q, k, v, causal=causal, sm_scale=0.5), "fp16")


def test_attention_strided_inputs(device):
    # [B, S, H, D] storage viewed as [B, H, S, D]: the layout most models produce.
    B, S, H, D = 1, 40, 3, 64
    q, k, v = (torch.randn(B, S, H, D, device=device).half().transpose(1, 2) for _ in range(3))
    assert not q.is_contiguous()
    assert_close(attn.attention(q, k, v, causal=True), attn.reference(q, k, v, causal=True), "fp16")


def test_causal_first_query_sees_only_first_key(device):
    q, k, v = (torch.randn(1, 1, 33, 64, device=device).half() for _ in range(3))
    out = attn.attention(q, k, v, causal=True)
    torch.testing.assert_close(out[0, 0, 0], v[0, 0, 0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(shape=(1, 1, 8, 32)), "head_dim 32 is not supported"),
        (dict(shape=(1, 8, 64)), "must have 4 dimensions"),
        (dict(dtype=torch.float32), "supported: float16, bfloat16"),
        (dict(k_shape=(1, 1, 9, 64)), "of one shape"),
    ],
    ids=["head-dim", "3-d", "fp32", "shape-mismatch"],
)
def test_attention_rejects_bad_input(kwargs, message, device):
    shape = kwargs.get("shape", (1, 1, 8, 64))
    dtype = kwargs.get("dtype", torch.float16)
    q = torch.randn(*shape, device=device).to(dtype)
    k = torch.randn(*kwargs.get("k_shape", shape), device=device).to(dtype)
    with pytest.raises(ValueError, match=message):
        attn.attention(q, k, q)


def test_attention_rejects_mixed_dtypes(device):
    q = torch.randn(1, 1, 8, 64, device=device).half()
    with pytest.raises(ValueError, match="share one dtype"):
        attn.attention(q, q.bfloat16(), q)


def test_models():
    assert attn.flops(1, 1, 2, 64) == 4 * 4 * 64
    assert attn.flops(1, 1, 2, 64, causal=True) == 2 * 4 * 64
    assert attn.bytes(2, 3, 5, 64, 2) == 4 * 2 * 3 * 5 * 64 * 2
    assert attn.flops(2, 8, 4096, 128) == 4 * 16 * 4096 * 4096 * 128


def test_reference_on_sampled_rows_matches_full_reference(device):
    q, k, v = (torch.randn(1, 2, 50, 64, device=device).half() for _ in range(3))
    rows = [0, 7, 49]
    full = attn.reference(q, k, v, causal=True)
    torch.testing.assert_close(attn.reference(q, k, v, causal=True, rows=rows), full[:, :, rows])
