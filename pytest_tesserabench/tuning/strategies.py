"""Search strategies: which candidate configs to time, given a budget of timed configs.

* ``exhaustive``: every candidate (the budget does not apply);
* ``random``: ``budget`` candidates drawn without replacement (seeded);
* ``bayesian``: Optuna's TPE sampler (Tree-structured Parzen Estimator);
* ``genetic``: Optuna's NSGA-II sampler (a genetic algorithm: selection, crossover, mutation).

The last two come from Optuna (the ``tune`` extra: ``pip install 'pytest-tesserabench[tune]'``).
They search the declared parameters one by one, as Optuna categoricals; a point that is not a
candidate (a constraint or static pruning removed it) is told a penalty without any timing, so
the sampler learns to avoid that region; a point already timed is told its known time. Both
samplers rank values, so the penalty's size does not distort them. The ``seeds`` (the candidates
the static estimate ranks first) are tried first, so a search starts where the estimate
points. Should a sampler keep proposing known points, the rest of the budget goes to untimed
candidates in the given order.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from .measure import Trial
from .space import Config

STRATEGIES = ("exhaustive", "random", "bayesian", "genetic")
_OPTUNA_STRATEGIES = {"bayesian": "TPE", "genetic": "NSGA-II"}
PENALTY = 1e30  # told to the sampler for infeasible or failed points (ranked, never averaged)
_ASKS_PER_TIMING = 50  # give up on the sampler after this many proposals per timed config


class StrategyError(ValueError):
    """A strategy that cannot run here (unknown name, Optuna missing); one line with the fix."""


def check_strategy(name: str) -> None:
    if name not in STRATEGIES:
        raise StrategyError(f"unknown strategy {name!r}; choose one of {', '.join(STRATEGIES)}")
    if name in _OPTUNA_STRATEGIES:
        _optuna(name)


def _optuna(strategy: str):
    try:
        import optuna  # the optional `tune` extra (~0.18 s): Bayesian and genetic search only
    except ImportError:
        raise StrategyError(
            f"strategy {strategy!r} uses Optuna's {_OPTUNA_STRATEGIES[strategy]} sampler, and Optuna is not "
            "installed: pip install 'pytest-tesserabench[tune]' (or use --strategy exhaustive or random)"
        ) from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def search(
    strategy: str,
    candidates: Sequence[Config],
    evaluate: Callable[[Config], Trial],
    *,
    budget: int | None = None,
    seed: int = 0,
    seeds: Sequence[Config] = (),
) -> list[Trial]:
    """The trials of one search, in the order they were timed."""
    check_strategy(strategy)
    candidates = list(candidates)
    if not candidates:
        return []
    budget = (
        len(candidates) if budget is None or strategy == "exhaustive" else max(1, min(int(budget), len(candidates)))
    )
    if strategy == "exhaustive":
        return [evaluate(config) for config in candidates]
    if strategy == "random":
        return [evaluate(config) for config in random.Random(seed).sample(candidates, budget)]
    return _optuna_search(strategy, candidates, evaluate, budget, seed, seeds)


def _optuna_search(strategy, candidates, evaluate, budget, seed, seeds) -> list[Trial]:
    optuna = _optuna(strategy)
    names = list(candidates[0])
    choices = {name: list(dict.fromkeys(config[name] for config in candidates)) for name in names}
    if strategy == "bayesian":
        # TPE's random start-up trials: a fifth of the budget (Optuna's default of 10 would be
        # most of a small budget), the seeds counting among them.
        sampler = optuna.samplers.TPESampler(seed=seed, n_startup_trials=max(2, budget // 5))
        n_seeds = min(len(seeds), max(1, budget // 5))
    else:
        population = max(4, min(20, budget // 4))
        sampler = optuna.samplers.NSGAIISampler(seed=seed, population_size=population)
        n_seeds = min(len(seeds), population // 2)
    study = optuna.create_study(direction="minimize", sampler=sampler)
    for config in seeds[:n_seeds]:
        study.enqueue_trial(dict(config))
    legal = set(candidates)
    timed: dict[Config, Trial] = {}
    asks = 0
    while len(timed) < budget and asks < _ASKS_PER_TIMING * budget:
        asks += 1
        proposal = study.ask()
        point = Config({name: proposal.suggest_categorical(name, choices[name]) for name in names})
        if point not in legal:
            study.tell(proposal, PENALTY)
            continue
        trial = timed.get(point) or evaluate(point)
        timed[point] = trial
        study.tell(proposal, trial.median_ms if trial.ok else PENALTY)
    for config in candidates:  # the sampler stalled: spend what is left in the given order
        if len(timed) >= budget:
            break
        if config not in timed:
            timed[config] = evaluate(config)
    return list(timed.values())


__all__ = ["PENALTY", "STRATEGIES", "StrategyError", "check_strategy", "search"]
