"""The typed A/B part of a record (record/results.py: ABResult, ABDecision) and its JSON."""

import pytest

from pytest_tesserabench.ab.verdicts import ab_verdicts
from pytest_tesserabench.record.results import ABDecision, ABResult, BenchRecord, DocumentError

DECIDED = {
    "ref": "main",
    "sha": "a" * 40,
    "decision": {
        "status": "UNCHANGED", "decided": True, "ratio": 1.01, "ci": [0.99, 1.03], "p_value": 0.4,
        "threshold": 0.05, "pairs": 24, "processes": 8,
    },
    "log_ratios": [0.01, -0.02],
    "processes": [0, 1],
    "reference_rounds_ms": [1.0, 1.1],
    "reference_run_queue_wait_s": 0.0,
    "settle_s": 2.0,
    "alpha_per_test": 0.005,
    "reference": {"timer": "cpu", "rounds_ms": [1.0]},
    "reference_outcome": "passed",
    "a_newer_key": {"kept": True},
}  # fmt: skip


def test_a_decided_comparison_reads_typed_and_writes_back_what_it_read():
    ab = ABResult.from_json(DECIDED, "ab")
    assert ab.decision == ABDecision("UNCHANGED", True, 1.01, (0.99, 1.03), 0.4, 0.05, pairs=24, processes=8)
    assert ab.processes == (0, 1) and ab.settle_s == 2.0 and ab.reference["timer"] == "cpu"
    assert ab.to_json() == DECIDED  # the unknown key too: a baseline rewritten keeps it


def test_an_unpaired_call_has_no_decision():
    ab = ABResult.from_json({"ref": "main", "sha": None, "unpaired": "not measured there"}, "ab")
    assert ab.decision is None and ab.unpaired == "not measured there"
    assert ABResult.from_json(ab.to_json(), "ab") == ab


def test_a_record_carries_it_through_its_json():
    record = BenchRecord(
        nodeid="t.py::test", name=None, group="t.py", timer="cpu", rounds_ms=[1.0], stats=None,
        ab=ABResult.from_json(DECIDED, "ab"),
    )  # fmt: skip
    again = BenchRecord.from_json(record.id, record.to_json())
    assert again.ab == record.ab


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"ref": 3}, "ab.ref: is int 3; expected a string"),
        ({"decision": {**DECIDED["decision"], "ci": [1.0]}}, "ab.decision.ci: has 1 values; expected [low, high]"),
        (
            {"decision": {**DECIDED["decision"], "p_value": 2}},
            "ab.decision.p_value: is 2; expected a number >= 0 and <= 1",
        ),
        ({"processes": [0, -1]}, "ab.processes[1]: is -1; expected a whole number >= 0"),
    ],
)
def test_bad_values_are_named(change, message):
    with pytest.raises(DocumentError, match=message.replace("[", r"\[").replace("]", r"\]")):
        ABResult.from_json({**DECIDED, **change}, "ab")


@pytest.mark.parametrize(
    ("status", "said"),
    [
        ("UNCHANGED", "measured 2.0 s of extra A/B pairs"),
        ("INCONCLUSIVE", "measured 2.0 s of extra A/B pairs, and still undecided"),
    ],
)
def test_a_verdict_says_the_extra_pairs_it_measured_and_whether_they_settled_it(status, said):
    data = {**DECIDED, "decision": {**DECIDED["decision"], "status": status, "decided": False}}
    record = BenchRecord(
        nodeid="t.py::test", name=None, group="t.py", timer="cpu", rounds_ms=[1.0, 1.1], stats=None,
        ab=ABResult.from_json(data, "ab"),
    )  # fmt: skip
    verdict = ab_verdicts([record], 0.05, machine={})[record.id]
    assert verdict.status == status and said in verdict.notes


def test_ref_and_now_are_each_sides_processes_as_the_change_is_and_not_their_rounds_pooled():
    # Three process pairs, a steady bias per process: A's read 1.0, 1.3, 1.3 ms, B's 1.3, 1.0, 1.0.
    # The pairs say +9.1% (the mean of their log ratios); the rounds pooled would say 1.0 -> 1.3 ms.
    processes = [0, 1, 2] * 3
    candidate = [{0: 1.0, 1: 1.3, 2: 1.3}[k] for k in processes]
    reference = [{0: 1.3, 1: 1.0, 2: 1.0}[k] for k in processes]
    data = {**DECIDED, "processes": processes, "reference_rounds_ms": reference}
    record = BenchRecord(
        nodeid="t.py::test", name=None, group="t.py", timer="cpu", rounds_ms=candidate, stats=None,
        ab=ABResult.from_json(data, "ab"),
    )  # fmt: skip
    verdict = ab_verdicts([record], 0.05, machine={})[record.id]
    assert verdict.candidate_ms / verdict.baseline_ms == pytest.approx((1.3 / 1.0) ** (1 / 3))  # +9.1%
    assert verdict.baseline_ms == pytest.approx((1.3 * 1.0 * 1.0) ** (1 / 3))
    # rounds that do not line up with the pairs: the pooled medians, as before
    unaligned = BenchRecord(
        nodeid="t.py::test", name=None, group="t.py", timer="cpu", rounds_ms=candidate[:-1], stats=None,
        ab=ABResult.from_json(data, "ab"),
    )  # fmt: skip
    assert ab_verdicts([unaligned], 0.05, machine={})[unaligned.id].baseline_ms == pytest.approx(1.0)


