import re

import pytest

from pytest_tesserabench.measure.precision import Precision, PrecisionError


@pytest.mark.parametrize(
    "text, storage, accum, canonical",
    [
        ("bf16", "bf16", "fp32", "bf16"),
        ("fp8_e4m3@accum(fp32)", "fp8_e4m3", "fp32", "fp8_e4m3"),
        ("fp16@accum(fp16)", "fp16", "fp16", "fp16@accum(fp16)"),
        (" TF32 ", "tf32", "fp32", "tf32"),
        ("fp64", "fp64", "fp64", "fp64"),  # fp64 accumulates in fp64 unless told
        ("fp64@accum(fp32)", "fp64", "fp32", "fp64@accum(fp32)"),
    ],
)
def test_grammar(text, storage, accum, canonical):
    p = Precision.parse(text)
    assert (p.storage, p.accum, str(p)) == (storage, accum, canonical)
    assert Precision.parse(str(p)) == p


@pytest.mark.parametrize(
    "text, message",
    [
        ("fp4", "unknown storage type 'fp4'"),
        ("bf17", "unknown storage type 'bf17' in precision 'bf17' (did you mean 'bf16'?)"),
        ("bf16@accum(bf16)", "unknown accumulator 'bf16' in precision 'bf16@accum(bf16)'; choose one of fp32, "),
        ("fp65", "(did you mean 'fp64'?)"),
        ("bf16@acc(fp32)", "does not match <storage>"),
        ("", "does not match"),
    ],
)
def test_bad_policies(text, message):
    with pytest.raises(PrecisionError, match=re.escape(message)):
        Precision.parse(text)


def test_itemsize_and_tolerances_follow_storage():
    assert [Precision.parse(s).itemsize for s in ("fp32", "tf32", "bf16", "fp16", "fp8_e5m2")] == [4, 4, 2, 2, 1]
    assert Precision.parse("fp32").rtol < Precision.parse("bf16").rtol < Precision.parse("fp8_e4m3").rtol
    assert Precision.parse("fp16@accum(fp16)").rtol >= Precision.parse("fp16").rtol


def test_device_support():
    fp8 = Precision.parse("fp8_e4m3")
    assert fp8.unsupported_reason((8, 0)) == "precision fp8_e4m3 needs sm_89 or newer; this GPU is sm_80"
    assert fp8.unsupported_reason((9, 0)) is None
    assert Precision.parse("bf16").unsupported_reason((7, 5)) is not None
    assert fp8.unsupported_reason(None) is None  # CPU/interpreter emulates every type


def test_fp64_holds_numpy_to_fp64_and_fails_a_kernel_that_computes_in_fp32_underneath():
    np = pytest.importorskip("numpy")
    from pytest_tesserabench.measure import accuracy

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((64, 4096)), rng.standard_normal((4096, 64))
    exact = a @ b
    pairwise = np.einsum("ik,kj->ij", a, b)  # another summation order, fp64 throughout
    assert accuracy.compare(pairwise, exact, "fp64")["ok"]
    through_fp32 = (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float64)
    assert not accuracy.compare(through_fp32, exact, "fp64")["ok"]
    assert accuracy.compare(through_fp32, exact, "fp32")["ok"]
    assert Precision.parse("fp64").itemsize == 8 and Precision.parse("fp64").min_capability == (0, 0)
    # summed in fp32, fp64 storage is held to fp32's tolerances (the coarser of the two)
    assert Precision.parse("fp64@accum(fp32)").rtol == Precision.parse("fp32").rtol
    assert Precision.parse("fp16@accum(fp16)").atol == Precision.parse("fp16").atol


@pytest.mark.parametrize("k", [256, 2048])
def test_fp32_matmul_passes_its_own_policy_against_fp64_at_any_length(k):
    # A fixed atol of 1e-5 failed torch's own fp32 matmul at K >= 256 (max error 5e-5 to 2e-4):
    # the absolute tolerance follows the reference's magnitude.
    torch = pytest.importorskip("torch")
    from pytest_tesserabench.measure import accuracy

    generator = torch.Generator().manual_seed(k)
    a, b = torch.randn(128, k, generator=generator), torch.randn(k, 128, generator=generator)
    result = accuracy.compare(a @ b, a.double() @ b.double(), "fp32")
    assert result["ok"], accuracy.failure_message(result)
    # ... and still catches a real error: one element off by 1e-3 of the rms
    wrong = (a @ b).clone()
    wrong[3, 5] += 1e-3 * float((a.double() @ b.double()).pow(2).mean().sqrt())
    result = accuracy.compare(wrong, a.double() @ b.double(), "fp32")
    assert not result["ok"] and result["mismatched"] == 1
    assert "the accumulator's atol x the reference's rms magnitude" in accuracy.failure_message(result)


def test_a_low_precision_outputs_atol_does_not_grow_with_its_magnitude():
    # Only the fp32 accumulator's share scales: a bf16 output's own rounding is relative (rtol),
    # so a near-zero element wrong by 0.5 among values of rms ~45 still fails.
    torch = pytest.importorskip("torch")
    from pytest_tesserabench.measure import accuracy

    generator = torch.Generator().manual_seed(7)
    a, b = torch.randn(64, 2048, generator=generator), torch.randn(2048, 64, generator=generator)
    expected = a.double() @ b.double()
    out = expected.to(torch.bfloat16)
    assert accuracy.compare(out, expected, "bf16")["ok"]  # its own rounding passes
    near_zero = int(expected.abs().argmin())
    wrong = out.flatten().clone()
    wrong[near_zero] += 0.5
    result = accuracy.compare(wrong.view_as(out), expected, "bf16")
    assert not result["ok"] and result["atol"] == pytest.approx(3e-2)
