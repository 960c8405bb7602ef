"""The rules that keep ranks in step: one outcome per test phase, the same selection everywhere."""

import pytest

from pytest_tesserabench.distributed.agreement import decide, is_distributed_error, selection_problem, summarize

GLOO_TIMEOUT = RuntimeError(
    "[../third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:78] Timed out waiting 3000ms for recv operation"
)


def passed(when="call"):
    return summarize("passed", when, None, None)


def test_all_passed_changes_nothing():
    everyone = [passed(), passed()]
    assert decide(everyone, 0, "t").outcome == "passed"
    assert decide(everyone, 1, "t").stop is None


def test_a_failure_on_one_rank_fails_every_rank_and_names_it():
    everyone = [passed(), summarize("failed", "call", AssertionError("rank 1 disagrees"), None)]
    for rank in (0, 1):
        decision = decide(everyone, rank, "t")
        assert decision.outcome == "failed"
        assert decision.text == "tesserabench: rank 1 failed in call: AssertionError: rank 1 disagrees"
        assert decision.stop is None  # every rank left its collectives in step: the session goes on


def test_a_rank_that_only_timed_out_is_named_as_waiting_and_the_session_stops():
    everyone = [
        summarize("failed", "call", GLOO_TIMEOUT, None),
        summarize("failed", "call", ValueError("boom"), None),
        summarize("failed", "call", GLOO_TIMEOUT, None),
    ]
    decision = decide(everyone, 0, "test_x")
    assert decision.text.startswith("tesserabench: rank 1 failed in call: ValueError: boom; ranks 0, 2 failed waiting")
    assert decision.stop and "out of step after test_x failed on rank 1" in decision.stop


def test_when_every_failure_is_a_timeout_all_are_named():
    everyone = [summarize("failed", "call", GLOO_TIMEOUT, None)] * 2
    decision = decide(everyone, 1, "t")
    assert "rank 0 failed" in decision.text and "rank 1 failed" in decision.text
    assert decision.stop


def test_a_skip_on_one_rank_skips_every_rank_with_its_reason():
    everyone = [passed("setup"), summarize("skipped", "setup", None, ("t.py", 3, "no GPU on this node"))]
    decision = decide(everyone, 0, "t")
    assert decision.outcome == "skipped"
    assert decision.skip == ("t.py", 3, "rank 1 skipped it: no GPU on this node")
    assert decide(everyone, 1, "t").outcome == "skipped"


def test_distributed_errors_are_recognised():
    assert is_distributed_error(GLOO_TIMEOUT)
    assert is_distributed_error(RuntimeError("Connection closed by peer [127.0.0.1]:4242"))
    assert not is_distributed_error(ValueError("Timed out waiting"))  # a user's own error
    assert not is_distributed_error(RuntimeError("shape mismatch"))
    torch = pytest.importorskip("torch")
    assert is_distributed_error(torch.distributed.DistStoreError("wait timeout after 1000ms"))


def test_long_messages_are_cut():
    summary = summarize("failed", "call", ValueError("x" * 5000 + "\nsecond line"), None)
    assert len(summary["message"]) <= 400 and "second line" not in summary["message"]


def _rank(ids, settings=None, errors=0):
    return {"ids": ids, "settings": settings or {"bench": True, "max_time": 1.0}, "errors": errors}


def test_same_selection_is_fine():
    assert selection_problem([_rank(["a", "b"]), _rank(["a", "b"])]) is None


def test_a_different_selection_names_the_ranks_and_the_first_difference():
    problem = selection_problem([_rank(["a", "b", "c"]), _rank(["a", "b", "c"]), _rank(["a", "c"], errors=1)])
    assert "rank 0 has 3, rank 2 has 2" in problem
    assert "first difference at test 2: rank 0 runs 'b', rank 2 runs 'c'" in problem
    assert "collection errors: rank 0 0, rank 2 1" in problem


def test_a_shorter_selection_and_another_order_are_found():
    assert "rank 1 runs nothing" in selection_problem([_rank(["a", "b"]), _rank(["a"])])
    assert "test 1" in selection_problem([_rank(["a", "b"]), _rank(["b", "a"])])


def test_different_measurement_settings_are_a_problem():
    problem = selection_problem([_rank(["a"]), _rank(["a"], {"bench": False, "max_time": 1.0})])
    assert "rank 0 has bench=True, rank 1 has bench=False" in problem
