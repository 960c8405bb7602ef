"""Matmul benchmarks: the Triton kernels beside torch.matmul / torch._scaled_mm.

Grid and targets: see suite_config.py. tf32 runs with torch.backends.cuda.matmul.allow_tf32
on for both sides (the kernel follows that switch), so the comparison is like for like.
"""

import pytest
import suite_config as cfg
import torch

from kernels import matmul as mm


@pytest.fixture
def tf32_policy(precision):
    """Let tf32 be used exactly when the precision says so, for the kernel and torch alike."""
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = precision.storage == "tf32"
    yield
    torch.backends.cuda.matmul.allow_tf32 = before


def _operands(M, N, K, dtype):
    dev = cfg.device()
    return torch.randn(M, K, device=dev).to(dtype), torch.randn(K, N, device=dev).to(dtype)


def _run_matmul(bench, M, N, K, precision):
    a, b = _operands(M, N, K, precision.dtype)
    work = dict(flops=mm.flops(M, N, K), bytes=mm.bytes(M, N, K, precision.itemsize))
    out = bench(mm.matmul, a, b, **work)
    bench(torch.matmul, a, b, name="torch", **work)
    compiled = cfg.compiled(torch.matmul)
    if compiled is not None:
        bench(compiled, a, b, name="torch.compile", **work)
    bench.check_accuracy(out, mm.reference(a, b), precision)
    return out


@pytest.mark.bench_sizes(M=cfg.MATMUL_SQUARE)
@pytest.mark.bench_precision("tf32", "fp16", "bf16")
def test_matmul_square(bench, M, precision, tf32_policy):
    _run_matmul(bench, M, M, M, precision)
    if M in cfg.MATMUL_TARGET_SIZES and precision.storage in ("fp16", "bf16") and cfg.on_hopper():
        bench.require(at_least=0.9, relative_to="torch")


@pytest.mark.bench_sizes(cfg.MATMUL_LLM)
@pytest.mark.bench_precision("bf16")
def test_matmul_llm_projection(bench, M, N, K, precision, tf32_policy):
    _run_matmul(bench, M, N, K, precision)


def _fp8_operands(M, N, K, dtype):
    dev = cfg.device()
    a = torch.randn(M, K, device=dev)
    b_t = torch.randn(N, K, device=dev)
    # Per-tensor scales map each operand's largest magnitude onto the format's largest value.
    fmax = torch.finfo(dtype).max
    scale_a, scale_b = a.abs().max() / fmax, b_t.abs().max() / fmax
    a8 = (a / scale_a).to(dtype)
    b8 = (b_t / scale_b).to(dtype).t()  # column-major, as torch._scaled_mm requires
    return a8, b8, scale_a.float().reshape(()), scale_b.float().reshape(())


def _run_fp8(bench, M, N, K, precision):
    a, b, sa, sb = _fp8_operands(M, N, K, precision.dtype)
    work = dict(flops=mm.flops(M, N, K), bytes=mm.bytes(M, N, K, 1, out_itemsize=2))
    out = bench(mm.matmul_fp8, a, b, sa, sb, out_dtype=torch.bfloat16, **work)
    if precision.storage == "fp8_e4m3" or cfg.device() == "cpu":  # cuBLAS has no e5m2 x e5m2
        bench(torch._scaled_mm, a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16, name="torch._scaled_mm", **work)
    # The output is bf16: compare under bf16 tolerances, the inputs being exactly representable.
    bench.check_accuracy(out, mm.reference_fp8(a, b, sa, sb), "bf16")


@pytest.mark.bench_sizes(M=cfg.MATMUL_SQUARE)
@pytest.mark.bench_precision("fp8_e4m3", "fp8_e5m2")
def test_matmul_fp8_square(bench, M, precision):
    _run_fp8(bench, M, M, M, precision)
    if M in cfg.MATMUL_TARGET_SIZES and precision.storage == "fp8_e4m3" and cfg.on_hopper():
        bench.require(at_least=0.9, relative_to="torch._scaled_mm")


@pytest.mark.bench_sizes(cfg.MATMUL_LLM)
@pytest.mark.bench_precision("fp8_e4m3")
def test_matmul_fp8_llm_projection(bench, M, N, K, precision):
    _run_fp8(bench, M, N, K, precision)
