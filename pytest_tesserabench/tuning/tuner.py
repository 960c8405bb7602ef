"""The tuner: space -> constraints -> static pruning -> search (timed) or static ranking -> cache.

``tune(tunable, problem, arch, timer_factory=...)`` measures; without a ``timer_factory`` (no GPU,
or a target that is not the live GPU) it ranks the pruned configs by the static estimate
(``estimate.py``) and says so: such a result is never written to the cache.
"""

from __future__ import annotations

import datetime
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_tesserabench.inspect.archs import ARCH_LIMITS
from pytest_tesserabench.measure import sampling
from pytest_tesserabench.record.units import format_ms

from .cache import TuningCache, kernel_source_hash, key_of, triton_version
from .estimate import estimate_ms, reference_gpu
from .measure import TUNING_BUDGET, Evaluator, Significance, TimerFactory, Trial, compare_best
from .pruning import Candidate, PruneReport, PruneRules, prune
from .space import Config
from .strategies import check_strategy, search
from .tunable import Problem, Tunable

SEEDS = 8  # statically best candidates a Bayesian or genetic search starts from
DEFAULT_BUDGET_FRACTION = 0.25
MIN_DEFAULT_BUDGET = 8


class TuningError(ValueError):
    """Nothing left to tune (every config removed, every timed config failed); one clear line."""


def arch_context(arch: str) -> dict[str, Any]:
    """The target's limits, as names a constraint may use."""

    limits = ARCH_LIMITS[arch]
    return {
        "capability": limits.capability,
        "shared_per_block": limits.shared_per_block,
        "shared_per_sm": limits.shared_per_sm,
        "max_registers_per_thread": limits.max_registers_per_thread,
        "max_warps_per_sm": limits.max_warps_per_sm,
        "max_threads_per_block": limits.max_threads_per_block,
    }


def resolve_budget(budget: int | float | None, strategy: str, candidates: int) -> int:
    """A count of configs to time: an int as given, a float in (0, 1] as a fraction of the
    candidates, None as a quarter of them (at least 8); exhaustive times them all."""
    if strategy == "exhaustive" or candidates == 0:
        return candidates
    if budget is None:
        wanted = max(MIN_DEFAULT_BUDGET, math.ceil(DEFAULT_BUDGET_FRACTION * candidates))
    elif isinstance(budget, float):
        if not 0.0 < budget <= 1.0:
            raise ValueError(f"budget fraction {budget!r} must be in (0, 1]")
        wanted = math.ceil(budget * candidates)
    else:
        if budget < 1:
            raise ValueError(f"budget {budget!r} must be at least 1 config")
        wanted = int(budget)
    return max(1, min(wanted, candidates))


