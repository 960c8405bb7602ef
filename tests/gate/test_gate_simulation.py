"""The gate's promise on simulated machines, judged by the shipped pipeline end to end
(tests/gate/pipeline_simulation.py says what the machines do; benchmarks/gate_power.py prints the
same figures for more projects, beside pytest-benchmark's rule)."""

import math

import numpy as np
import pytest
from pipeline_simulation import Machine, make_run, make_suite, simulate, suite_rule

from pytest_tesserabench.gate import GateConfig
from pytest_tesserabench.gate.centres import pass_centres
from pytest_tesserabench.gate.pipeline import History, judge_run
from pytest_tesserabench.record.results import Verdict, fresh_records

CONFIG = GateConfig()
SUITES = 25  # projects of 8 benchmarks: 4 candidate runs each, 650 unchanged benchmark-runs
MACHINES = {
    "quiet": Machine(),
    "loaded": Machine(loaded=(0.26, 0.47)),
    # the same load, taken from 0.4 to 1.6 times by different benchmarks
    "loaded unalike": Machine(loaded=(0.26, 0.47), response=(0.4, 1.6)),
    # a quiet machine whose slow stretches also catch the fresh processes that measure a
    # benchmark again, all of them at once (they run one after the other), that benchmark only
    "quiet, busy moments": Machine(fresh_stretch_rate=0.1),
    # one benchmark of two threads, which reads the machine's slow moments for parallel work (in
    # saves and candidates alike, for a whole process), and the pool canary beside it
    "quiet, two-thread slow phases": Machine(slow_phase_rate=0.2),
    # one benchmark that streams memory, whose passes meet the machine's memory at its speed of
    # the moment, a whole run in a slow stretch now and then; the memory canary beside each pass
    "quiet, memory stretches": Machine(memory_rate=0.25),
}


TALLIES = {}


def tally(machine: str):
    """The simulation of one machine, run once per session."""
    if machine not in TALLIES:
        TALLIES[machine] = simulate(
            lambda candidate, baseline: judge_run(candidate, baseline, CONFIG),
            MACHINES[machine],
            suites=SUITES,
            seed=7,
            detectable=lambda runs: History.of(runs, CONFIG).detectable(),
        )
        print(f"\n{machine}: {TALLIES[machine].counts}")
    return TALLIES[machine]


@pytest.mark.parametrize("machine", list(MACHINES))
def test_false_alarms_are_at_most_one_percent_per_benchmark(machine):
    assert tally(machine).rate("unchanged") <= 0.01, f"{machine}: {tally(machine).counts['unchanged']}"


def test_a_slowdown_the_baseline_says_is_detectable_is_caught_nine_times_in_ten_on_a_quiet_machine():
    # (the baseline speaks for a run as quiet as its own)
    result = tally("quiet")
    assert result.counts["+20%"]["n detectable"] >= 40
    assert result.rate("+20%", where="detectable") >= 0.9, result.counts["+20%"]


def test_under_a_shared_slowdown_taken_unalike_nothing_is_decided_wrongly():
    # A loaded run: the shift is a correction benchmarks took unalike, so slowdowns of 20% are
    # left undecided rather than judged through it; never failed as slower when unchanged (above),
    # nor called faster or unchanged when they are not.
    slowed = tally("loaded").counts["+20%"]
    assert slowed.get("IMPROVED", 0) == 0
    assert slowed.get("UNCHANGED", 0) <= 0.05 * slowed["n"]


@pytest.mark.parametrize("machine", ["quiet", "loaded unalike", "quiet, busy moments"])
def test_false_alarms_are_at_most_one_percent_per_benchmark_in_runs_that_slow_nothing(machine):
    # The common case of a pull request. Above, each slowed benchmark also pulls the others'
    # median (this run's shift) its way, which reads the unchanged ones a little faster. Loaded
    # unalike: each benchmark's share of the shift is uncertain by how unalike all the others took it.
    runs = simulate(
        lambda candidate, baseline: judge_run(candidate, baseline, CONFIG),
        MACHINES[machine],
        suites=4 * SUITES,
        seed=99,
        slowdowns=(0.0,),
    )
    print(f"\n{machine}, nothing slower: {runs.counts['nothing slower']}")
    assert runs.rate("nothing slower") <= 0.01, runs.counts["nothing slower"]


def _unjudged(candidate, baseline):  # (the suite-wide rule alone: each benchmark's verdict is not asked)
    return {i: Verdict(id=i, status="UNCHANGED") for i in candidate.benchmarks}


def test_the_suite_wide_rule_fails_at_most_one_run_in_a_hundred_that_slow_nothing():
    # The hardest machine: a loaded run whose shift the benchmarks and the canary took 0.4-1.6 times.
    unalike = simulate(
        _unjudged, MACHINES["loaded unalike"], suites=100, seed=11, slowdowns=(0.0,), suite_fails=suite_rule(CONFIG)
    )
    print(f"\nloaded unalike, suite-wide rule: {unalike.counts['suite, nothing slower']}")
    assert unalike.rate("suite, nothing slower", "FAILED") <= 0.01, unalike.counts["suite, nothing slower"]


def test_the_suite_wide_rule_catches_a_slower_code_on_a_quiet_machine_more_often_than_not():
    quiet = simulate(_unjudged, MACHINES["quiet"], suites=50, seed=12, slowdowns=(0.0,), suite_fails=suite_rule(CONFIG))
    print(f"\nquiet, every benchmark +20%: {quiet.counts['suite, all +20%']}")
    assert quiet.rate("suite, all +20%", "FAILED") >= 0.5, quiet.counts["suite, all +20%"]


def test_an_unsteady_machine_scatters_a_candidate_s_passes_and_blocks_and_no_save_s():
    # (benchmarks/gate_power.py's "quiet, unsteady" machine rests on this)
    def spread(machine, loaded):
        rng = np.random.default_rng(3)
        run = make_run(rng, make_suite(rng, machine), machine, fresh=2, loaded=loaded)
        records = [r for record in run.benchmarks.values() for r in (record, *fresh_records(record))]
        return float(np.median([max(c) - min(c) for c in map(pass_centres, records)]))

    steady, unsteady = (
        Machine(stretch_rate=0.0, spike_rate=0.0),
        Machine(stretch_rate=0.0, spike_rate=0.0, unsteady_rate=1.0),
    )
    assert spread(unsteady, loaded=True) > spread(steady, loaded=True) + math.log1p(0.1)
    assert spread(unsteady, loaded=False) == spread(steady, loaded=False)  # the saves: as quiet as ever
