"""Helpers for kernel correctness tests (imported by name; fixtures live in conftest.py).

Without a GPU the root conftest.py sets TRITON_INTERPRET=1, so kernels run in the Triton
interpreter on CPU tensors; sizes here are kept small for that.
"""

import torch

from pytest_tesserabench.measure.precision import Precision


def assert_close(actual, expected, precision: str) -> None:
    """Compare in fp32 under the precision policy's tolerances (NaN matches NaN)."""
    policy = Precision.parse(precision)
    assert actual.shape == expected.shape, f"shape {tuple(actual.shape)} != {tuple(expected.shape)}"
    assert actual.dtype == expected.dtype, f"dtype {actual.dtype} != {expected.dtype}"
    torch.testing.assert_close(
        actual.float().cpu(), expected.float().cpu(), rtol=policy.rtol, atol=policy.atol, equal_nan=True
    )


DTYPE_OF = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
