"""The A/B rule and schedule without processes: seeded pairs with a bias per process (what two
processes running identical code show on a real machine, docs/gate.md), and fake sides."""

import math

import numpy as np
import pytest

from pytest_tesserabench.ab.interleave import interleave
from pytest_tesserabench.gate import paired
from pytest_tesserabench.measure import sampling
from pytest_tesserabench.processes.served import Block

ALPHA = 0.01 / 6  # the suite's alpha over six benchmarks, as in gate_real.py
PROCESSES, PER_PROCESS = 8, 6


def simulated(rng, effect, *, process_sd, pair_sd=0.02, outliers=0.05, per_process=PER_PROCESS):
    """Log ratios and their process pairs (``per_process`` pairs each): each process a steady bias,
    each pair its noise, and a few pairs straddling a step of the machine's speed (+-40%)."""
    candidate_bias = rng.normal(0, process_sd, PROCESSES)
    reference_bias = rng.normal(0, process_sd, PROCESSES)
    processes = [k % PROCESSES for k in range(PROCESSES * per_process)]
    ratios = []
    for process in processes:
        d = math.log1p(effect) + candidate_bias[process] - reference_bias[process] + rng.normal(0, pair_sd)
        if rng.random() < outliers:
            d += rng.choice([-1, 1]) * math.log(1.4)
        ratios.append(d)
    return ratios, processes


def statuses(rule, effect, process_sd, trials=300, seed=1):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(trials):
        ratios, processes = simulated(rng, effect, process_sd=process_sd)
        out.append(rule(ratios, processes).status)
    return out


def by_process(ratios, processes):
    return paired.process_decision(ratios, processes, threshold=0.05, alpha=ALPHA, final=True)


def by_pair(ratios, processes):
    return paired.paired_decision(ratios, threshold=0.05, alpha=ALPHA, final=True)


def test_a_bias_per_process_raises_no_false_alarm_when_processes_are_the_unit():
    # 3% per process (matmul-like code on the CI VM): pooled pairs read a run's draw of biases as
    # a change, many times the rate alpha allows (1/600 per benchmark); the rule over process
    # pairs sees the spread and does not
    alarms_by_process = statuses(by_process, 0.0, 0.03).count("REGRESSED")
    alarms_by_pair = statuses(by_pair, 0.0, 0.03).count("REGRESSED")
    assert alarms_by_process <= 1, alarms_by_process
    assert alarms_by_pair >= 5, alarms_by_pair  # the bias the process rule exists for


@pytest.mark.parametrize(("effect", "least"), [(0.10, 0.95), (0.20, 1.0)])
def test_a_slowdown_is_caught_through_a_small_process_bias(effect, least):
    found = statuses(by_process, effect, 0.005, trials=200)
    assert found.count("REGRESSED") >= least * len(found), found.count("REGRESSED")


def test_an_unchanged_benchmark_is_decided_unchanged():
    found = statuses(by_process, 0.0, 0.005, trials=100)
    assert found.count("UNCHANGED") == len(found)


def first_stop(ratios, processes):
    """The decision at the first look that decides, going through the looks as the schedule does
    (the pairs of process pair k are those at k, k + PROCESSES, ...), or the last one."""
    for per_process in paired.PROCESS_LOOKS:
        count = per_process * PROCESSES
        decision = paired.process_decision(
            ratios[:count], processes[:count], threshold=0.05, alpha=ALPHA, final=count >= len(ratios)
        )
        if decision.decided or count >= len(ratios):
            return decision
    raise AssertionError("no look")


def test_an_unchanged_benchmark_stops_at_the_first_look_when_its_interval_there_rules_out_the_threshold():
    # 1.5% per process: at 3 pairs per process pair the 99% interval is about +-3%, inside 5%.
    # (Held to the false-alarm level, +-5.2 standard errors, it never stopped early: every
    # unchanged benchmark spent its whole budget.)
    rng = np.random.default_rng(5)
    first = []
    for _ in range(100):
        ratios, processes = simulated(rng, 0.0, process_sd=0.015)
        look = paired.process_decision(
            ratios[: 3 * PROCESSES], processes[: 3 * PROCESSES], threshold=0.05, alpha=ALPHA, final=False
        )
        first.append(look.status if look.decided else "undecided")
    assert first.count("UNCHANGED") >= 75, first.count("UNCHANGED")


def test_a_slowdown_of_the_threshold_stops_as_unchanged_at_most_one_time_in_twenty():
    # the early looks' promise: each at 2.5% / looks, the last at 2.5%
    rng, last = np.random.default_rng(8), paired.PROCESS_LOOKS[-1]
    found = [
        first_stop(*simulated(rng, 0.05, process_sd=0.015, outliers=0.0, per_process=last)).status for _ in range(400)
    ]
    assert found.count("UNCHANGED") <= 0.05 * len(found), found.count("UNCHANGED")
    assert found.count("REGRESSED") >= 0.3 * len(found)  # (the slowdown is there to be caught)


def test_the_rule_looks_only_when_every_process_pair_has_as_many_pairs_at_a_look():
    rng = np.random.default_rng(3)
    ratios, processes = simulated(rng, 0.0, process_sd=0.0)  # 6 pairs per process pair: a look
    assert paired.process_decision(ratios, processes, threshold=0.05, alpha=ALPHA, final=False) is not None
    # one pair more: the process pairs are uneven, not a look (unless the budget is spent)
    more_ratios, more_processes = [*ratios, 0.0], [*processes, 0]
    assert paired.process_decision(more_ratios, more_processes, threshold=0.05, alpha=ALPHA, final=False) is None
    final = paired.process_decision(more_ratios, more_processes, threshold=0.05, alpha=ALPHA, final=True)
    assert final is not None and final.processes == PROCESSES and final.pairs == len(more_ratios)
    # 5 per process pair is not a look; 2 per process pair is too few even at the end
    five = [(d, p) for d, p in zip(ratios, processes, strict=True)][: 5 * PROCESSES]
    assert paired.process_decision(*zip(*five, strict=True), threshold=0.05, alpha=ALPHA, final=False) is None
    two = five[: 2 * PROCESSES]
    assert paired.process_decision(*zip(*two, strict=True), threshold=0.05, alpha=ALPHA, final=True) is None


