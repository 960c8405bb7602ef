"""The sampling plan, driven by a fake timer on a fake clock (no real time, no flakiness)."""

import numpy as np

from pytest_tesserabench.measure import canary, sampling
from pytest_tesserabench.measure.timing import CpuTimer

REAL_POOL_CANARY = canary.measure_pool_canary  # (conftest.steady_canary fakes it in every test)
REAL_BLAS_CANARY = canary.measure_blas_canary


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class FakeTimer:
    """Each call 'takes' per_call seconds of fake time; samples come from a seeded distribution."""

    name = "fake"

    def __init__(self, clock, per_call=1e-3, spread=0.0, seed=0):
        self.clock, self.per_call, self.spread = clock, per_call, spread
        self.rng = np.random.default_rng(seed)
        self.inner = 1
        self.warmups = 0

    def time_once(self):
        self.warmups += 1
        self.clock.now += self.per_call
        return self.per_call

    def calibrate(self, seconds_per_call):
        self.inner = 1

    def round(self, samples):
        self.clock.now += samples * self.per_call
        noise = self.rng.lognormal(0.0, self.spread, size=samples) if self.spread else np.ones(samples)
        return list(self.per_call * 1e3 * noise)


def test_warm_up_is_by_time():
    clock = FakeClock()
    timer = FakeTimer(clock, per_call=0.01)
    sampling.measure(timer, sampling.Budget(warmup=0.095, max_time=0.2, min_rounds=3), clock=clock)
    assert timer.warmups == 10


def test_a_follower_warms_up_briefly_and_takes_its_leader_s_round_size():
    # A/B: the side's first process warmed up fully and sized the rounds; the others need only
    # leave first-call costs behind (a quarter of the warm-up, three calls at least)
    clock = FakeClock()
    leader = sampling.Plan(samples_per_round=7, warmup_calls=10, inner_loops=4)
    timer = FakeTimer(clock, per_call=0.01)
    plan = sampling.warm_up_like(timer, sampling.Budget(warmup=0.1), leader, clock=clock)
    assert timer.warmups == 3 and plan == sampling.Plan(samples_per_round=7, warmup_calls=3, inner_loops=4)
    assert timer.inner == 4  # (the calls per sample of the leader, whatever its own calibration said)
    slow = FakeTimer(clock, per_call=0.2)  # longer than the warm-up: three calls all the same
    assert sampling.warm_up_like(slow, sampling.Budget(warmup=0.1), leader, clock=clock).warmup_calls == 3
    fast = FakeTimer(clock, per_call=0.001)  # a quarter of 0.1 s of 1 ms calls
    assert sampling.warm_up_like(fast, sampling.Budget(warmup=0.1), leader, clock=clock).warmup_calls == 25


def test_a_steady_workload_converges_at_min_rounds():
    clock = FakeClock()
    m = sampling.measure(FakeTimer(clock), sampling.Budget(min_rounds=5, target_ci=0.01), clock=clock)
    assert (m.stop_reason, m.noisy, len(m.rounds_ms)) == ("converged", False, 5)
    assert m.samples_per_round == 50  # a round lasts max_time / 20 = 50 ms of 1 ms calls


def test_a_noisy_workload_runs_out_of_budget_and_is_marked():
    clock = FakeClock()
    timer = FakeTimer(clock, per_call=0.01, spread=0.5)
    m = sampling.measure(timer, sampling.Budget(max_time=0.5, min_rounds=3, target_ci=0.001), clock=clock)
    assert m.stop_reason == "max_time" and m.noisy
    assert 0.5 <= m.elapsed_s < 0.6


def test_min_rounds_is_a_floor_even_past_max_time():
    clock = FakeClock()
    timer = FakeTimer(clock, per_call=1.0, spread=0.3)  # one call outlasts the whole budget
    m = sampling.measure(timer, sampling.Budget(max_time=0.1, min_rounds=4, warmup=0), clock=clock)
    assert len(m.rounds_ms) == 4 and m.samples_per_round == 1


def test_rounds_keep_their_medians_and_every_sample():
    clock = FakeClock()
    m = sampling.measure(
        FakeTimer(clock, spread=0.05, seed=3), sampling.Budget(min_rounds=6, target_ci=0.5), clock=clock
    )
    per_round = np.array(m.samples_ms).reshape(len(m.rounds_ms), m.samples_per_round)
    assert np.allclose(np.median(per_round, axis=1), m.rounds_ms)


