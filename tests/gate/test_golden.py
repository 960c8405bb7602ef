"""Behaviour pinned on real runs: the kept runs and baseline in tests/gate/golden/ (benchmarks/
gate_real.py's tuning workloads on the CI VM) judged by the shipped pipeline give the verdicts
recorded in golden/expected.json. A refactor must keep them; a change of a rule that is meant to
change them regenerates the file (golden/update.py), and its diff shows what it changed."""

import json
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden"
sys.path.insert(0, str(GOLDEN))
from update import judged  # noqa: E402


def test_the_kept_runs_are_judged_as_recorded():
    expected = json.loads((GOLDEN / "expected.json").read_text())
    assert judged() == expected


def test_the_golden_runs_hold_every_outcome_the_rules_give():
    # what the pin guards: false alarms none, slowdowns caught, verdicts undecided by the rule
    outcomes = json.loads((GOLDEN / "expected.json").read_text())
    statuses = {status for run in outcomes.values() for status, *_ in run.values()}
    assert {"REGRESSED", "UNCHANGED", "INCONCLUSIVE"} <= statuses
    assert not any(
        verdict[0] == "REGRESSED" for name, run in outcomes.items() if "v0" in name for verdict in run.values()
    )
    assert any(verdict[2] == 3 for run in outcomes.values() for verdict in run.values())  # measured again
