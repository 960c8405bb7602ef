"""The project's own kernels (kernels/) analyse cleanly for sm_90 and sm_80."""

import pytest

torch = pytest.importorskip("torch")
matmul = pytest.importorskip("kernels.matmul")

from pytest_tesserabench.inspect import analyse_launches, specialize  # noqa: E402


def test_matmul_kernel_uses_tensor_cores_without_spilling(tmp_path):
    # No override of the interpreter-only operand widening: it is decided when the kernel is
    # traced (kernels._common.interpreting_at_trace_time), so every compile sees the GPU value.
    a = torch.empty(512, 512, dtype=torch.float16)
    launch = specialize(
        matmul._matmul_kernel,
        (a, a, a, None, None, 512, 512, 512, 512, 1, 512, 1, 512, 1),
        {
            "HAS_SCALES": False,
            "ALLOW_TF32": False,
            "BLOCK_SIZE_M": 128,
            "BLOCK_SIZE_N": 128,
            "BLOCK_SIZE_K": 32,
            "GROUP_SIZE_M": 8,
            "num_warps": 8,
            "num_stages": 3,
        },
    )
    for record in analyse_launches([launch], ["sm_90", "sm_80"], cache_dir=tmp_path):
        assert record["error"] is None, record["error"]
        assert record["tensor_core_instructions"] > 0 and record["spill_bytes"] == 0
        assert 0 < record["occupancy"] <= 1
