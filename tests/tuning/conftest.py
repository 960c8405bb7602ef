"""Fixtures of the tuning tests."""

import pytest


@pytest.fixture(scope="session")
def analysis_cache(tmp_path_factory):
    """One static-analysis cache for the session: a config is compiled once per test worker."""
    return tmp_path_factory.mktemp("analysis-cache")
