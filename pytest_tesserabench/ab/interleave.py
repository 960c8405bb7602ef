"""The ABBA schedule: candidate (A, this process) and reference (B, the worktree's process) take
turns in short blocks of rounds; each neighbouring A and B block make a pair, and the paired rule
(gate.paired_decision) decides when to stop.

ABBA (A B, B A, A B, ...): within two pairs each side goes first once, so a linear trend in the
machine's speed cancels in the mean of the pairs instead of favouring the side that always goes
second.
"""

from __future__ import annotations

import contextlib
import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pytest_tesserabench import sampling

ROUNDS_PER_BLOCK = 1
MAX_PAIRS = 512


class RemoteSide(Protocol):
    def block(self, rounds: int, cpu: int | None = None) -> list[float]:
        """That many rounds measured on the reference (on ``cpu`` when given); their medians (ms)."""


@contextlib.contextmanager
def one_cpu():
    """Both sides measure on the same CPU, this process pinned to it while interleaving. On a
    virtual machine the vCPUs run at different speeds, which change over seconds (a busy sibling
    hyperthread on the host): two processes each left on "its" vCPU by the scheduler differ by tens
    of percent for a reason that has nothing to do with their code. Yields the CPU (None where
    affinity cannot be set)."""
    if not hasattr(os, "sched_setaffinity"):
        yield None
        return
    previous = os.sched_getaffinity(0)
    cpu = min(previous)
    try:
        os.sched_setaffinity(0, {cpu})
    except OSError:
        yield None
        return
    try:
        yield cpu
    finally:
        os.sched_setaffinity(0, previous)


@dataclass
class Interleaved:
    candidate: sampling.Measurement
    reference_rounds_ms: list[float] = field(default_factory=list)
    log_ratios: list[float] = field(default_factory=list)  # log(A block / B block), one per pair
    decision: object = None  # gate.PairedDecision of the last look
    settle_s: float = 0.0  # time spent past the base budget, settling an undecided benchmark


def _block_median(rounds: list[float]) -> float:
    return statistics.median(rounds)


def interleave(
    timer: sampling.Timer,
    plan: sampling.Plan,
    remote: RemoteSide,
    decide: Callable[[list[float], bool], object],
    *,
    max_time: float,
    settle_time: float,
    min_pairs: int = 6,
    clock: Callable[[], float] = time.perf_counter,
) -> Interleaved:
    """Pairs of blocks until ``decide`` says decided, or the budget is spent: ``2 * max_time``
    (each side's usual budget), then up to ``settle_time`` more while undecided."""
    with one_cpu() as cpu:
        return _interleave(timer, plan, remote, decide, max_time, settle_time, min_pairs, clock, cpu)


def _interleave(timer, plan, remote, decide, max_time, settle_time, min_pairs, clock, cpu) -> Interleaved:
    result = Interleaved(candidate=sampling.start_measurement(timer, plan))
    start = clock()
    base = 2 * max_time
    while True:
        pair = len(result.log_ratios)
        blocks = {}
        for side in ("A", "B") if pair % 2 == 0 else ("B", "A"):
            if side == "A":
                rounds = [sampling.take_round(timer, plan, result.candidate) for _ in range(ROUNDS_PER_BLOCK)]
            else:
                rounds = remote.block(ROUNDS_PER_BLOCK, cpu)
                result.reference_rounds_ms.extend(rounds)
            blocks[side] = _block_median(rounds)
        if blocks["A"] > 0 and blocks["B"] > 0:
            result.log_ratios.append(math.log(blocks["A"] / blocks["B"]))
        elapsed = clock() - start
        # The budget is a floor-respecting limit: at least the first look's pairs are taken.
        out_of_time = len(result.log_ratios) >= min_pairs and (
            elapsed >= base + settle_time or len(result.log_ratios) >= MAX_PAIRS
        )
        decision = decide(result.log_ratios, out_of_time)
        if decision is not None:
            result.decision = decision
        if out_of_time or (decision is not None and decision.decided):
            break
    result.settle_s = max(0.0, clock() - start - base)
    result.candidate.elapsed_s = clock() - start
    result.candidate.stop_reason = "decided" if result.decision.decided else "ab_budget"
    return result
