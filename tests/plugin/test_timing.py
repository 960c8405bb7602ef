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


class _FakeGpu:
    """A host clock and one stream: an operation starts when both the host has enqueued it and the
    stream has finished what came before (what makes a launch gap land inside a timed window)."""

    def __init__(self, sm_hz: float):
        self.host = 0.0
        self.free = 0.0
        self.sm_hz = sm_hz
        self.holds: list[int] = []  # repetitions enqueued behind each spin kernel
        self.held_s = 0.0  # GPU time spent in spin kernels
        self.dirty_l2 = False  # L2 holds lines that must be written back before it can hold others

    def clock(self) -> float:
        return self.host

    def launch(self, host_s: float, gpu_s: float) -> float:
        self.host += host_s
        start = max(self.free, self.host)
        self.free = start + gpu_s
        return start


def _fake_torch(gpu: _FakeGpu, flush_s: float, *, can_sleep: bool = True):
    from types import SimpleNamespace

    class Event:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self):
            self.at = gpu.launch(2e-6, 0.0)
            if gpu.holds:
                gpu.holds[-1] += 0.5  # two records per repetition

        def elapsed_time(self, end):
            return (end.at - self.at) * 1e3

    class Tensor:
        def zero_(self):  # a write leaves L2 full of dirty lines
            gpu.launch(5e-6, flush_s)
            gpu.dirty_l2 = True

        def sum(self):  # a read evicts as much and leaves L2 clean
            gpu.launch(5e-6, flush_s)
            gpu.dirty_l2 = False

    def synchronize(device=None):
        gpu.host = max(gpu.host, gpu.free)

    def sleep(cycles):
        gpu.launch(5e-6, cycles / gpu.sm_hz)
        gpu.holds.append(0)
        gpu.held_s += cycles / gpu.sm_hz

    cuda = SimpleNamespace(Event=Event, synchronize=synchronize, current_device=lambda: 0)
    if can_sleep:
        cuda._sleep = sleep
    return SimpleNamespace(
        device=lambda d: SimpleNamespace(index=0, type="cuda"),
        int32="int32",
        empty=lambda *args, **kwargs: Tensor(),
        zeros=lambda *args, **kwargs: Tensor(),
        cuda=cuda,
    )


def _event_timer(monkeypatch, *, host_s, kernel_s, can_sleep=True, sm_hz=1.7e9):
    from pytest_tesserabench.machine import device as machine

    monkeypatch.setattr(machine, "l2_cache_bytes", lambda index=0: 50 * 2**20)
    gpu = _FakeGpu(sm_hz)
    flush_s = 33e-6  # 100 MB written at 3 TB/s
    torch = _fake_torch(gpu, flush_s, can_sleep=can_sleep)
    timer = timing.CudaEventTimer(lambda: gpu.launch(host_s, kernel_s), "cuda", torch=torch, clock=gpu.clock)
    return gpu, timer


def test_a_launch_slower_than_its_kernel_is_not_timed_as_the_kernel(monkeypatch):
    # 20 us of GPU work behind 80 us of Python launch: the events must read 20 us.
    gpu, timer = _event_timer(monkeypatch, host_s=80e-6, kernel_s=20e-6)
    samples = timer.round(200)
    assert samples == pytest.approx([0.020] * 200, rel=1e-6)
    # Without the hold the stream runs dry after each flush and the gap is billed to the kernel.
    _, unheld = _event_timer(monkeypatch, host_s=80e-6, kernel_s=20e-6, can_sleep=False)
    assert min(unheld.round(200)) > 0.040


def test_holds_cover_chunks_the_launch_queue_can_take(monkeypatch):
    gpu, timer = _event_timer(monkeypatch, host_s=10e-6, kernel_s=5e-6)
    timer.calibrate(1e-3)  # the warm-up's wall time: an upper bound of the host's time
    assert timer.round(300) == pytest.approx([0.005] * 300, rel=1e-6)
    assert sum(gpu.holds) == 300 and max(gpu.holds) <= timing.CudaEventTimer.MAX_CHUNK
    # After the first chunk the holds follow the host time measured (19 us a repetition), not the
    # warm-up's upper bound: the round's holds cost little more than the first one.
    assert gpu.held_s < 0.15


def test_a_host_slower_than_the_longest_hold_gets_smaller_chunks(monkeypatch):
    # 30 ms of host time per call: a chunk of 64 would need a 4 s hold; each hold stays bounded.
    gpu, timer = _event_timer(monkeypatch, host_s=30e-3, kernel_s=1e-3)
    assert timer.round(12) == pytest.approx([1.0] * 12, rel=1e-6)
    assert max(gpu.holds) == 1


def test_the_flush_leaves_l2_clean_so_a_memory_bound_kernel_is_not_billed_its_write_back(monkeypatch):
    # A kernel that streams through L2 first writes back whatever dirty lines it evicts: 15 us for
    # an L2 full of them. The flush must not leave it that bill inside the timed window.
    write_back_s = 15e-6
    gpu, _ = _event_timer(monkeypatch, host_s=1e-6, kernel_s=0)

    def memory_bound_kernel():
        gpu.launch(1e-6, 20e-6 + (write_back_s if gpu.dirty_l2 else 0.0))
        gpu.dirty_l2 = True  # its output

    timer = timing.CudaEventTimer(memory_bound_kernel, "cuda", torch=_fake_torch(gpu, 33e-6), clock=gpu.clock)
    assert timer.round(50) == pytest.approx([0.020] * 50, rel=1e-6)


def test_auto_finds_the_device_in_what_the_first_call_returned(monkeypatch):
    # A closure over its CUDA tensors takes no arguments: what it returns says where the data lives.
    result = object()
    monkeypatch.setattr(timing, "cuda_device_of", lambda values: "cuda:0" if result in values else None)
    monkeypatch.setattr(timing, "CudaEventTimer", lambda call, device: ("cuda_event", device))
    timer = timing.make_timer("auto", lambda: result, (), {}, interpreted=False, result=result)
    assert timer == ("cuda_event", "cuda:0")
    assert timing.make_timer("auto", lambda: None, (), {}, interpreted=False).name == "cpu"


def test_the_fixture_hands_the_first_calls_result_to_the_timer_choice(pytester):
    pytester.makepyfile(
        """
        from pytest_tesserabench.measure import timing

        RESULT = object()

        def test_closure(bench, monkeypatch):
            monkeypatch.setattr(timing, "cuda_device_of", lambda values: "cuda:0" if RESULT in values else None)

            class FakeEventTimer(timing.CpuTimer):
                def __init__(self, call, device):
                    super().__init__(call, label="cuda_event")
                    self.device = None  # (telemetry reads it; NVML is absent here)

            monkeypatch.setattr(timing, "CudaEventTimer", FakeEventTimer)
            bench(lambda: RESULT, allow=("async",))  # (the fake timer has no stream to check)
        """
    )
    result = pytester.runpytest("--bench", "--bench-max-time=0.05", "--bench-json=run.json", "-p", "no:randomly")
    result.assert_outcomes(passed=1)
    import json

    run = json.loads((pytester.path / "run.json").read_text())
    assert [record["timer"] for record in run["benchmarks"].values()] == ["cuda_event"]
