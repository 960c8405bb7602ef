"""Memory-bound row kernels: softmax, layer norm, RMS norm.

Each is measured beside its torch eager counterpart, torch.compile of the reference (GPU only)
and a device-to-device copy of the same tensor, the bandwidth ceiling it should approach.
Targets (an H100 only): at least 85% of the copy's GB/s, and faster than torch eager.
"""

import pytest
import suite_config as cfg
import torch
import torch.nn.functional as F

from kernels import layernorm as ln
from kernels import softmax as sm


def _copy_baseline(bench, x):
    dst = torch.empty_like(x)
    bench(cfg.copy_into, dst, x, name="copy", bytes=2 * x.numel() * x.element_size())


def _targets(bench, eager_name):
    if cfg.on_hopper():
        bench.require(at_least=0.85, relative_to="copy", metric="gbps")
        bench.require(at_least=1.0, relative_to=eager_name)


def _softmax_eager(x):
    return torch.softmax(x, dim=-1)


def _softmax_reference_in_dtype(x):
    return torch.softmax(x.float(), dim=-1).to(x.dtype)


@pytest.mark.bench_sizes(cfg.ROWS_SOFTMAX)
@pytest.mark.bench_precision("fp32", "fp16", "bf16")
def test_softmax(bench, R, C, precision):
    x = torch.randn(R, C, device=cfg.device()).to(precision.dtype)
    work = dict(flops=sm.flops(R, C), bytes=sm.bytes(R, C, precision.itemsize))
    out = bench(sm.softmax, x, **work)
    bench(_softmax_eager, x, name="torch.softmax", **work)
    compiled = cfg.compiled(_softmax_reference_in_dtype)
    if compiled is not None:
        bench(compiled, x, name="torch.compile", **work)
    _copy_baseline(bench, x)
    bench.check_accuracy(out, sm.reference(x), precision)
    _targets(bench, "torch.softmax")


def _layer_norm_eager(x, w, b):
    return F.layer_norm(x, (x.shape[-1],), w, b, 1e-5)


def _layer_norm_reference_in_dtype(x, w, b):
    return F.layer_norm(x.float(), (x.shape[-1],), w.float(), b.float(), 1e-5).to(x.dtype)


@pytest.mark.bench_sizes(cfg.ROWS_NORM)
@pytest.mark.bench_precision("fp32", "fp16", "bf16")
def test_layer_norm(bench, R, C, precision):
    dev = cfg.device()
    x = torch.randn(R, C, device=dev).to(precision.dtype)
    w, b = torch.randn(C, device=dev).to(precision.dtype), torch.randn(C, device=dev).to(precision.dtype)
    work = dict(flops=ln.flops(R, C), bytes=ln.bytes(R, C, precision.itemsize))
    out = bench(ln.layer_norm, x, w, b, **work)
    bench(_layer_norm_eager, x, w, b, name="F.layer_norm", **work)
    compiled = cfg.compiled(_layer_norm_reference_in_dtype)
    if compiled is not None:
        bench(compiled, x, w, b, name="torch.compile", **work)
    _copy_baseline(bench, x)
    bench.check_accuracy(out, ln.reference_layer_norm(x, w, b), precision)
    _targets(bench, "F.layer_norm")


def _rms_norm_eager(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, 1e-6)


def _rms_norm_reference_in_dtype(x, w):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + 1e-6) * w.float()).to(x.dtype)


@pytest.mark.bench_sizes(cfg.ROWS_NORM)
@pytest.mark.bench_precision("fp32", "fp16", "bf16")
def test_rms_norm(bench, R, C, precision):
    dev = cfg.device()
    x = torch.randn(R, C, device=dev).to(precision.dtype)
    w = torch.randn(C, device=dev).to(precision.dtype)
    work = dict(flops=ln.flops(R, C), bytes=ln.bytes(R, C, precision.itemsize, n_params=1))
    out = bench(ln.rms_norm, x, w, **work)
    bench(_rms_norm_eager, x, w, name="F.rms_norm", **work)
    compiled = cfg.compiled(_rms_norm_reference_in_dtype)
    if compiled is not None:
        bench(compiled, x, w, name="torch.compile", **work)
    _copy_baseline(bench, x)
    bench.check_accuracy(out, ln.reference_rms_norm(x, w), precision)
    _targets(bench, "F.rms_norm")
