"""The ABBA schedule over process pairs: the candidate (A: a served process of the working tree)
and the reference (B: a served process of REF's worktree) take turns in short blocks of rounds;
each neighbouring A and B block make a pair. Pairs go round the process pairs (pair k from process
pair k mod P), so every process pair gets as many pairs as the others and the per-process biases
average out; the decision rule (gate.paired.process_decision, or paired_decision with one process
per side) says when to stop.

ABBA (A B, B A, A B, ...) within each process pair: each side goes first as often as the other, so
a linear trend in the machine's speed cancels in the mean of the pairs instead of favouring the
side that always goes second.
"""

from __future__ import annotations

import math
import os
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from pytest_tesserabench.measure import sampling
from pytest_tesserabench.processes.served import Block

# A block is one round of the measurement's own length (max_time / 20), not shorter: the first call
# after the other side's block runs on caches that block evicted, and a block's median must rest on
# calls past it (a block of one call of a millisecond-scale kernel can read twice its time, and
# hide a slowdown in that noise).
ROUNDS_PER_BLOCK = 1
MAX_PAIRS = 512


class Side(Protocol):
    def block(self, rounds: int, cpu: int | None = None) -> Block:
        """That many rounds measured in this process (on ``cpu`` when given)."""


def measuring_cpu() -> int | None:
    """The one CPU every served process measures on (None where affinity cannot be set). On a
    virtual machine the vCPUs run at different speeds, which change over seconds (a busy sibling
    hyperthread on the host): two processes each left on "its" vCPU by the scheduler differ by tens
    of percent for a reason that has nothing to do with their code."""
    if not hasattr(os, "sched_getaffinity"):
        return None
    return min(os.sched_getaffinity(0))


@dataclass
class Interleaved:
    candidate: sampling.Measurement
    reference_rounds_ms: list[float] = field(default_factory=list)
    reference_run_queue_wait_s: float = 0.0  # the reference side's wait for a CPU, left out of its samples
    log_ratios: list[float] = field(default_factory=list)  # log(A block / B block), one per pair
    processes: list[int] = field(default_factory=list)  # the process pair each pair came from
    decision: object = None  # gate.paired.PairedDecision of the last look
    settle_s: float = 0.0  # time spent past the base budget, settling an undecided benchmark


def interleave(
    pairs_of_processes: list[tuple[Side, Side]],
    candidate: sampling.Measurement,
    decide: Callable[[list[float], list[int], bool], object],
    *,
    max_time: float,
    settle_time: float,
    min_pairs: int = 6,
    cpu: int | None = None,
    clock: Callable[[], float] = time.perf_counter,
) -> Interleaved:
    """Pairs of blocks until ``decide`` says decided, or the budget is spent: ``2 * max_time``
    (each side's usual budget), then up to ``settle_time`` more while undecided; at least
    ``min_pairs`` pairs (the first look) whatever the budget. The candidate's rounds and samples
    go into ``candidate``."""
    result = Interleaved(candidate=candidate)
    start = clock()
    base_end = start + 2 * max_time  # then the first look's pairs, if they take longer: not settling
    count = len(pairs_of_processes)
    while True:
        pair = len(result.log_ratios)
        process = pair % count
        candidate_side, reference_side = pairs_of_processes[process]
        blocks = {}
        for side in ("A", "B") if (pair // count) % 2 == 0 else ("B", "A"):
            block = (candidate_side if side == "A" else reference_side).block(ROUNDS_PER_BLOCK, cpu)
            if side == "A":
                candidate.rounds_ms.extend(block.rounds_ms)
                candidate.samples_ms.extend(block.samples_ms)
                candidate.run_queue_wait_s += block.run_queue_wait_s
            else:
                result.reference_rounds_ms.extend(block.rounds_ms)
                result.reference_run_queue_wait_s += block.run_queue_wait_s
            blocks[side] = statistics.median(block.rounds_ms)
        if blocks["A"] > 0 and blocks["B"] > 0:
            result.log_ratios.append(math.log(blocks["A"] / blocks["B"]))
            result.processes.append(process)
        now = clock()
        if len(result.log_ratios) == min_pairs:
            base_end = max(base_end, now)
        out_of_time = len(result.log_ratios) >= min_pairs and (
            now >= base_end + settle_time or len(result.log_ratios) >= MAX_PAIRS
        )
        decision = decide(result.log_ratios, result.processes, out_of_time)
        if decision is not None:
            result.decision = decision
        if out_of_time or (decision is not None and decision.decided):
            break
    # undecided when the budget ran out: the time past it settled the verdict (to a tenth of a
    # second: the last pair before a decisive look is not worth a note)
    result.settle_s = round(max(0.0, clock() - base_end), 1)
    candidate.elapsed_s = clock() - start
    candidate.stop_reason = "decided" if result.decision.decided else "ab_budget"
    return result
