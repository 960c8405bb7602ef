# Imported once here: pytester's in-process runs drop modules first imported inside them, and
# numpy refuses to be imported twice in one process.
import numpy  # noqa: F401
import pytest
import rich.console  # noqa: F401
import scipy.stats  # noqa: F401

# Fast measurement settings for pytester runs: the plugin's behaviour, not real timing, is tested.
FAST = ("--bench-max-time=0.02", "--bench-warmup=0", "--bench-min-rounds=3")


@pytest.fixture
def fast():
    return FAST


@pytest.fixture(autouse=True)
def no_ci_job_summary(monkeypatch):
    """The throwaway projects these tests run must not append to the real CI job's summary."""
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
