"""Interleaved passes over the suite (``--bench-passes``): every benchmark is measured in N short
passes over all the benchmark tests instead of one long stretch each.

Why: a machine's speed changes within a run (a vCPU steps between clock levels every few seconds,
another job starts, a GPU heats up). Measured one after the other, each benchmark sees its own
stretch of those states, so the run-effect model of history mode (one shift per run, shared by
every benchmark) cannot remove them, and they read as drift between runs of each benchmark on its
own. Measured in passes, every benchmark sees the same mixture of the run's states; the shift is
then shared, and what is left is the benchmark's own. A stretch that catches some passes of a
benchmark is left out by the gate's centre of the run, the lowest of the passes' centres
(gate.centres.record_summary): on a machine whose speed steps every few seconds, the median or
mean of the passes carries the slow stretch into the centre (docs/gate-evidence.md has the
figures).

How: the earlier passes run each benchmark test through pytest's own protocol without reporting
it (``runtestprotocol(log=False)``, as pytest-rerunfailures reruns tests): set-up, the first call,
warm-up and a share of the budget, teardown. The last pass is the ordinary test run: its
measurement is pooled with the earlier ones, judged, reported and saved. Passes alternate
direction, ending forwards, so every test's passes sit as evenly in the run's time as the order
allows. Tests that do not use ``bench`` run once, in the last pass.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import replace

from pytest_tesserabench.crash import crash_line
from pytest_tesserabench.machine.cpu_turns import start_on_cpu
from pytest_tesserabench.measure import sampling

AUTO_PASSES = 4  # when the run is saved or compared: where drift between runs is what is judged
MAX_PASSES = 20
MIN_ROUNDS_PER_PASS = 3  # a pass's centre is the median of its rounds: three at least


def planned(passes: int | None, *, history: bool) -> int:
    """How many passes a run makes: as asked, or ``auto`` (None): AUTO_PASSES when the run is
    saved to or compared with a baseline, else 1 (measuring alone compares nothing across runs)."""
    if passes is not None:
        return passes
    return AUTO_PASSES if history else 1


def not_possible(*, xdist: bool, ab: bool, distributed: bool) -> str | None:
    """Why this run measures in one pass whatever was asked, or None."""
    if ab:
        return "--bench-ab interleaves the two sides itself"
    if xdist:
        return "under pytest-xdist (-n) each worker runs the tests the controller sends it, one at a time"
    if distributed:
        return "under torchrun every rank must run the same calls in the same order"
    return None


class Passes:
    """The passes of this run and what the earlier ones measured, per (test, bench() name)."""

    def __init__(self, total: int):
        self.total = total
        self.current = total - 1  # the last pass is the reported one; earlier ones are set by run_earlier
        self.nodeid: str | None = None  # the test running now
        self.earlier: dict[tuple[str | None, str | None], list[sampling.Measurement]] = {}
        self.once: set[str] = set()  # tests measured only in the reported pass (their timings are never gated)
        self.failed_earlier: dict[str, str] = {}  # node id -> how it failed in an earlier pass (the first time)

    @property
    def final(self) -> bool:
        return self.current == self.total - 1

    def budget(self, budget: sampling.Budget) -> sampling.Budget:
        """A pass's share: the time, the warm-up and the fewest rounds split over the passes (3
        rounds at least: each pass's centre is the median of its rounds; one warm-up call at
        least, sampling.warm_up). A run in passes then warms up and measures as long as a run in
        one pass; a fresh process, likewise, warms up once and measures its blocks on from there
        (processes/fresh.py)."""
        if self.total == 1 or self.nodeid in self.once:
            return budget
        return replace(
            budget,
            max_time=budget.max_time / self.total,
            warmup=budget.warmup / self.total,
            min_rounds=max(MIN_ROUNDS_PER_PASS, math.ceil(budget.min_rounds / self.total)),
        )

    def measure_once(self, nodeid: str) -> None:
        """This test takes no further earlier pass, and its reported pass measures alone (a test
        whose kernels ran in the Triton interpreter: its timings are shown, never gated, and the
        interpreter is slow). What its earlier pass measured is dropped."""
        self.once.add(nodeid)
        for key in [key for key in self.earlier if key[0] == nodeid]:
            del self.earlier[key]

    def measured(self, name: str | None, measurement: sampling.Measurement, target_ci: float) -> sampling.Measurement:
        """An earlier pass's measurement is kept; the last pass's is returned pooled with them."""
        key = (self.nodeid, name)
        if not self.final:
            self.earlier.setdefault(key, []).append(measurement)
            return measurement
        return pooled([*self.earlier.pop(key, []), measurement], target_ci)


def pooled(parts: list[sampling.Measurement], target_ci: float) -> sampling.Measurement:
    """One measurement of several passes: their rounds and samples in the order they were taken;
    the round plan is the last pass's (each pass calibrated its own; round medians are per call).
    Noisy or not is decided on all the rounds (a pass alone has a fraction of them)."""
    from pytest_tesserabench.record.stats import relative_ci_halfwidth

    last = parts[-1]
    if len(parts) == 1:
        return last
    rounds = [r for part in parts for r in part.rounds_ms]
    noisy = not relative_ci_halfwidth(rounds) <= target_ci
    return replace(
        last,
        rounds_ms=rounds,
        samples_ms=[s for part in parts for s in part.samples_ms],
        noisy=noisy,
        stop_reason="max_time" if noisy else "converged",
        warmup_calls=sum(part.warmup_calls for part in parts),
        elapsed_s=sum(part.elapsed_s for part in parts),
        run_queue_wait_s=sum(part.run_queue_wait_s for part in parts),
        others_cpu_s=sum(part.others_cpu_s for part in parts),
        others_wall_s=sum(part.others_wall_s for part in parts),
        own_cpu_s=sum(part.own_cpu_s for part in parts),
        passes=len(parts),
        pass_rounds=[len(part.rounds_ms) for part in parts],
        pool_canary_ms=[c for part in parts for c in part.pool_canary_ms],
        blas_canary_ms=[c for part in parts for c in part.blas_canary_ms],
        memory_canary=[c for part in parts for c in part.memory_canary],
    )


class PassesMeasurer:
    """``bench()``'s measurer when the run makes several passes: each call measures its pass's
    share of the budget; the last pass's call returns all passes' rounds."""

    def __init__(self, passes: Passes):
        self.passes = passes

    @property
    def keeps_record(self) -> bool:
        """Whether the record of this call is kept: only the last pass's is (an earlier pass's
        rounds are kept and pooled, not the rest of its record), so an earlier pass takes no
        canary (about 60 ms a benchmark and pass)."""
        return self.passes.final

    def measure(self, timer, budget, *, name, threshold, on_round=None, ranks=sampling.SOLO):
        __tracebackhide__ = True  # a user's error shows in their code, not in the plugin's frames
        start_on_cpu(self.passes.current, timer.name)  # each pass on the next CPU (machine/cpu_turns.py)
        measurement = sampling.measure(timer, self.passes.budget(budget), on_round=on_round, ranks=ranks)
        return self.passes.measured(name, measurement, budget.target_ci), None


def run_earlier(passes: Passes, items: list, run_item: Callable, say: Callable[[str], None]) -> None:
    """The passes before the reported one, over the benchmark ``items``: ``run_item(item,
    nextitem)`` runs one test without reporting it. Their warnings are left to the last pass,
    which shows them once."""
    for index in range(passes.total - 1):
        passes.current = index
        forwards = (passes.total - 1 - index) % 2 == 0
        order = [item for item in (items if forwards else items[::-1]) if item.nodeid not in passes.once]
        if not order:
            continue  # every test left is measured once, in the reported pass
        say(f"tesserabench: pass {index + 1} of {passes.total} over {len(order)} benchmark test(s) (--bench-passes)")
        for position, item in enumerate(order):
            nextitem = order[position + 1] if position + 1 < len(order) else None
            passes.nodeid = item.nodeid
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                reports = run_item(item, nextitem)
            failed = [report for report in reports or () if report.failed]
            if failed and item.nodeid not in passes.failed_earlier:
                why = crash_line(failed[0])
                passes.failed_earlier[item.nodeid] = f"failed in pass {index + 1} of {passes.total} ({why})"
    passes.current = passes.total - 1
    passes.nodeid = None
    say(f"tesserabench: pass {passes.total} of {passes.total}, the one pytest runs and reports")
