import tempfile

# Imported once here: pytester's in-process runs drop modules first imported inside them, and
# numpy refuses to be imported twice in one process.
# Modules an in-process run would otherwise import, drop and import again on every run: the
# hypothesis plugin (a pytest11 plugin, so each re-import is assertion-rewritten: seconds per run)
# and the plugin's own lazily imported parts (a monkeypatch of them must reach the inner run).
import filelock  # noqa: F401
import numpy  # noqa: F401
import pytest
import rich.console  # noqa: F401
import rich.table  # noqa: F401
import scipy.stats  # noqa: F401

from pytest_tesserabench import context, gate, outputs, session  # noqa: F401
from pytest_tesserabench.gate import (  # noqa: F401
    centres,
    conditions,
    config,
    kernels,
    model,
    paired,
    pipeline,
    rule,
)
from pytest_tesserabench.history import baseline, comparison  # noqa: F401
from pytest_tesserabench.machine import interpret  # noqa: F401
from pytest_tesserabench.measure import canary, fixture, instruments, sampling, timing  # noqa: F401
from pytest_tesserabench.record import results, stats  # noqa: F401
from pytest_tesserabench.report import comparison_table, terminal  # noqa: F401

try:  # absent where only the plugin's own dependencies are installed (the GPU machine)
    import hypothesis  # noqa: F401
except ImportError:
    pass

# Fast measurement settings for pytester runs: the plugin's behaviour, not real timing, is tested.
FAST = ("--bench-max-time=0.02", "--bench-warmup=0", "--bench-min-rounds=3", "--bench-save-processes=0")


@pytest.fixture
def fast():
    return FAST


@pytest.fixture(autouse=True)
def steady_canary(monkeypatch):
    """In-process pytester runs share this module: a canary that always reads 2 ms, and a pool
    canary that always reads 7 µs (measure/canary.py). The tests' workloads run on fake clocks,
    which the machine's load does not move; a real canary would (the run-effect model and the
    conditions read them), making verdicts depend on how busy the CI machine is."""

    monkeypatch.setattr(canary, "measure_canary", lambda samples=canary.CANARY_SAMPLES: [2.0] * samples)
    monkeypatch.setattr(canary, "measure_pool_canary", lambda threads: 0.007)  # (torch's pool, as steady)
    monkeypatch.setattr(canary, "measure_blas_canary", lambda: 0.06)  # (not reached while the fake above reads)


@pytest.fixture(autouse=True)
def no_ci_job_summary(monkeypatch):
    """The throwaway projects these tests run must not append to the real CI job's summary."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)


@pytest.fixture
def private_tmp(tmp_path, monkeypatch):
    """A temp folder of this test's own: the locks other sessions share are never touched."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    return folder
