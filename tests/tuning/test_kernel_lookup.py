"""The project's kernels consult the tuning cache before their own defaults.

Without a GPU the device has no architecture, so the tests give the CPU one (``device_arch``
patched) and run the kernels in the interpreter: the launch that is captured shows which
config ran.
"""

import pytest
import torch

from kernels import attention, matmul
from pytest_tesserabench.inspect import capture_launches
from pytest_tesserabench.tuning import lookup
from pytest_tesserabench.tuning.cache import (
    ENV_CACHE,
    TuningCache,
    TuningCacheWarning,
    kernel_source_hash,
    triton_version,
)
from pytest_tesserabench.tuning.tunable import Problem

MATMUL_CONFIG = {
    "BLOCK_SIZE_M": 16,
    "BLOCK_SIZE_N": 64,
    "BLOCK_SIZE_K": 16,
    "GROUP_SIZE_M": 2,
    "num_warps": 1,
    "num_stages": 1,
}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A tuning cache the kernels find (the environment names it) and a CPU that is an sm_90."""
    monkeypatch.setenv(ENV_CACHE, str(tmp_path / "tuning_cache.json"))
    monkeypatch.setattr(lookup, "device_arch", lambda device: "sm_90")
    lookup.reload()
    yield TuningCache(tmp_path / "tuning_cache.json")
    lookup.reload()


def _entry(tunable, shape, dtype, config, **changes):
    problem = Problem(shape, (dtype,))
    entry = {
        "kernel": tunable.name,
        "source_hash": kernel_source_hash(tunable.kernel()),
        "bucket": tunable.bucket(problem),
        "shape": shape,
        "dtypes": [dtype],
        "arch": "sm_90",
        "triton": triton_version(),
        "config": config,
        "method": "measured",
    }
    return {**entry, **changes}


def _matmul_launch(M=40, N=33, K=24):
    a = torch.randn(M, K).to(torch.bfloat16)
    b = torch.randn(K, N).to(torch.bfloat16)
    with capture_launches() as launches:
        out = matmul.matmul(a, b)
    torch.testing.assert_close(out.float(), matmul.reference(a, b).float(), rtol=2e-2, atol=2e-2)
    (launch,) = launches
    return launch


def test_matmul_runs_the_cached_config_for_its_shape_bucket(cache):
    # Tuned at 64x64x32: the bucket (each size rounded up to a power of two) serves 40x33x24 too.
    cache.record(_entry(matmul.TUNABLE, {"M": 64, "N": 64, "K": 32}, "bf16", MATMUL_CONFIG))
    launch = _matmul_launch()
    assert launch.config is None  # launched directly, not through the autotuner
    assert {k: launch.constexprs[k] for k in ("BLOCK_SIZE_M", "BLOCK_SIZE_N", "BLOCK_SIZE_K")} == {
        "BLOCK_SIZE_M": 16,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 16,
    }
    assert (launch.num_warps, launch.num_stages) == (1, 1)


@pytest.mark.parametrize(
    "changes",
    [
        {"method": "static-estimate"},  # an estimate never picks the config that runs
        {"source_hash": "000000000000"},  # tuned for another version of the kernel
        {"arch": "sm_80"},  # another GPU
        {"triton": "0.0.0"},  # another compiler
        {"dtypes": ["fp16"]},
        {"bucket": {"M": 128, "N": 64, "K": 32}},
    ],
    ids=["estimate", "source", "arch", "triton", "dtype", "bucket"],
)
def test_matmul_falls_back_to_its_autotuner_when_no_entry_fits(cache, changes):
    cache.record(_entry(matmul.TUNABLE, {"M": 64, "N": 64, "K": 32}, "bf16", MATMUL_CONFIG, **changes))
    launch = _matmul_launch()
    assert launch.config is not None and launch.constexprs["BLOCK_SIZE_M"] == 32  # the interpreter's config


def test_no_architecture_means_no_lookup(tmp_path, monkeypatch):
    monkeypatch.setenv(ENV_CACHE, str(tmp_path / "tuning_cache.json"))
    TuningCache(tmp_path / "tuning_cache.json").record(
        _entry(matmul.TUNABLE, {"M": 64, "N": 64, "K": 32}, "bf16", MATMUL_CONFIG)
    )
    lookup.reload()
    assert lookup.device_arch(torch.device("cpu")) is None
    assert lookup.tuned_config(matmul.TUNABLE, {"M": 40, "N": 33, "K": 24}, ("bf16",), torch.device("cpu")) is None


def test_a_corrupt_cache_warns_once_and_the_kernel_uses_its_defaults(cache):
    cache.path.write_text("{not json")
    with pytest.warns(TuningCacheWarning, match="not valid JSON"):
        launch = _matmul_launch()
    assert launch.config is not None


def test_attention_runs_the_cached_config(cache):
    shape = {"B": 1, "H": 2, "S": 32, "D": 64, "causal": 1}
    config = {"BLOCK_M": 16, "BLOCK_N": 16, "num_warps": 1, "num_stages": 1}
    cache.record(_entry(attention.TUNABLE, shape, "fp16", config))
    q, k, v = (torch.randn(1, 2, 29, 64).to(torch.float16) for _ in range(3))  # S=29: bucket 32
    with capture_launches() as launches:
        out = attention.attention(q, k, v, causal=True)
    torch.testing.assert_close(out, attention.reference(q, k, v, causal=True), rtol=2e-2, atol=2e-2)
    (launch,) = launches
    assert launch.config is None and (launch.constexprs["BLOCK_M"], launch.constexprs["BLOCK_N"]) == (16, 16)


def test_the_hopper_tma_kernel_runs_its_cached_config(cache):
    if matmul.TensorDescriptor is None:
        pytest.skip("this Triton has no host-side TMA descriptors")
    config = {
        "BLOCK_SIZE_M": 32,
        "BLOCK_SIZE_N": 64,
        "BLOCK_SIZE_K": 32,
        "GROUP_SIZE_M": 8,
        "EPILOGUE_SUBTILE": False,
        "num_warps": 4,
        "num_stages": 1,
    }
    cache.record(_entry(matmul.TUNABLE_TMA, {"M": 128, "N": 64, "K": 128}, "bf16", config))
    a = torch.randn(70, 96).to(torch.bfloat16)
    b = torch.randn(96, 48).to(torch.bfloat16)
    c = torch.empty(70, 48, dtype=torch.bfloat16)
    with capture_launches() as launches:
        matmul._launch_tma_persistent(a, b, c, num_sms=3)  # what matmul() calls on a Hopper GPU
    torch.testing.assert_close(c.float(), matmul.reference(a, b).float(), rtol=2e-2, atol=2e-2)
    (launch,) = launches
    assert launch.config is None
    assert (launch.constexprs["BLOCK_SIZE_N"], launch.constexprs["EPILOGUE_SUBTILE"]) == (64, False)
