"""On a GPU: tune a small matmul for real, then matmul() runs the cached config.

Skipped without a CUDA GPU (the CPU tests drive the same code with a fake GPU)."""

import pytest
import torch

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: tunes and times for real")


def test_tune_then_the_kernel_runs_the_winner(tmp_path, monkeypatch, analysis_cache):
    from kernels import matmul
    from pytest_tesserabench.inspect import capture_launches
    from pytest_tesserabench.tuning import TuningCache, lookup, tune
    from pytest_tesserabench.tuning.cache import ENV_CACHE
    from pytest_tesserabench.tuning.measure import gpu_timer_factory

    arch = lookup.device_arch(torch.device("cuda"))
    hopper = arch == "sm_90" and matmul.TensorDescriptor is not None
    tunable = matmul.TUNABLE_TMA if hopper else matmul.TUNABLE
    problem = tunable.problem({"M": 512, "N": 512, "K": 512}, ("bf16",))
    device = torch.device("cuda")
    cache = TuningCache(tmp_path / "tuning_cache.json")
    result = tune(
        tunable,
        problem,
        arch,
        strategy="random",
        budget=4,
        analysis_cache=analysis_cache,
        timer_factory=gpu_timer_factory(tunable.runner(problem, device), device),
        confirm_runs=2,
        cache=cache,
        device_name=torch.cuda.get_device_name(),
    )
    assert result.method == "measured" and result.best_ms > 0 and len(result.trials) == 4
    assert result.entry["config"] == result.best.to_json()

    monkeypatch.setenv(ENV_CACHE, str(cache.path))
    lookup.reload()
    try:
        a = torch.randn(512, 512, device=device, dtype=torch.bfloat16)
        b = torch.randn(512, 512, device=device, dtype=torch.bfloat16)
        with capture_launches() as launches:
            out = matmul.matmul(a, b)
        torch.testing.assert_close(out.float(), (a.float() @ b.float()), rtol=2e-2, atol=2e-1)
        (launch,) = launches
        assert launch.config is None  # the cached config, not the autotuner's
        assert {k: launch.constexprs[k] for k in result.best.kernel_kwargs} == result.best.kernel_kwargs
    finally:
        lookup.reload()
