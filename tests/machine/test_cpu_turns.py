"""machine/cpu_turns.py: a measurement moved onto the next CPU in turn, and left free there."""

import pytest

from pytest_tesserabench.machine import cpu_turns


@pytest.fixture
def affinity(monkeypatch):
    """A fake thread affinity: what it allows, and every mask set, in order."""
    state = {"allowed": {0, 1, 2, 5}, "set": [], "refuse": False}

    def setaffinity(pid, mask):
        assert pid == 0  # the calling thread
        if state["refuse"] and len(mask) == 1:
            raise OSError("not permitted")
        state["set"].append(set(mask))

    monkeypatch.setattr(cpu_turns.os, "sched_getaffinity", lambda pid: set(state["allowed"]))
    monkeypatch.setattr(cpu_turns.os, "sched_setaffinity", setaffinity)
    return state


def test_each_turn_moves_the_thread_to_the_next_allowed_cpu_and_frees_it_again(affinity):
    assert [cpu_turns.start_on_cpu(turn, "cpu") for turn in range(6)] == [0, 1, 2, 5, 0, 1]
    masks = affinity["set"]
    assert masks[0::2] == [{0}, {1}, {2}, {5}, {0}, {1}]  # moved there...
    assert all(mask == {0, 1, 2, 5} for mask in masks[1::2])  # ...and free to run anywhere again


def test_no_choice_or_no_permission_leaves_the_thread_where_it_is(affinity):
    affinity["allowed"] = {3}
    assert cpu_turns.start_on_cpu(1, "cpu") is None and affinity["set"] == []
    affinity["allowed"], affinity["refuse"] = {0, 1}, True
    assert cpu_turns.start_on_cpu(1, "cpu") is None
    assert affinity["set"] == [{0, 1}]  # the mask it had, whatever happened


def test_a_gpu_timers_measurement_is_not_moved(affinity):
    # (a device's time does not depend on the host's CPU)
    assert [cpu_turns.start_on_cpu(1, timer) for timer in ("cuda_event", "cuda_graph")] == [None, None]
    assert affinity["set"] == []
    assert cpu_turns.start_on_cpu(1, "interpreter") == 1  # (Triton's interpreter runs on the CPU)
