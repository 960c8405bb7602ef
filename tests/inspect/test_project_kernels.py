"""The project's own kernels (kernels/) analyse cleanly for sm_90 and sm_80."""

import pytest

torch = pytest.importorskip("torch")
matmul = pytest.importorskip("kernels.matmul")

from pytest_tesserabench.inspect import analyse_launches, specialize  # noqa: E402


def test_matmul_kernel_uses_tensor_cores_without_spilling(tmp_path):
    import triton.language as tl

    from pytest_tesserabench.inspect.capture import jit_function_for

    # Module globals computed from is_interpreting() keep their interpreter value in the
    # compiled twin (docs/static-analysis.md, limits); give this one its GPU value.
    jit_function_for(matmul._matmul_kernel).__globals__["_WIDEN_DOT_OPERANDS"] = tl.constexpr(False)
    a = torch.empty(512, 512, dtype=torch.float16)
    launch = specialize(matmul._matmul_kernel, (a, a, a, None, None, 512, 512, 512, 512, 1, 512, 1, 512, 1),
                        {"HAS_SCALES": False, "ALLOW_TF32": False, "BLOCK_SIZE_M": 128, "BLOCK_SIZE_N": 128,
                         "BLOCK_SIZE_K": 32, "GROUP_SIZE_M": 8, "num_warps": 8, "num_stages": 3})
    for record in analyse_launches([launch], ["sm_90", "sm_80"], cache_dir=tmp_path):
        assert record["error"] is None, record["error"]
        assert record["tensor_core_instructions"] > 0 and record["spill_bytes"] == 0
        assert 0 < record["occupancy"] <= 1
