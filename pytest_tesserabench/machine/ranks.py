"""The processes that measure together, as the sampler sees them: one (``SOLO``), or the ranks
of a torchrun run (``distributed.world.ControlRanks``). Imports nothing: the plugin's import of
the fixture must stay cheap."""

from __future__ import annotations

from typing import Protocol


class Ranks(Protocol):
    """The processes measuring together (torch.distributed ranks) as the sampler needs them."""

    size: int
    rank: int
    local_rank: int  # among the ranks of this machine
    backend: str | None

    def barrier(self) -> None: ...
    def gather(self) -> None: ...  # all ranks ready to measure (their machines' locks held)
    def max(self, values: list[float]) -> list[float]: ...
    def agree(self, values: list[float]) -> list[float]: ...


class Solo:
    """One process: nothing to wait for, nothing to agree on."""

    size = 1
    rank = 0
    local_rank = 0
    backend = None

    def barrier(self) -> None:
        pass

    def gather(self) -> None:
        pass

    def max(self, values: list[float]) -> list[float]:
        return values

    def agree(self, values: list[float]) -> list[float]:
        return values


SOLO = Solo()
