"""Timer choice by where the data lives; CUDA timers where a GPU exists."""

import pytest

from pytest_tesserabench.measure import timing


def test_auto_picks_cpu_for_host_data():
    timer = timing.make_timer("auto", lambda: None, ([1, 2],), {}, interpreted=False)
    assert timer.name == "cpu"


def test_interpreted_kernels_get_the_interpreter_label():
    timer = timing.make_timer("auto", lambda: None, (), {}, interpreted=True)
    assert timer.name == "interpreter"


def test_cuda_device_found_in_nested_arguments():
    torch = pytest.importorskip("torch")
    assert timing.cuda_device_of(([torch.zeros(1)], {"x": torch.zeros(1)})) is None
    if torch.cuda.is_available():
        assert timing.cuda_device_of(([torch.zeros(1, device="cuda")],)).type == "cuda"


def _cuda():
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU: the CUDA timers are exercised where one exists")
    return torch


@pytest.mark.parametrize("kind", ["cuda_event", "cuda_graph"])
def test_cuda_timers_time_a_matmul(kind):
    torch = _cuda()
    a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
    timer = timing.make_timer(kind, lambda: a @ a, (a,), {}, interpreted=False)
    assert timer.name == kind
    samples = timer.round(5)
    assert len(samples) == 5 and all(0.001 < s < 100 for s in samples)


def test_cuda_flush_buffer_is_twice_l2():
    torch = _cuda()
    from pytest_tesserabench.machine import device as machine

    x = torch.zeros(16, device="cuda")
    timer = timing.make_timer("cuda_event", lambda: x.add_(1), (x,), {}, interpreted=False)
    assert timer.flush_buffer.numel() * 4 >= 2 * machine.l2_cache_bytes(0)
