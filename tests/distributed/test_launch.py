"""Who is a torchrun rank, which backend it takes, and how the machine key records the ranks."""

import pytest

from pytest_tesserabench.distributed.launch import Launch, LaunchError, choose_backend, torchrun_command
from pytest_tesserabench.machine import device as machine

TORCHRUN = {"RANK": "3", "WORLD_SIZE": "8", "LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "n0",
            "MASTER_PORT": "29500"}  # fmt: skip


def test_torchrun_variables_make_a_rank():
    launch = Launch.from_env(TORCHRUN)
    assert (launch.rank, launch.world_size, launch.local_rank, launch.local_world_size) == (3, 8, 1, 2)
    assert launch.nodes == 4


def test_a_plain_run_is_not_a_rank_even_with_some_variables_set():
    assert Launch.from_env({}) is None
    assert Launch.from_env({"RANK": "0", "WORLD_SIZE": "2"}) is None  # e.g. a job scheduler's own variables


def test_nonsense_variables_are_a_clear_error():
    with pytest.raises(LaunchError, match="RANK='x' is not a whole number"):
        Launch.from_env({**TORCHRUN, "RANK": "x"})
    with pytest.raises(LaunchError, match="do not fit WORLD_SIZE=8"):
        Launch.from_env({**TORCHRUN, "RANK": "8"})


def test_backend_choice():
    assert choose_backend("auto", 0) == "gloo"
    assert choose_backend("auto", 8, local_rank=7) == "nccl"
    assert choose_backend("gloo", 8) == "gloo"
    with pytest.raises(LaunchError, match="nccl: no CUDA GPU is usable here; use gloo"):
        choose_backend("nccl", 0)
    with pytest.raises(LaunchError, match="local rank 2 has no GPU of its own: 2 visible"):
        choose_backend("nccl", 2, local_rank=2)


def test_the_command_to_use():
    assert (
        torchrun_command(2, ["tests/x.py", "-k", "a b"]) == "torchrun --nproc-per-node=2 -m pytest tests/x.py -k 'a b'"
    )


def test_machine_key_records_backend_and_world_size():
    info = {"device": "NVIDIA H100 80GB HBM3", "arch": "sm_90"}
    assert machine.machine_key(info) == "nvidia-h100-80gb-hbm3-sm90"  # unchanged without torchrun
    assert machine.machine_key({**info, "backend": "nccl", "world_size": 8}) == "nvidia-h100-80gb-hbm3-sm90-nccl-x8"
    cpu = {"device": "Intel(R) Xeon(R) Processor " + "x" * 200, "arch": "x86_64", "backend": "gloo", "world_size": 4}
    key = machine.machine_key(cpu)
    assert key.endswith("-gloo-x4") and len(key) <= 100
