"""The process group of a run: what the ``dist`` fixture gives a test, and what ranks use to agree.

Under torchrun the plugin rendezvouses through torchrun's store (``env://``, so multi-node runs and
Slurm work as torchrun does) and initialises the default group itself: gloo without GPUs, NCCL
with them (one GPU per local rank). Beside it, always a gloo *control* group: the measurement loop
all-reduces round times and broadcasts decisions on it, so the plugin's own traffic never
interleaves with the test's collectives and works on CPU tensors whatever the data backend.
Test outcomes and the collected selection travel through the store instead (keyed, with a
timeout), which stays usable even after a collective went out of step.

Without torchrun a test that asks for ``dist`` gets a one-rank group of the same backend, so the
collective benchmarks double as correctness tests in a plain ``pytest`` run.
"""

from __future__ import annotations

import datetime
import json
import os
import time
from collections.abc import Sequence

import pytest
import torch
import torch.distributed as dist
from torch.distributed import rendezvous
from torch.distributed.device_mesh import init_device_mesh

from pytest_tesserabench.distributed import mesh as mesh_shapes
from pytest_tesserabench.distributed.agreement import PeerError
from pytest_tesserabench.distributed.launch import Launch, torchrun_command


class WorldError(PeerError):
    """The process group could not be set up, or a peer is gone; the message says why and what to do."""


class ExchangeTimeout(WorldError):
    """Some ranks did not reach an exchange in time (hung, or gone)."""

    def __init__(self, topic: str, missing: list[int], seconds: float, why: str = "hung in a test, or died"):
        self.missing = missing
        super().__init__(
            f"{_ranks(missing)} did not report {topic} within {seconds:g} s ({why}); the other ranks stop here"
        )


class PeerLeft(WorldError):
    """A peer finished the test phase this rank is waiting in (it failed before the wait)."""


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


# How long ranks wait for a peer's machine measurement lock (held by another pytest session).
LOCK_WAIT_S = 3600.0


class ControlRanks:
    """The sampler's view of the ranks (``sampling.Ranks``): barriers and agreement on the gloo
    control group, with float64 CPU tensors (times in seconds keep full precision)."""

    def __init__(self, world: World):
        self.size = world.world_size
        self.rank = world.rank
        self.local_rank = world.local_rank
        self.backend = world.backend
        self._group = world._control
        self._world = world
        self._gatherings = 0

    def gather(self) -> None:
        """Wait until every rank is ready to measure (each machine's local rank 0 holding its
        machine's measurement lock), through the store: another session may hold that lock for
        longer than a collective may wait, and a peer that failed in this test instead is seen at
        once, not after a timeout."""
        if self.size > 1:
            self._gatherings += 1
            self._world.gather(f"ready/{self._gatherings}")

    def barrier(self) -> None:
        if self.size > 1:
            dist.barrier(group=self._group)

    def max(self, values: list[float]) -> list[float]:
        """Element-wise maximum over the ranks: exact, so every rank gets the same bits."""
        if self.size == 1:
            return values

        tensor = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=self._group)
        return tensor.tolist()

    def agree(self, values: list[float]) -> list[float]:
        """Rank 0's values on every rank."""
        if self.size == 1:
            return values

        tensor = torch.tensor(values, dtype=torch.float64)
        dist.broadcast(tensor, src=0, group=self._group)
        return tensor.tolist()


