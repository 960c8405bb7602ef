"""A kernel the project already tunes with @triton.autotune, tuned by `tesserabench tune`
through from_autotune: its configs are the space, and the tuned config reaches its launches."""

import json
from pathlib import Path

import pytest

pytest.importorskip("triton")
torch = pytest.importorskip("torch")

from pytest_tesserabench.cli import main  # noqa: E402
from pytest_tesserabench.tuning import Config, Problem, TunableError, autotune_configs, load_tunable  # noqa: E402

KERNEL = "tests/tuning/autotuned_kernel.py"


def test_the_autotuner_configs_are_the_space():
    from autotuned_kernel import TUNABLE, scale_kernel

    assert autotune_configs(scale_kernel) == [
        {"BLOCK": 128, "num_warps": 4, "num_stages": 3},
        {"BLOCK": 1024, "num_warps": 4, "num_stages": 2},
        {"BLOCK": 256, "num_warps": 8, "num_stages": 3},
    ]
    problem = Problem({"n": 1000}, ("fp32",))
    enumeration = TUNABLE.space(problem).enumerate(problem.context())
    assert [dict(c) for c in enumeration.legal] == autotune_configs(scale_kernel)
    assert TUNABLE.work(enumeration.legal[0], problem).programs == 8  # ceil(1000 / 128)


def test_without_a_gpu_its_configs_are_compiled_pruned_and_ranked(analysis_cache, tmp_path, capsys):
    args = ["tune", f"{KERNEL}:TUNABLE", "--arch", "sm_90", "--analysis-cache", str(analysis_cache)]
    status = main([*args, "--cache", str(tmp_path / "c.json"), "--json", "-"])
    out, err = capsys.readouterr()
    assert status == 0, err
    assert "static pruning for sm_90: 3 of 3 configs kept" in out
    document = json.loads(out[out.index("[\n") :])
    assert document[0]["method"] == "static-estimate" and document[0]["best"]["BLOCK"] in (128, 256, 1024)


RUNNER = """
import sys, torch, triton
sys.path.insert(0, "tests/tuning")
from autotuned_kernel import _inputs, scale_kernel
from pytest_tesserabench.tuning import Problem, from_autotune

made = []
tunable = from_autotune(
    scale_kernel, shape_names=("n",), inputs=lambda p, d: made.append(_inputs(p, d)) or made[-1],
    grid=lambda problem, meta: (triton.cdiv(problem.shape["n"], meta["BLOCK"]),),
)
problem = Problem({"n": 3000}, ("fp32",))
call_for = tunable.runner(problem, "cpu")
for config in tunable.space(problem).enumerate().legal:
    made[0][1].zero_()
    call_for(config)()
    assert torch.equal(made[0][1], 2 * made[0][0]), config
print("launched", len(made), "input set(s)")
"""


def test_the_runner_launches_each_config_as_the_kernel_would():
    # in Triton's interpreter (a subprocess: the interpreter is chosen when a kernel is decorated)
    import os
    import subprocess
    import sys

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", RUNNER], capture_output=True, text=True, env=env, timeout=300, cwd=root
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "launched 1 input set(s)" in done.stdout  # every config of the list on inputs made once


def test_a_tuned_config_in_the_cache_is_the_one_the_kernel_launches(monkeypatch):
    import autotuned_kernel
    from autotuned_kernel import scale_kernel

    from pytest_tesserabench.tuning import lookup

    asked = []

    def cached(tunable, shape, dtypes, device, path=None):
        asked.append((tunable.name, dict(shape), dtypes))
        return Config({"BLOCK": 256, "num_warps": 8, "num_stages": 3})

    monkeypatch.setattr(lookup, "tuned_config", cached)
    x = torch.arange(4096, dtype=torch.float32)
    kept = scale_kernel.early_config_prune(scale_kernel.configs, {"x_ptr": x, "n": 4096})
    assert [c.kwargs["BLOCK"] for c in kept] == [256] and asked == [("scale_kernel", {"n": 4096}, ("fp32",))]
    # nothing cached for it: every config stays for the autotuner to time
    monkeypatch.setattr(lookup, "tuned_config", lambda *a, **k: None)
    assert scale_kernel.early_config_prune(scale_kernel.configs, {"x_ptr": x, "n": 4096}) == scale_kernel.configs
    assert autotuned_kernel.TUNABLE.name == "scale_kernel"


def test_the_autotuned_kernel_itself_is_refused_with_the_way_to_declare_it():
    with pytest.raises(TunableError, match=r"is an @triton.autotune kernel: declare a Tunable for it.*from_autotune"):
        load_tunable(f"{KERNEL}:scale_kernel")
