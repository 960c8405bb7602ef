"""matmul and matmul_fp8 against an fp64 reference, on awkward shapes and layouts."""

import pytest
import torch
from kernel_checks import DTYPE_OF, assert_close

from kernels import matmul as mm


@pytest.mark.parametrize("precision", ["fp32", "fp16", "bf16"])
@pytest.mark.parametrize("shape", mm.CORRECTNESS_SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_matmul_matches_reference(shape, precision, device):
    M, N, K = shape
    dtype = DTYPE_OF[precision]
    a = torch.randn(M, K, device=device).to(dtype)
    b = torch.randn(K, N, device=device).to(dtype)
    assert_close(mm.matmul(a, b), mm.reference(a, b), precision)


@pytest.mark.parametrize("layout", ["a_col_major", "b_col_major", "both"])
def test_matmul_accepts_column_major_operands(layout, device):
    M, N, K = 45, 38, 70
    a = torch.randn(M, K, device=device, dtype=torch.float16)
    b = torch.randn(K, N, device=device, dtype=torch.float16)
    if layout in ("a_col_major", "both"):
        a = a.t().contiguous().t()
    if layout in ("b_col_major", "both"):
        b = b.t().contiguous().t()
    assert_close(mm.matmul(a, b), mm.reference(a, b), "fp16")


def test_matmul_out_dtype_and_large_magnitudes(device):
    # Products near 2^21 overflow fp16 storage; an fp32 output keeps them, accumulation is fp32.
    a = (torch.randn(33, 64, device=device) * 200).half()
    b = (torch.randn(64, 20, device=device) * 200).half()
    out = mm.matmul(a, b, out_dtype=torch.float32)
    assert out.dtype == torch.float32
    assert out.abs().max() > 65504  # really beyond the fp16 range
    # Terms near 4e4 cancel in places: fp32 accumulation leaves absolute errors far above the
    # fp32 policy's atol there, so the looser tf32 tolerances apply.
    assert_close(out, mm.reference(a, b, out_dtype=torch.float32), "tf32")


def test_matmul_empty_inner_dimension_gives_zeros(device):
    a = torch.randn(4, 0, device=device)
    b = torch.randn(0, 3, device=device)
    assert torch.equal(mm.matmul(a, b), torch.zeros(4, 3, device=device))


@pytest.mark.parametrize("fp8", ["fp8_e4m3", "fp8_e5m2"])
@pytest.mark.parametrize("shape", [(1, 16, 32), (33, 40, 64), (70, 19, 100)], ids=lambda s: "x".join(map(str, s)))
def test_matmul_fp8_matches_reference(shape, fp8, device):
    M, N, K = shape
    dtype = torch.float8_e4m3fn if fp8 == "fp8_e4m3" else torch.float8_e5m2
    a = torch.randn(M, K, device=device).to(dtype)
    b = torch.randn(N, K, device=device).to(dtype).t()  # column-major, as torch._scaled_mm wants
    scale_a = torch.tensor(0.5, device=device)
    scale_b = torch.tensor([3.0], device=device)
    out = mm.matmul_fp8(a, b, scale_a, scale_b)
    assert out.dtype == torch.bfloat16
    assert_close(out, mm.reference_fp8(a, b, scale_a, scale_b), "bf16")


@pytest.mark.parametrize(
    "precision, b_layout",
    [("fp16", "row"), ("bf16", "col"), ("fp8_e4m3", "col")],
)
def test_tma_persistent_path(precision, b_layout, device):
    """The Hopper kernel's logic (tile walk, descriptors, epilogue split), run where it can be."""
    if mm.TensorDescriptor is None:
        pytest.skip("this Triton has no host-side TMA descriptors")
    if device == "cuda" and torch.cuda.get_device_capability()[0] != 9:
        pytest.skip("the TMA persistent kernel needs an sm_90 GPU (or the interpreter)")
    M, N, K = 70, 48, 96  # not multiples of the 32x32x32 interpreter tile: edge tiles are clipped
    fp8 = precision.startswith("fp8")
    dtype = torch.float8_e4m3fn if fp8 else DTYPE_OF[precision]
    a = torch.randn(M, K, device=device).to(dtype)
    b = (
        torch.randn(N, K, device=device).to(dtype).t()
        if b_layout == "col"
        else torch.randn(K, N, device=device).to(dtype)
    )
    c = torch.empty(M, N, device=device, dtype=torch.bfloat16 if fp8 else dtype)
    if fp8:
        scales = (torch.tensor([2.0], device=device), torch.tensor([0.25], device=device))
        mm._launch_tma_persistent(a, b, c, *scales, num_sms=3)
        assert_close(c, mm.reference_fp8(a, b, *scales), "bf16")
    else:
        mm._launch_tma_persistent(a, b, c, num_sms=3)  # fewer programs than tiles: the loop is walked
        assert_close(c, mm.reference(a, b), precision)


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: (torch.randn(4, 5, device=d), torch.randn(6, 3, device=d)), "inner dimensions differ"),
        (lambda d: (torch.randn(4, 5, device=d).half(), torch.randn(5, 3, device=d)), "cast one so they match"),
        (lambda d: (torch.randn(2, 4, 5, device=d), torch.randn(5, 3, device=d)), "must have 2 dimensions"),
        (lambda d: (torch.randn(4, 5, device=d).int(), torch.randn(5, 3, device=d).int()), "supported: float32"),
        (lambda d: (torch.randn(4, 10, device=d)[:, ::2], torch.randn(5, 3, device=d)), "row-major or column-major"),
    ],
    ids=["inner-dim", "mixed-dtype", "3-d", "int", "strided"],
)
def test_matmul_rejects_bad_input_with_a_clear_message(make, message, device):
    a, b = make(device)
    with pytest.raises(ValueError, match=message):
        mm.matmul(a, b)