@dataclass
class TuneResult:
    tunable: str
    problem: Problem
    arch: str
    space_size: int
    legal: int
    rejected_by: dict[str, int]
    prune: PruneReport | None
    method: str  # "measured" | "static-estimate"
    ranking: list[Candidate] = field(default_factory=list)  # static order, best first
    strategy: str | None = None
    budget: int | None = None
    trials: list[Trial] = field(default_factory=list)
    best: Config | None = None
    best_ms: float | None = None
    significance: Significance | None = None
    search_seconds: float = 0.0
    entry: dict | None = None
    cache_path: Path | None = None
    stale_dropped: int = 0

    def lines(self, top: int = 5) -> list[str]:
        lines = [f"{self.tunable} {self.problem.label()} on {self.arch}"]
        rejected = ", ".join(f"{text!r} rejected {n}" for text, n in self.rejected_by.items() if n)
        lines.append(
            f"  space: {self.space_size} configs, {self.legal} satisfy the constraints"
            + (f" ({rejected})" if rejected else "")
        )
        if self.prune is not None:
            lines.extend("  " + line for line in self.prune.lines())
        if self.method == "static-estimate":
            gpu = reference_gpu(self.arch)
            model = f"wave-quantised tile roofline on a {gpu}" if gpu else "no reference GPU: by occupancy"
            lines.append(
                f"  ESTIMATE, not a measurement (no GPU timed these; {model}). Best {min(top, len(self.ranking))} "
                "by the estimate:"
            )
            for rank, candidate in enumerate(self.ranking[:top], 1):
                lines.append(f"    {rank}. {candidate.config.label()}  {_static_text(candidate)}")
            return lines
        timed = [t for t in self.trials if t.ok]
        failed = [t for t in self.trials if not t.ok]
        lines.append(
            f"  {self.strategy} search: timed {len(self.trials)} of {len(self.ranking)} candidates "
            f"({len(failed)} failed to run) in {self.search_seconds:.1f} s"
        )
        for trial in failed[:3]:
            lines.append(f"    failed: {trial.config.label()}: {trial.error}")
        for rank, trial in enumerate(sorted(timed, key=lambda t: t.median_ms)[:top], 1):
            lines.append(
                f"    {rank}. {trial.config.label()}  {format_ms(trial.median_ms)}"
                + (" (noisy)" if trial.noisy else "")
            )
        if self.best is not None:
            lines.append(f"  best: {self.best.label()}  {format_ms(self.best_ms)}")
        if self.significance is not None:
            lines.append(f"  {self.significance.line()}")
        if self.entry is not None:
            lines.append(
                f"  cached in {self.cache_path} as {key_of(self.entry)!r}"
                + (f" (dropped {self.stale_dropped} entries of an older kernel source)" if self.stale_dropped else "")
            )
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "kernel": self.tunable,
            "problem": self.problem.to_json(),
            "arch": self.arch,
            "method": self.method,
            "space_size": self.space_size,
            "legal": self.legal,
            "rejected_by_constraint": self.rejected_by,
            "prune": self.prune.to_json() if self.prune else None,
            "ranking": [
                {"config": c.config.to_json(), "estimate_ms": _finite(c.estimate_ms), **_static_fields(c.record)}
                for c in self.ranking
            ],
            "strategy": self.strategy,
            "budget": self.budget,
            "trials": [t.to_json() for t in self.trials],
            "best": self.best.to_json() if self.best else None,
            "best_ms": self.best_ms,
            "significance": self.significance.to_json() if self.significance else None,
            "search_seconds": round(self.search_seconds, 3),
            "entry": self.entry,
        }


def _finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None


def _static_fields(record: dict) -> dict:
    return {key: record.get(key) for key in ("registers", "spill_bytes", "shared_bytes", "occupancy", "limiter")}


def _static_text(candidate: Candidate) -> str:
    record = candidate.record
    estimate = candidate.estimate_ms
    est = "est ?" if estimate is None else f"est {format_ms(estimate)}"
    occupancy = record.get("occupancy")
    shared = record.get("shared_bytes")
    return (
        f"{est}  occ {'?' if occupancy is None else f'{occupancy:.1%}'}  regs {record.get('registers')}  "
        f"smem {'?' if shared is None else f'{shared / 1024:.1f} KiB'}"
    )


def _rank(candidates: list[Candidate]) -> list[Candidate]:
    """Best first: lowest estimate, then highest occupancy, then fewest registers."""

    def key(candidate: Candidate):
        record = candidate.record
        estimate = candidate.estimate_ms
        return (
            math.inf if estimate is None else estimate,
            -(record.get("occupancy") or 0.0),
            record.get("registers") or 0,
        )

    return sorted(candidates, key=key)


