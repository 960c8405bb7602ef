"""Source text shared by the plugin tests' throwaway projects (pytester writes it into their
test files)."""

# A fake CPU-timer clock: a kernel advances it by what it "takes", so figures and verdicts do not
# depend on how busy the machine is; the wait for a CPU reads 0 (a real one would be subtracted
# from fake samples), and no neighbours are seen (the other xdist worker would add notes).
# Needs `time`, `pytest` and `from pytest_tesserabench.machine import run_queue`.
FAKE_CLOCK = """
@pytest.fixture
def fake_clock(monkeypatch):
    from pytest_tesserabench.machine import neighbours

    now = [0]
    monkeypatch.setattr(time, "perf_counter_ns", lambda: now[0])
    monkeypatch.setattr(run_queue, "wait_clock", run_queue.unavailable)  # no real waits on a fake clock
    monkeypatch.setattr(neighbours, "others_clock", neighbours.unavailable)
    return now
"""

# A Triton vector add, as a user writes one (needs `triton` and `triton.language as tl`).
ADD_KERNEL = """
@triton.jit
def _add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)
"""

# A Triton kernel run by bench(): in Triton's CPU interpreter where no GPU is present.
TRITON_WORKLOAD = (
    """
import time
import torch
import triton
import triton.language as tl

DELAY = 0.0

"""
    + ADD_KERNEL
    + """

def add(x, y):
    time.sleep(DELAY)
    out = torch.empty_like(x)
    _add_kernel[(triton.cdiv(x.numel(), 256),)](x, y, out, x.numel(), BLOCK=256)
    return out


def test_add(bench):
    bench(add, torch.randn(1024), torch.randn(1024))
"""
)