def test_cpu_timer_calibrates_its_inner_loop():
    timer = CpuTimer(lambda: None)
    timer.calibrate(1e-7)
    assert timer.inner == 2000  # 200 us per sample at 100 ns per call
    samples = timer.round(3)
    assert len(samples) == 3 and all(s > 0 for s in samples)


def test_cpu_timer_turns_gc_off_inside_rounds_only():
    import gc

    seen = []
    timer = CpuTimer(lambda: seen.append(gc.isenabled()))
    timer.round(2)
    assert seen == [False, False] and gc.isenabled()


def test_real_cpu_measurement_of_a_fixed_workload():
    timer = CpuTimer(lambda: sum(range(2000)))
    m = sampling.measure(timer, sampling.Budget(max_time=0.2, min_rounds=5, warmup=0.02))
    s = m.summary()
    assert s["rounds"] >= 5 and 0 < s["min_ms"] <= s["median_ms"] <= s["max_ms"]


class ThreadedTimer(FakeTimer):
    """A CPU timer's counters: its rounds kept ``cpus`` CPUs busy (all the process's threads)."""

    def __init__(self, clock, cpus):
        super().__init__(clock)
        self.cpus, self.own_cpu_ns, self.others_wall_ns = cpus, 0, 0

    def round(self, samples):
        self.others_wall_ns += int(samples * self.per_call * 1e9)
        self.own_cpu_ns += int(samples * self.per_call * 1e9 * self.cpus)
        return super().round(samples)


def test_the_pool_canary_is_timed_after_a_multi_threaded_benchmark_only(monkeypatch):
    # measure/canary.py: the gate reads torch's thread pool beside a benchmark that keeps two CPUs
    # busy, and never spends the time on a single-threaded one.
    calls = []
    monkeypatch.setattr(canary, "measure_pool_canary", lambda threads: calls.append(threads) or 0.007)
    budget = sampling.Budget(min_rounds=3, target_ci=0.5, warmup=0)
    clock = FakeClock()
    threaded = sampling.measure(ThreadedTimer(clock, cpus=2.0), budget, clock=clock)
    single = sampling.measure(ThreadedTimer(clock, cpus=1.0), budget, clock=clock)
    assert threaded.pool_canary_ms == [0.007] and single.pool_canary_ms == [] and calls == [2]  # (on its 2 CPUs)


def test_the_pool_canary_times_torch_s_pool_on_the_cpus_the_benchmark_kept_busy():
    # A test may size torch's pool inside its call and put it back after (a conv2d on two
    # threads in a suite pinned to one): the canary runs on as many threads as the benchmark
    # kept CPUs busy, and leaves the pool as it found it.
    import torch

    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        pool = REAL_POOL_CANARY(2)
        assert pool is not None and 0 < pool < 100
        assert torch.get_num_threads() == 1
        assert REAL_POOL_CANARY(1) is None  # (one thread: no pool to wait on)
    finally:
        torch.set_num_threads(before)


def test_without_torch_the_pool_canary_is_timed_on_numpy_s_blas_threads(monkeypatch):
    # No torch in the process: a multi-threaded benchmark (on BLAS's threads, or its own) gets the
    # BLAS canary instead, kept apart from torch's (their calls differ 8x in time).
    monkeypatch.setattr(canary, "measure_pool_canary", lambda threads: None)
    monkeypatch.setattr(canary, "measure_blas_canary", lambda: 0.06)
    budget = sampling.Budget(min_rounds=3, target_ci=0.5, warmup=0)
    clock = FakeClock()
    threaded = sampling.measure(ThreadedTimer(clock, cpus=2.0), budget, clock=clock)
    single = sampling.measure(ThreadedTimer(clock, cpus=1.0), budget, clock=clock)
    assert threaded.blas_canary_ms == [0.06] and threaded.pool_canary_ms == []
    assert single.blas_canary_ms == []


def test_the_blas_canary_times_a_matmul():
    pool = REAL_BLAS_CANARY()
    assert pool is not None and 0 < pool < 100