def _interpreted(reference_timer="interpreter", outcome="passed", spills=64):
    kernel = {"name": "k", "arch": "sm_90", "num_warps": 4, "num_stages": 3, "occupancy": 0.5}
    data = {
        "ref": "main",
        "sha": "a" * 40,
        "unpaired": (
            "timed by the interpreter timer, whose timings are never judged"
            if reference_timer == "interpreter"
            else f"timers differ ({reference_timer} at the reference, interpreter here)"
        ),
        "reference": {"timer": reference_timer, "rounds_ms": [], "kernels": [{**kernel, "spill_bytes": 0}]},
        "reference_outcome": outcome,
        "reference_error": "AssertionError: boom" if outcome == "failed" else None,
    }
    return BenchRecord(
        nodeid="t.py::test", name=None, group="t.py", timer="interpreter", rounds_ms=[80.0], stats=None,
        kernels=[{**kernel, "spill_bytes": spills}], ab=ABResult.from_json(data, "ab"),
    )  # fmt: skip


def test_an_interpreted_call_timed_here_alone_is_judged_by_both_sides_kernel_figures():
    verdict = ab_verdicts([_interpreted()], 0.05, machine={})["t.py::test"]
    assert verdict.status == "REGRESSED" and "kernel k (sm_90): spills 0 B -> 64 B" in verdict.reasons
    # a reference test that failed after its call still has its figures: gated, and the failure said
    failed = ab_verdicts([_interpreted(outcome="failed")], 0.05, machine={})["t.py::test"]
    assert failed.status == "REGRESSED" and "the test failed at main (aaaaaaaaaa): AssertionError: boom" in failed.notes
    # timers that differ (a Triton kernel replaced by torch): not compared, and why
    other = ab_verdicts([_interpreted(reference_timer="cpu")], 0.05, machine={})["t.py::test"]
    assert other.status == "NEW" and "not compared with main (aaaaaaaaaa): timers differ" in other.notes[0]


def _more_work(reference_sass: int, sass: int) -> BenchRecord:
    """An UNCHANGED A/B record whose kernel holds ``sass`` SASS instructions, the reference's
    ``reference_sass`` (the same config)."""

    def kernel(count):
        return {"name": "k", "arch": "sm_90", "num_warps": 4, "sass_instructions": count, "occupancy": 0.5}

    data = {**DECIDED, "reference": {**DECIDED["reference"], "kernels": [kernel(reference_sass)]}}
    return BenchRecord(
        nodeid="t.py::test", name=None, group="t.py", timer="cpu", rounds_ms=[1.0, 1.1], stats=None,
        ab=ABResult.from_json(data, "ab"), kernels=[kernel(sass)],
    )  # fmt: skip


def test_a_kernel_that_holds_more_work_than_the_reference_fails_past_the_work_threshold():
    record = _more_work(200, 300)
    assert ab_verdicts([record], 0.05, machine={})[record.id].status == "UNCHANGED"  # off: a note
    verdict = ab_verdicts([record], 0.05, machine={}, work_threshold=0.2)[record.id]
    assert verdict.status == "REGRESSED" and verdict.severity == "severe"
    assert verdict.reasons == ("kernel k (sm_90): SASS instructions 200 -> 300 (+50.0%), past --bench-work-threshold",)


def test_the_session_judges_a_b_records_with_its_work_threshold(tmp_path):
    # --bench-work-threshold reaches A/B's verdicts as it reaches history mode's
    from pytest_tesserabench.options import Settings
    from pytest_tesserabench.session import BenchSession

    record = _more_work(200, 300)
    settings = Settings(enabled=True, ab="main", work_threshold=0.2)
    session = BenchSession(settings, rootdir=tmp_path, cache_dir=None, is_worker=False)
    assert session.judge([record], 0.05)[record.id].status == "REGRESSED"
