"""benchmarks/wiring_mutations.py breaks the wiring on purpose to show a test fails; each of its
mutations must still find the code it breaks, or it silently tests nothing."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_wiring_mutation_still_finds_its_code():
    spec = importlib.util.spec_from_file_location("wiring_mutations", ROOT / "benchmarks" / "wiring_mutations.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (its dataclasses look their module up)
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    assert module.stale() == []