class World:
    """The ``dist`` fixture: ``rank``, ``world_size``, ``local_rank``, ``backend``, ``device``,
    ``mesh(shape)``, ``require(world_size=N)``; any other name is ``torch.distributed``'s, so a
    test that calls its fixture ``dist`` can still write ``dist.all_reduce(t)`` as people do
    after ``import torch.distributed as dist``."""

    def __init__(self, launch: Launch | None, backend: str, timeout_s: float, pytest_args: Sequence[str] = ()):
        self.launch = launch
        self.launched = launch is not None
        self.rank = launch.rank if launch else 0
        self.world_size = launch.world_size if launch else 1
        self.local_rank = launch.local_rank if launch else 0
        self.local_world_size = launch.local_world_size if launch else 1
        self.backend = backend
        self.timeout_s = timeout_s
        self.pytest_args = tuple(pytest_args)
        self.ranks: ControlRanks | None = None
        self._store = None
        self._control = None
        self._meshes: dict = {}
        self._gone: list[int] = []  # ranks that missed an exchange: never waited for again
        self.phases = 0  # test phases reported so far: the same count on every rank, so it keys exchanges

    def __repr__(self) -> str:
        return f"World(rank={self.rank}, world_size={self.world_size}, backend={self.backend!r})"

    # -- what a test uses ------------------------------------------------------------------------
    @property
    def device(self):
        return torch.device("cuda", self.local_rank) if self.backend == "nccl" else torch.device("cpu")

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)

        return getattr(dist, name)

    def mesh(self, shape: str):
        """A DeviceMesh of ``shape`` ('dp=2,tp=2'), built once per shape (building one is collective)."""
        names, sizes = mesh_shapes.resolve(shape, self.world_size)
        if (names, sizes) not in self._meshes:
            device_type = "cuda" if self.backend == "nccl" else "cpu"
            self._meshes[names, sizes] = init_device_mesh(device_type, sizes, mesh_dim_names=names)
        return self._meshes[names, sizes]

    def torchrun_command(self, nproc: int) -> str:
        return torchrun_command(nproc, self.pytest_args)

    def require(self, world_size: int) -> None:
        """Skip the test, with the command that would run it, when the run has too few ranks."""
        if self.world_size < world_size:
            pytest.skip(
                f"needs {world_size} ranks, this run has {self.world_size}; run it with: "
                f"{self.torchrun_command(world_size)}"
            )

    def machine_fields(self) -> dict:
        """What a run file's machine block records about the ranks (and the machine key encodes)."""
        return {
            "world_size": self.world_size,
            "local_world_size": self.local_world_size,
            "nodes": self.launch.nodes if self.launch else 1,
            "backend": self.backend,
        }

    # -- the group's life ------------------------------------------------------------------------
    @property
    def exchange_timeout_s(self) -> float:
        # A rank stuck in a collective gives up after timeout_s, then comes to the exchange: its
        # peers must wait for that, and a little more.
        return 2 * self.timeout_s + 10

    def start(self) -> None:
        if dist.is_initialized():
            raise WorldError(
                "torch.distributed's default process group was initialised before the plugin could (by a "
                "conftest or another plugin); let tesserabench own it: use the `dist` fixture instead of "
                "calling init_process_group"
            )
        timeout = datetime.timedelta(seconds=self.timeout_s)
        if self.launched:
            store, rank, world_size = next(rendezvous("env://", timeout=timeout))
            if (rank, world_size) != (self.rank, self.world_size):
                raise WorldError(
                    f"rendezvous gave rank {rank} of {world_size}, the environment {self.rank} of {self.world_size}"
                )
        else:
            store = dist.HashStore()
        options = {}
        if self.backend == "nccl":
            torch.cuda.set_device(self.local_rank)
            options["device_id"] = torch.device("cuda", self.local_rank)
        dist.init_process_group(
            self.backend,
            store=dist.PrefixStore("default_pg", store),
            rank=self.rank,
            world_size=self.world_size,
            timeout=timeout,
            **options,
        )
        if self.world_size > 1:
            self._control = dist.new_group(backend="gloo", timeout=timeout)
        # A restarted torchrun attempt shares the agent's store with the failed one: its keys
        # must not be read as this attempt's.
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
        self._store = dist.PrefixStore(f"tesserabench/{attempt}", store)
        self.ranks = ControlRanks(self)

    def exchange(self, topic: str, value, *, timeout_s: float | None = None, why: str | None = None) -> list:
        """Every rank's ``value`` (plain JSON), indexed by rank; ExchangeTimeout names the absent."""
        if self.world_size == 1:
            return [value]
        timeout_s = self.exchange_timeout_s if timeout_s is None else timeout_s
        keys = [f"{topic}/{rank}" for rank in range(self.world_size)]
        self._store.set(keys[self.rank], json.dumps(value))
        try:
            self._store.wait(keys, datetime.timedelta(seconds=timeout_s))
        except Exception:  # DistStoreError (a timeout) on recent torch, RuntimeError on older
            missing = [rank for rank, key in enumerate(keys) if not self._store.check([key])]
            self._gone = missing
            raise ExchangeTimeout(topic, missing, timeout_s, *([why] if why else [])) from None
        return [json.loads(self._store.get(key)) for key in keys]

    def gather(self, topic: str) -> None:
        """Return when every rank has reached ``topic``; PeerLeft as soon as a peer reported this
        test phase's outcome instead (it failed before getting here); ExchangeTimeout after
        LOCK_WAIT_S."""
        keys = [f"{topic}/{rank}" for rank in range(self.world_size)]
        self._store.set(keys[self.rank], "1")
        finished = [f"outcome/{self.phases + 1}/{rank}" for rank in range(self.world_size)]
        deadline, delay = time.monotonic() + LOCK_WAIT_S, 0.0005
        while not self._store.check(keys):
            left = [rank for rank, key in enumerate(finished) if rank != self.rank and self._store.check([key])]
            if left:
                raise PeerLeft(
                    f"{_ranks(left)} finished this test without measuring (it failed before this bench() call; "
                    "its report says why)"
                )
            if time.monotonic() > deadline:
                missing = [rank for rank, key in enumerate(keys) if not self._store.check([key])]
                raise ExchangeTimeout(
                    "that it is ready to measure",
                    missing,
                    LOCK_WAIT_S,
                    "its machine's measurement lock stayed taken by another pytest session, or it hung",
                )
            time.sleep(delay)
            delay = min(2 * delay, 0.1)

    def close(self) -> None:
        """Leave together (so no rank tears down what a peer still uses), then destroy the group."""

        if self._store is not None and self.world_size > 1 and not self._gone:
            try:
                self.exchange("closing", self.rank)
            except WorldError:
                pass  # a rank that is gone cannot be waited for; the group goes anyway
        self._meshes.clear()
        if dist.is_initialized():
            dist.destroy_process_group()
        self._store = self._control = self.ranks = None
