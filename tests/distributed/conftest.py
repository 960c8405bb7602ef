# Imported once here: pytester's in-process runs drop modules first imported inside them, and
# numpy refuses to be imported twice in one process.
import numpy  # noqa: F401
import pytest
import rich.console  # noqa: F401
import scipy.stats  # noqa: F401

FAST = ("--bench-max-time=0.02", "--bench-warmup=0", "--bench-min-rounds=3")


@pytest.fixture
def fast():
    return FAST
