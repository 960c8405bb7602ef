"""Fixtures for kernel correctness tests."""

import pytest
import torch


@pytest.fixture
def device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
