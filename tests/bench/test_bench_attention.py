"""Attention forward benchmarks: the Triton kernel beside F.scaled_dot_product_attention.

Grid and targets: see suite_config.py. Long sequences are checked against the reference on a
sample of query rows (the S x S score matrix would not fit in memory).
"""

import math

import pytest
import suite_config as cfg
import torch
import torch.nn.functional as F

from kernels import attention as attn


def _eager_attention(q, k, v, causal: bool):
    """The reference in the inputs' dtype, the form torch.compile is given."""
    scores = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    if causal:
        S = q.shape[-2]
        mask = torch.ones(S, S, dtype=torch.bool, device=q.device).tril()
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores.float(), dim=-1).to(q.dtype) @ v


def _run(bench, B, H, S, D, causal, precision):
    dev = cfg.device()
    q, k, v = (torch.randn(B, H, S, D, device=dev, dtype=precision.dtype) for _ in range(3))
    work = dict(flops=attn.flops(B, H, S, D, causal=causal), bytes=attn.bytes(B, H, S, D, precision.itemsize))
    out = bench(attn.attention, q, k, v, causal=causal, **work)
    bench(F.scaled_dot_product_attention, q, k, v, is_causal=causal, name="sdpa", **work)
    compiled = cfg.compiled(_eager_attention)
    if compiled is not None and S <= cfg.ATTENTION_FULL_REFERENCE_MAX_S:  # S x S scores materialise
        bench(compiled, q, k, v, causal, name="torch.compile", **work)
    if S <= cfg.ATTENTION_FULL_REFERENCE_MAX_S:
        bench.check_accuracy(out, attn.reference(q, k, v, causal=causal), precision)
    else:
        rows = cfg.sample_rows(S)
        bench.extra_info["accuracy_rows_checked"] = len(rows)
        bench.check_accuracy(out[:, :, rows], attn.reference(q, k, v, causal=causal, rows=rows), precision)
    if precision.storage == "bf16" and D == 128 and S >= cfg.ATTENTION_TARGET_MIN_S and cfg.on_hopper():
        bench.require(at_least=1.0, relative_to="sdpa")


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.bench_sizes(cfg.ATTENTION_GRID)
@pytest.mark.bench_precision("fp16", "bf16")
def test_attention(bench, B, H, S, D, causal, precision):
    _run(bench, B, H, S, D, causal, precision)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.bench_sizes(cfg.ATTENTION_LONG)
@pytest.mark.bench_precision("bf16")
def test_attention_long_sequence(bench, B, H, S, D, causal, precision):
    _run(bench, B, H, S, D, causal, precision)
