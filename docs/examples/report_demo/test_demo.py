"""The CPU example behind docs/report-screenshot.png (see docs/usage.md, "Reports").

SLOW=1 makes the copy about twice as slow, to show a regression against a saved baseline.
"""

import os

import numpy as np
import pytest


@pytest.mark.bench_sizes(n=[32, 64, 128, 256])
@pytest.mark.bench_precision("fp32")
def test_matmul(bench, n, precision):
    a = np.random.rand(n, n).astype(np.float32)
    b = np.random.rand(n, n).astype(np.float32)
    work = dict(flops=2 * n**3, bytes=3 * n * n * 4)
    bench(np.matmul, a, b, **work)
    bench(np.einsum, "ij,jk->ik", a, b, name="einsum", **work)


@pytest.mark.bench_sizes(n=[2**14, 2**16, 2**18])
def test_copy(bench, n):
    x = np.ones(n, np.float32)
    copy = (lambda x: np.copy(np.copy(x))) if os.environ.get("SLOW") else np.copy
    bench(copy, x, bytes=2 * x.nbytes)
    bench(np.add, x, 1.0, name="add", bytes=2 * x.nbytes)


def test_sort_a_rather_long_name_for_a_test_function_that_never_ends_well(bench):
    x = np.random.rand(10000)
    bench(np.sort, x)
    bench(sorted, x, name="python sorted")