def test_matmul_fp8_rejects_bad_scales(device):
    a = torch.randn(8, 16, device=device).to(torch.float8_e4m3fn)
    b = torch.randn(16, 8, device=device).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="scale_a must be a one-element float32 tensor"):
        mm.matmul_fp8(a, b, torch.ones(2, device=device), torch.ones(1, device=device))
    with pytest.raises(ValueError, match="supported: float8"):
        mm.matmul_fp8(a.half(), b.half(), torch.ones(1, device=device), torch.ones(1, device=device))


def test_cpu_tensors_without_interpreter_are_refused(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ValueError, match="TRITON_INTERPRET=1"):
        mm.matmul(torch.randn(4, 4), torch.randn(4, 4))


def test_models():
    assert mm.flops(2, 3, 4) == 48
    assert mm.bytes(2, 3, 4, 2) == (8 + 12 + 6) * 2


def test_tma_layout_rules():
    """Which operands the Hopper path can describe with TMA (checked on CPU tensors)."""
    b_row = torch.empty(64, 40, dtype=torch.float16)
    b_col = torch.empty(40, 64, dtype=torch.float16).t()
    assert not mm._b_is_k_major(b_row) and mm._b_is_k_major(b_col)
    assert mm._tma_row_major_ok(b_row) and mm._tma_row_major_ok(b_col.t())
    assert not mm._tma_row_major_ok(torch.empty(64, 1, dtype=torch.float16))  # 2-byte rows
    assert not mm._tma_row_major_ok(torch.empty(8, 36, dtype=torch.float16))  # 72-byte rows


class _Operand:
    def __init__(self, itemsize):
        self.itemsize = itemsize

    def element_size(self):
        return self.itemsize


@pytest.mark.parametrize("itemsize", [4, 2, 1])
def test_a_problem_smaller_than_every_tile_gets_the_smallest_config_that_fits_shared_memory(monkeypatch, itemsize):
    # 17x13x29: every tile is over twice the problem, so the size rule keeps none; the config
    # left must still fit sm_90's shared memory (fp32 got one needing 384 KiB there).
    monkeypatch.setattr(mm, "is_interpreting", lambda: False)
    configs = mm.matmul_configs()
    [chosen] = mm._prune_configs(configs, {"a_ptr": _Operand(itemsize), "M": 17, "N": 13, "K": 29})
    sizes = [chosen.kwargs[k] for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")]
    assert mm._shared_bytes(*sizes, chosen.num_stages, itemsize) <= mm._SMEM_BUDGET
    if itemsize > 1:
        assert sizes == [32, 64, 32] or sizes == [64, 32, 32]
