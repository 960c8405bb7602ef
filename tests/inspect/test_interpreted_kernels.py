"""The real flow on a machine without a GPU: the project's kernels run in the interpreter while
captured, then the captured launches are compiled for sm_90 and sm_80 in the same process.

Running an interpreted kernel that calls another @jit function (tl.max, tl.sum, a helper)
leaves triton.language.core patched for the interpreter (Triton 3.6-3.9); every later compile
then failed with "'block_argument' object has no attribute 'dtype'". Shapes are small: the
interpreter runs each program in Python. One module-scoped capture and analysis (~10 s cold).
"""

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("triton")

from pytest_tesserabench.inspect import analyse_launches, capture_launches, dump_paths  # noqa: E402
from pytest_tesserabench.inspect.interpreter_state import language_as_compiled, leftover_patches  # noqa: E402

pytestmark = pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="the interpreter flow needs TRITON_INTERPRET=1"
)

ARCHS = ("sm_90", "sm_80")
KERNELS = ("_softmax_row_kernel", "_norm_row_kernel", "_attn_fwd_kernel", "_matmul_kernel")


@pytest.fixture(scope="module")
def analysed(tmp_path_factory):
    from triton.runtime.errors import InterpreterError

    from kernels.attention import attention
    from kernels.attention import reference as attention_reference
    from kernels.layernorm import layer_norm, reference_layer_norm
    from kernels.matmul import matmul
    from kernels.softmax import softmax

    torch.manual_seed(0)
    x = torch.randn(4, 100)
    w, b = torch.randn(64), torch.randn(64)
    rows = torch.randn(3, 64)
    q, k, v = (torch.randn(1, 1, 32, 64, dtype=torch.float16) for _ in range(3))
    a, bm = torch.randn(32, 48, dtype=torch.bfloat16), torch.randn(48, 32, dtype=torch.bfloat16)
    with capture_launches() as launches:
        try:
            outputs = {
                "softmax": (softmax(x), torch.softmax(x, dim=-1)),
                "layer_norm": (layer_norm(rows, w, b), reference_layer_norm(rows, w, b)),
                "attention": (attention(q, k, v, causal=True), attention_reference(q, k, v, causal=True)),
                "matmul": (matmul(a, bm), (a.float() @ bm.float()).to(torch.bfloat16)),
            }
        except InterpreterError as error:  # e.g. Triton 3.6's interpreter with NumPy 2
            pytest.skip(f"this Triton's interpreter cannot run the project's kernels (tests/kernels shows it): {error}")
    dump = tmp_path_factory.mktemp("dump")
    records = analyse_launches(launches, ARCHS, cache_dir=tmp_path_factory.mktemp("cache"), dump_dir=dump)
    return {(r["name"], r["arch"]): r for r in records}, outputs, dump


def test_the_interpreter_still_computes_the_right_results(analysed):
    for name, (got, want) in analysed[1].items():
        torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2, msg=name)


@pytest.mark.parametrize("arch", ARCHS)
@pytest.mark.parametrize("kernel", KERNELS)
def test_captured_kernel_compiles_for_the_gpu(analysed, kernel, arch):
    record = analysed[0][(kernel, arch)]
    assert record["error"] is None, record["error"]
    assert record["registers"] > 0 and 0 < record["occupancy"] <= 1
    if kernel in ("_attn_fwd_kernel", "_matmul_kernel"):
        assert record["tensor_core_instructions"] > 0


@pytest.mark.parametrize("arch", ARCHS)
def test_matmul_is_analysed_as_the_gpu_compiles_it(analysed, arch):
    """The interpreter-only widening of bf16 dot operands to fp32 is absent from the binary."""
    ptx = dump_paths(analysed[2], analysed[0][("_matmul_kernel", arch)])["ptx"].read_text()
    tensor_core_lines = [line for line in ptx.splitlines() if "mma" in line and ".bf16" in line]
    assert tensor_core_lines, "no bf16 tensor-core instruction in the analysed matmul"
    assert ".tf32" not in ptx


def test_leftover_interpreter_patches_are_undone_only_while_compiling():
    """Independent of whether this Triton still leaks: replay what an interpreted kernel that
    calls tl.sum does to triton.language (the kernel's scope restored, the nested call's not)
    and check that a compile sees the real language and the interpreter gets its state back."""
    import types

    interpreter = pytest.importorskip("triton.runtime.interpreter")
    import triton.language as tl

    if not (hasattr(interpreter, "_patch_lang") and hasattr(interpreter, "_LangPatchScope")):
        pytest.skip("this Triton's interpreter patches triton.language differently")
    kernel = types.FunctionType((lambda: None).__code__, {"tl": tl})  # names `tl`, like a kernel
    nested = types.FunctionType((lambda: None).__code__, {"core": tl.core})  # like tl.sum's module
    before = dict(vars(tl.core))  # may already hold leftovers of kernels run earlier
    outer = interpreter._patch_lang(kernel)
    interpreter._patch_lang(nested)  # InterpretedFunction.__call__ keeps no scope
    outer.restore()
    try:
        patched_cast = tl.core.cast
        assert patched_cast is not tl.cast and tl.core.range is not tl.range  # tl's own are real
        assert leftover_patches()
        with language_as_compiled():
            assert leftover_patches() == []
            assert tl.core.cast is tl.cast and tl.core.range is tl.range
        assert tl.core.cast is patched_cast  # the interpreter's state is put back
    finally:
        for name, value in before.items():
            if vars(tl.core).get(name) is not value:
                setattr(tl.core, name, value)
