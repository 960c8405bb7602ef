"""The store exchange every rank agrees through: a rank that never comes is named, not waited for."""

import json
import time

import pytest

from pytest_tesserabench.distributed.agreement import is_distributed_error
from pytest_tesserabench.distributed.launch import Launch
from pytest_tesserabench.distributed.world import ExchangeTimeout, PeerLeft, World

torch = pytest.importorskip("torch")


def _world(rank: int, size: int) -> World:
    world = World(Launch(rank, size, rank, size), "gloo", timeout_s=1)
    world._store = torch.distributed.HashStore()  # what start() sets up, without a process group
    return world


def test_every_ranks_value_by_rank():
    world = _world(1, 3)
    for rank in (0, 2):
        world._store.set(f"t/{rank}", json.dumps({"rank": rank}))
    assert world.exchange("t", {"rank": 1}) == [{"rank": 0}, {"rank": 1}, {"rank": 2}]


def test_a_rank_that_never_comes_is_named_and_not_waited_for_again(monkeypatch):
    monkeypatch.setattr(World, "exchange_timeout_s", property(lambda self: 0.3))
    world = _world(0, 3)
    world._store.set("t/2", json.dumps("here"))
    started = time.monotonic()
    with pytest.raises(ExchangeTimeout, match=r"rank 1 did not report t within 0.3 s \(hung in a test, or died\)"):
        world.exchange("t", "mine")
    assert time.monotonic() - started < 5
    assert world._gone == [1]


def test_the_group_timeout_bounds_the_exchange():
    assert World(None, "gloo", timeout_s=300).exchange_timeout_s == 610  # a stuck peer's timeout, and more
    assert World(None, "gloo", timeout_s=300).exchange("t", 7) == [7]  # one rank: nothing to wait for


def test_gather_returns_when_everyone_is_ready():
    world = _world(0, 2)
    world._store.set("ready/1/1", "1")
    world.gather("ready/1")


def test_gather_sees_at_once_that_a_peer_left_the_test():
    """A peer that failed before its bench() call reports the phase's outcome instead of getting
    ready: the waiting rank gives up at once (no group timeout, no hour-long lock wait)."""
    world = _world(0, 3)
    world.phases = 4
    world._store.set("ready/1/2", "1")
    world._store.set("outcome/5/1", json.dumps({"outcome": "failed"}))
    started = time.monotonic()
    with pytest.raises(PeerLeft, match="rank 1 finished this test without measuring"):
        world.gather("ready/1")
    assert time.monotonic() - started < 2
    assert is_distributed_error(PeerLeft("x"))  # so the rank that raised is the one named
