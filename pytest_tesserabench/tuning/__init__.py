"""Autotuning that spends fewer GPU seconds: a declared config space, static pruning (every
candidate compiled for the target with no GPU; configs that spill, overflow shared memory or
fall below an occupancy floor are dropped before they are timed), search strategies
(exhaustive, random, Bayesian and genetic via Optuna), timing with the plugin's own timers and
the gate's statistics, and a persistent JSON cache the project's kernels consult.

Importing this package imports neither torch nor triton; see docs/tuning.md.
"""

from __future__ import annotations

from importlib import import_module

_EXPORTS = {
    "Config": "space",
    "ConfigSpace": "space",
    "ConfigList": "space",
    "from_autotune": "autotuned",
    "autotune_configs": "autotuned",
    "SpaceError": "space",
    "Problem": "tunable",
    "Tunable": "tunable",
    "TunableError": "tunable",
    "Work": "tunable",
    "load_tunable": "tunable",
    "PruneRules": "pruning",
    "prune": "pruning",
    "STRATEGIES": "strategies",
    "StrategyError": "strategies",
    "search": "strategies",
    "Evaluator": "measure",
    "Trial": "measure",
    "TuningCache": "cache",
    "TuningCacheWarning": "cache",
    "kernel_source_hash": "cache",
    "tuned_config": "lookup",
    "TuneResult": "tuner",
    "TuningError": "tuner",
    "tune": "tuner",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(import_module(f".{module}", __name__), name)
