"""The real-machine study's workload sets (benchmarks/gate_real.py --set ...): every version of
every set's module runs each of its workloads and refuses a name it does not have, so a study
cannot spend its half hour on a typo."""

import sys
import types
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import gate_real  # noqa: E402


@pytest.mark.parametrize("name", gate_real.SETS)
def test_every_version_of_a_set_runs_its_workloads(name):
    workloads = gate_real.WorkloadSet.named(name)
    assert set(workloads.slowed) <= set(workloads.names)
    for factor in gate_real.VERSIONS.values():
        scale = {slowed: factor for slowed in workloads.slowed} if factor != 1.0 else {}
        module = types.ModuleType(f"workloads_{name}")
        exec(workloads.module(scale=scale), module.__dict__)
        assert [module.run(workload) is not None for workload in workloads.names] == [True] * len(workloads.names)
        with pytest.raises((ValueError, KeyError)):
            module.run("no such workload")
