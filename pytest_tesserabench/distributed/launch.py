"""Is this process a rank started by torchrun, and which backend does it use? No torch import
until a backend has to be chosen."""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

# What torchrun (and torch.distributed.launch, or a Slurm script that mimics them) sets for
# every worker; init_process_group("env://") needs the same five.
LAUNCH_VARIABLES = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")


class LaunchError(ValueError):
    """A launch that cannot work; the message names the culprit and the fix."""


@dataclass(frozen=True)
class Launch:
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int

    @property
    def nodes(self) -> int:
        """Machines taking part (torchrun gives every node the same number of ranks)."""
        return max(1, self.world_size // max(1, self.local_world_size))

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> Launch | None:
        """The launch torchrun's variables describe; None unless all five are set (a plain pytest
        run, even in an environment that sets some of them for other reasons)."""
        env = os.environ if env is None else env
        if not all(env.get(name) for name in LAUNCH_VARIABLES):
            return None
        values = {}
        for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
            text = env.get(name) or env["WORLD_SIZE"]  # LOCAL_WORLD_SIZE: torch.distributed.launch lacks it
            try:
                values[name] = int(text)
            except ValueError:
                raise LaunchError(f"{name}={text!r} is not a whole number; start the run with torchrun") from None
        launch = cls(values["RANK"], values["WORLD_SIZE"], values["LOCAL_RANK"], values["LOCAL_WORLD_SIZE"])
        if not 0 <= launch.rank < launch.world_size or not 0 <= launch.local_rank < launch.local_world_size:
            raise LaunchError(
                f"RANK={launch.rank}, LOCAL_RANK={launch.local_rank} do not fit WORLD_SIZE={launch.world_size}, "
                f"LOCAL_WORLD_SIZE={launch.local_world_size}; start the run with torchrun"
            )
        return launch


def choose_backend(requested: str, cuda_devices: int, local_rank: int = 0) -> str:
    """``auto``: NCCL when this process can see a GPU, gloo otherwise; NCCL needs a GPU per local rank."""
    if requested == "auto":
        requested = "nccl" if cuda_devices > 0 else "gloo"
    if requested == "nccl":
        if cuda_devices == 0:
            raise LaunchError(
                "--bench-dist-backend=nccl: no CUDA GPU is usable here; use gloo (or auto) on a machine without GPUs"
            )
        if local_rank >= cuda_devices:
            raise LaunchError(
                f"local rank {local_rank} has no GPU of its own: {cuda_devices} visible; start at most "
                f"--nproc-per-node={cuda_devices} ranks per machine with NCCL (or use --bench-dist-backend=gloo)"
            )
    return requested


def torchrun_command(nproc: int, pytest_args: Sequence[str]) -> str:
    """The command that runs these pytest arguments on ``nproc`` ranks of this machine."""
    args = " ".join(shlex.quote(a) for a in pytest_args)
    return f"torchrun --nproc-per-node={nproc} -m pytest {args}".rstrip()