class FakeSide:
    """A served process: each block one round of ``ms`` (times its bias); logs who measured when."""

    def __init__(self, label, ms, log):
        self.label, self.ms, self.log = label, ms, log

    def block(self, rounds, cpu=None):
        self.log.append((self.label, cpu))
        waited = 0.001 if self.label.startswith("B") else 0.002  # each side's wait for a CPU, per block
        return Block([self.ms] * rounds, [self.ms] * (3 * rounds), waited)


def test_the_schedule_goes_round_the_process_pairs_abba_within_each():
    log = []
    pairs = [(FakeSide(f"A{i}", 1.1, log), FakeSide(f"B{i}", 1.0, log)) for i in range(4)]
    candidate = sampling.Measurement(timer="cpu")
    looks = []

    def decide(ratios, processes, final):
        looks.append(len(ratios))
        return paired.process_decision(ratios, processes, threshold=0.05, alpha=ALPHA, final=final)

    result = interleave(pairs, candidate, decide, max_time=10.0, settle_time=0.0, min_pairs=12, cpu=3)
    order = [label for label, _ in log]
    first_sweep, second_sweep = ["A0", "B0", "A1", "B1", "A2", "B2", "A3", "B3"], ["B0", "A0", "B1", "A1", "B2", "A2"]
    assert order[:14] == first_sweep + second_sweep
    assert {cpu for _, cpu in log} == {3}
    assert result.processes[:8] == [0, 1, 2, 3, 0, 1, 2, 3]
    assert candidate.rounds_ms == [1.1] * len(result.log_ratios)
    assert len(candidate.samples_ms) == 3 * len(candidate.rounds_ms)
    assert result.reference_rounds_ms == [1.0] * len(result.log_ratios)
    # each side's wait for a CPU kept apart: the candidate's in its measurement, the reference's beside
    assert candidate.run_queue_wait_s == pytest.approx(0.002 * len(result.log_ratios))
    assert result.reference_run_queue_wait_s == pytest.approx(0.001 * len(result.log_ratios))
    # identical pairs, +10%: decided REGRESSED at the first look (3 pairs per process pair)
    assert result.decision.status == "REGRESSED" and len(result.log_ratios) == 12 and candidate.stop_reason == "decided"


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


class TimedSide(FakeSide):
    """A block takes 0.1 s of the fake clock; the times scatter (seeded, ``sd`` in log) around ``ms``."""

    def __init__(self, label, ms, log, clock, rng, sd):
        super().__init__(label, ms, log)
        self.clock, self.rng, self.sd = clock, rng, sd

    def block(self, rounds, cpu=None):
        self.clock.now += 0.1
        ms = self.ms * math.exp(self.rng.normal(0, self.sd))
        return Block([ms] * rounds, [ms] * rounds)


def timed_pairs(effect, clock, sd):
    rng, log = np.random.default_rng(0), []
    return [
        (TimedSide(f"A{i}", 1.0 + effect, log, clock, rng, sd), TimedSide(f"B{i}", 1.0, log, clock, rng, sd))
        for i in range(4)
    ]


def rule(ratios, processes, final):
    return paired.process_decision(ratios, processes, threshold=0.05, alpha=ALPHA, final=final)


def test_settling_is_the_time_an_undecided_benchmark_gets_past_its_budget():
    # +20% through 1% noise: decided at the first look; the look's pairs (2.4 s of fake time) take
    # longer than the 1 s budget, but that is the budget's floor, not settling
    clock = Clock()
    decided = interleave(timed_pairs(0.20, clock, 0.01), sampling.Measurement(timer="cpu"), rule,
                         max_time=0.5, settle_time=3.0, min_pairs=12, clock=clock)  # fmt: skip
    assert decided.decision.status == "REGRESSED" and decided.settle_s == 0.0 and len(decided.log_ratios) == 12
    # exactly the threshold: undecided at the first look, so it settles: more pairs, up to 3 s more
    clock = Clock()
    settled = interleave(timed_pairs(0.05, clock, 0.05), sampling.Measurement(timer="cpu"), rule,
                         max_time=0.5, settle_time=3.0, min_pairs=12, clock=clock)  # fmt: skip
    assert len(settled.log_ratios) > 12 and 0 < settled.settle_s <= 3.0 + 0.2


def test_at_the_end_of_the_budget_unchanged_needs_an_interval_that_rules_out_a_slowdown():
    processes = [k % PROCESSES for k in range(3 * PROCESSES)]
    spread = [-0.25, 0.25, -0.2, 0.2, -0.15, 0.15, -0.1, 0.12]  # process pairs far apart, mean ~0
    wide = [spread[p] for p in processes]  # estimate below +5%, interval far past it
    narrow = [spread[p] / 50 for p in processes]
    undecided = paired.process_decision(wide, processes, threshold=0.05, alpha=ALPHA, final=True)
    assert undecided.status == "INCONCLUSIVE" and not undecided.decided and undecided.ci[1] > 1.05
    assert paired.process_decision(narrow, processes, threshold=0.05, alpha=ALPHA, final=True).status == "UNCHANGED"
