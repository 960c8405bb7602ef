"""The sampling loop on several ranks takes the same decisions everywhere.

Ranks here are threads with their own clocks (running at different rates), their own speeds and
their own noise; ``ThreadRanks`` all-reduces and broadcasts between them as torch.distributed
would. Every call of the measured function must be matched on every rank (a collective waits for
its peers), so every rank must warm up, calibrate and stop identically.
"""

import math
import random
import threading

from pytest_tesserabench.measure import sampling


class Exchange:
    def __init__(self, n: int):
        self.n = n
        self.barrier = threading.Barrier(n, timeout=20)  # a divergence breaks the barrier, never hangs
        self.slots: list = [None] * n

    def all(self, rank: int, values: list[float]) -> list[list[float]]:
        self.slots[rank] = list(values)
        self.barrier.wait()
        everyone = list(self.slots)
        self.barrier.wait()
        lengths = {len(v) for v in everyone}
        assert len(lengths) == 1, f"ranks exchanged vectors of different lengths {lengths}: they diverged"
        return everyone


class ThreadRanks:
    def __init__(self, exchange: Exchange, rank: int):
        self.exchange, self.rank, self.size, self.local_rank, self.backend = exchange, rank, exchange.n, rank, "fake"
        self.barriers = 0

    def barrier(self):
        self.barriers += 1
        self.exchange.barrier.wait()

    def max(self, values):
        return [max(column) for column in zip(*self.exchange.all(self.rank, values))]

    def agree(self, values):
        return self.exchange.all(self.rank, values)[0]


class RankClock:
    """A rank's perf_counter: advanced by the work it simulates, at its own rate."""

    def __init__(self, rate: float):
        self.rate, self.now = rate, 0.0

    def __call__(self) -> float:
        return self.now


class FakeTimer:
    name = "cpu"

    def __init__(self, clock: RankClock, per_call_s: float, seed: int):
        self.clock, self.per_call_s, self.random = clock, per_call_s, random.Random(seed)
        self.inner, self.calls = 1, 0
        self.own_samples: list[float] = []  # what this rank alone measured, before the MAX

    def time_once(self) -> float:
        self.calls += 1
        self.clock.now += self.per_call_s * self.clock.rate
        return self.per_call_s

    def calibrate(self, seconds_per_call: float) -> None:
        self.inner = max(1, math.ceil(2e-3 / seconds_per_call))

    def round(self, samples: int) -> list[float]:
        out = [self.per_call_s * 1e3 * (1 + 0.1 * self.random.random()) for _ in range(samples)]
        self.calls += samples * self.inner
        self.clock.now += sum(out) / 1e3 * self.inner * self.clock.rate
        self.own_samples.extend(out)
        return out


BUDGET = sampling.Budget(max_time=0.05, min_rounds=3, warmup=0.01, target_ci=0.001)


def _run(n: int, *, together: bool):
    exchange = Exchange(n)
    timers = [FakeTimer(RankClock(rate=1 + 0.7 * r), per_call_s=1e-4 * (1 + r), seed=r) for r in range(n)]
    ranks = [ThreadRanks(exchange, r) for r in range(n)]
    results: list = [None] * n
    errors: list = []

    def work(r: int):
        try:
            results[r] = sampling.measure(
                timers[r], BUDGET, clock=timers[r].clock, ranks=ranks[r] if together else sampling.SOLO
            )
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
            exchange.barrier.abort()

    threads = [threading.Thread(target=work, args=(r,)) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not errors, errors
    return results, timers, ranks


def test_every_rank_takes_the_same_decisions_and_makes_the_same_calls():
    results, timers, ranks = _run(3, together=True)
    first = results[0]
    for m in results[1:]:
        assert (m.warmup_calls, m.inner_loops, m.samples_per_round, m.stop_reason) == (
            first.warmup_calls,
            first.inner_loops,
            first.samples_per_round,
            first.stop_reason,
        )
        assert m.rounds_ms == first.rounds_ms and m.samples_ms == first.samples_ms
    assert len({t.calls for t in timers}) == 1, [t.calls for t in timers]
    # Each round started on a barrier.
    assert all(r.barriers == len(first.rounds_ms) for r in ranks)


def test_a_sample_is_the_slowest_ranks():
    results, timers, _ = _run(3, together=True)
    slowest = [max(column) for column in zip(*(t.own_samples for t in timers))]
    assert results[0].samples_ms == slowest
    assert slowest != timers[0].own_samples  # rank 0 was not the slowest: the MAX mattered


def test_without_agreement_the_same_ranks_diverge():
    """The setup above has teeth: measured alone, these ranks decide differently (and, were the
    calls collectives, would hang each other)."""
    results, timers, _ = _run(3, together=False)
    decisions = {(m.warmup_calls, m.inner_loops, len(m.rounds_ms)) for m in results}
    assert len(decisions) > 1
    assert len({t.calls for t in timers}) > 1


def test_one_rank_costs_nothing_extra():
    timer = FakeTimer(RankClock(1.0), 1e-4, 0)
    m = sampling.measure(timer, BUDGET, clock=timer.clock)
    assert m.rounds_ms and m.stop_reason in ("converged", "max_time")