def tune(
    tunable: Tunable,
    problem: Problem,
    arch: str,
    *,
    strategy: str = "exhaustive",
    budget: int | float | None = None,
    seed: int = 0,
    static_pruning: bool = True,
    rules: PruneRules | None = None,
    analysis_cache: Path | str | None = None,
    jobs: int = 1,
    timer_factory: TimerFactory | None = None,
    measure_budget: sampling.Budget = TUNING_BUDGET,
    clock: Callable[[], float] = time.perf_counter,
    confirm_runs: int = 3,
    cache: TuningCache | None = None,
    device_name: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> TuneResult:
    """Tune ``tunable`` for ``problem`` on ``arch`` (see the module doc).

    Raises ``space.SpaceError`` for an empty or contradictory space, ``StrategyError`` for a
    strategy that cannot run, ``TuningError`` when nothing is left to time or rank. A config
    that fails to compile or to run is recorded and skipped.
    """
    if timer_factory is not None:
        check_strategy(strategy)  # fail before minutes of compiling, not after
    enumeration = tunable.space(problem).enumerate({**problem.context(), **arch_context(arch)})
    report = None
    if static_pruning or timer_factory is None:
        report = prune(
            tunable,
            problem,
            enumeration.legal,
            arch,
            rules=rules,
            analysis_cache=analysis_cache,
            jobs=jobs,
            progress=progress,
        )
        for candidate in report.kept:
            candidate.estimate_ms = estimate_ms(tunable.work(candidate.config, problem), candidate.record, arch)
        candidates = _rank(report.kept)
    else:
        candidates = [Candidate(config=config, record={}) for config in enumeration.legal]
    result = TuneResult(
        tunable=tunable.name,
        problem=problem,
        arch=arch,
        space_size=enumeration.size,
        legal=len(enumeration.legal),
        rejected_by=enumeration.rejected_by,
        prune=report,
        method="static-estimate" if timer_factory is None else "measured",
        ranking=candidates,
    )
    if not candidates:
        raise _all_pruned(tunable, problem, arch, report)
    if timer_factory is None:
        result.best = candidates[0].config
        return result
    evaluator = Evaluator(timer_factory, measure_budget, clock=clock)
    _search_and_confirm(result, candidates, evaluator, strategy=strategy, budget=budget, seed=seed,
                        confirm_runs=confirm_runs)  # fmt: skip
    if cache is not None:
        result.entry = _entry(tunable, problem, arch, result, device_name)
        result.stale_dropped = cache.record(result.entry)
        result.cache_path = cache.path
    return result


def _all_pruned(tunable: Tunable, problem: Problem, arch: str, report) -> TuningError:
    """The error when static pruning left nothing: what removed how many, one example, the fix."""
    by_rule = {rule: stats.removed for rule, stats in report.rules.items() if stats.removed}
    removed = ", ".join(f"{rule} {count}" for rule, count in by_rule.items())
    example = report.removed[0]
    # Loosening the rules frees configs the rules removed, never ones that did not compile.
    fix = (
        "No config compiles for this problem: a shape or dtype the kernel cannot take (the error says "
        "which), or the kernel itself (`tesserabench inspect` shows the whole error)"
        if set(by_rule) == {"compile"}
        else "Loosen the rules (--min-occupancy 0, --allow-spills) or change the space"
    )
    return TuningError(
        f"{tunable.name} {problem.label()} on {arch}: static pruning removed all {len(report.removed)} "
        f"configs ({removed}); e.g. {example.config.label()}: {example.reason}. {fix}"
    )


def _search_and_confirm(result: TuneResult, candidates: list[Candidate], evaluator: Evaluator, *, strategy: str,
                        budget, seed: int, confirm_runs: int) -> None:  # fmt: skip
    """Time ``candidates`` with ``strategy`` (the best-estimated ones first, as seeds, where the
    static analysis ranked them), then the best against the runner-up; into ``result``."""
    result.strategy = strategy
    result.budget = resolve_budget(budget, strategy, len(candidates))
    has_estimates = any(c.estimate_ms is not None for c in candidates)
    result.trials = search(
        strategy,
        [c.config for c in candidates],
        evaluator,
        budget=result.budget,
        seed=seed,
        seeds=[c.config for c in candidates[:SEEDS]] if has_estimates else (),
    )
    timed = sorted((t for t in result.trials if t.ok), key=lambda t: t.median_ms)
    if not timed:
        first = result.trials[0]
        raise TuningError(
            f"{result.tunable} {result.problem.label()} on {result.arch}: all {len(result.trials)} timed configs "
            f"failed to run; e.g. {first.config.label()}: {first.error}"
        )
    result.best, result.best_ms = timed[0].config, timed[0].median_ms
    if confirm_runs > 0:
        runner_up = timed[1].config if len(timed) > 1 else None
        result.significance = compare_best(evaluator, result.best, runner_up, runs=confirm_runs)
    result.search_seconds = evaluator.seconds


def _entry(tunable: Tunable, problem: Problem, arch: str, result: TuneResult, device_name: str | None) -> dict:
    return {
        "kernel": tunable.name,
        "tunable": tunable.ref,
        "source_hash": kernel_source_hash(tunable.kernel()),
        "bucket": dict(tunable.bucket(problem)),
        "shape": dict(problem.shape),
        "dtypes": list(problem.dtypes),
        "arch": arch,
        "triton": triton_version(),
        "device": device_name,
        "config": result.best.to_json(),
        "median_ms": result.best_ms,
        "method": "measured",
        "strategy": result.strategy,
        "timed": len(result.trials),
        "candidates": len(result.ranking),
        "legal": result.legal,
        "space_size": result.space_size,
        "pruned": len(result.prune.removed) if result.prune else None,
        "significance": result.significance.to_json() if result.significance else None,
        "search_seconds": round(result.search_seconds, 3),
        "tuned_at": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


__all__ = ["TuneResult", "TuningError", "arch_context", "resolve_budget", "tune"]
