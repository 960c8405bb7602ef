"""Static pruning: compile every candidate for the target (no GPU) and drop the ones that
cannot be fast, before a GPU second is spent on them.

Each config is compiled ahead of time with the static analysis (``pytest_tesserabench.inspect``:
TTIR .. cubin, registers, spills, shared memory, occupancy). Its records go to the analysis cache,
keyed on everything that changes the binary, so a config is compiled once per Triton version,
kernel source and target; a warm run only reads the cache. The rules, applied in this order
(each removes from what the previous ones kept, so every removed config has one reason):

1. ``compile``: the config does not compile for the target (the compiler's message is kept);
2. ``shared_memory``: it needs more shared memory per block than the target has (it could not
   launch: Triton raises OutOfResources at load time);
3. ``spills``: ptxas spilled registers to local memory;
4. ``occupancy``: fewer resident warps per SM than the floor. The default floor is one warp per
   warp scheduler (4 of 64 warps, 6.25% on sm_80/sm_90): below it a scheduler idles all the time.

Per rule the report counts the configs removed and the analysis seconds spent on them.
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_tesserabench.inspect.analysis import ANALYSER_VERSION, analyse_launches
from pytest_tesserabench.inspect.archs import ARCH_LIMITS
from pytest_tesserabench.inspect.cli import _default_cache_dir
from pytest_tesserabench.inspect.compile import cache_key

from .space import Config
from .tunable import Problem, Tunable, load_tunable

RULES = ("compile", "shared_memory", "spills", "occupancy")


def default_analysis_cache() -> Path:
    """The static analysis's own cache (shared with ``tesserabench inspect`` and ``--bench``)."""

    return Path(_default_cache_dir())


def default_min_occupancy(arch: str) -> float:
    """One warp per scheduler: the SM's sub-partitions over its warp slots."""

    limits = ARCH_LIMITS[arch]
    return limits.register_sub_partitions / limits.max_warps_per_sm


@dataclass(frozen=True)
class PruneRules:
    shared_memory: bool = True
    spills: bool = True
    min_occupancy: float | None = None  # None: default_min_occupancy(arch); 0 switches the rule off

    def __post_init__(self) -> None:
        if self.min_occupancy is not None and not 0.0 <= self.min_occupancy <= 1.0:
            raise ValueError(f"min_occupancy={self.min_occupancy!r} must be a fraction in [0, 1] (e.g. 0.0625)")


@dataclass
class Candidate:
    """A config that survived pruning, with its static record (registers, occupancy, ...)."""

    config: Config
    record: dict
    estimate_ms: float | None = None


@dataclass(frozen=True)
class Removed:
    config: Config
    rule: str
    reason: str


@dataclass
class RuleStats:
    removed: int = 0
    seconds: float = 0.0  # analysis time spent on the configs this rule removed


@dataclass
class PruneReport:
    arch: str
    min_occupancy: float
    kept: list[Candidate] = field(default_factory=list)
    removed: list[Removed] = field(default_factory=list)
    rules: dict[str, RuleStats] = field(default_factory=lambda: {rule: RuleStats() for rule in RULES})
    compiled: int = 0  # analyses that compiled
    cached: int = 0  # analyses read from the analysis cache
    seconds: float = 0.0  # wall time of the whole pruning

    def lines(self) -> list[str]:
        total = len(self.kept) + len(self.removed)
        head = (
            f"static pruning for {self.arch}: {len(self.kept)} of {total} configs kept in {self.seconds:.1f} s "
            f"({self.compiled} compiled, {self.cached} from the analysis cache)"
        )
        lines = [head]
        for rule in RULES:
            stats = self.rules[rule]
            what = {
                "compile": "failed to compile",
                "shared_memory": "need more shared memory than a block may have",
                "spills": "spill registers",
                "occupancy": f"keep fewer warps resident than {self.min_occupancy:.2%} occupancy",
            }[rule]
            lines.append(f"  {rule:14s} removed {stats.removed:4d}  ({what}; {stats.seconds:.1f} s of analysis)")
        return lines

    def to_json(self) -> dict[str, Any]:
        return {
            "arch": self.arch,
            "min_occupancy": self.min_occupancy,
            "kept": len(self.kept),
            "rules": {rule: {"removed": s.removed, "seconds": round(s.seconds, 3)} for rule, s in self.rules.items()},
            "removed": [{"config": r.config.to_json(), "rule": r.rule, "reason": r.reason} for r in self.removed],
            "compiled": self.compiled,
            "cached": self.cached,
            "seconds": round(self.seconds, 3),
        }


def compile_reason(error: str) -> str:
    """One line of a compiler error: ptxas's "fatal" line, else the error type and the last
    line (Triton's CompilationError ends with the reason, after the source excerpt)."""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()] or ["unknown error"]
    fatal = next((line for line in lines if "fatal" in line), None)
    if fatal:
        return fatal[:200]
    kind = lines[0].split(":", 1)[0] if ":" in lines[0] else ""
    last = lines[-1]
    return (f"{kind}: {last}" if kind and len(lines) > 1 and not last.startswith(kind) else last)[:200]


def verdict(record: dict, arch: str, rules: PruneRules, min_occupancy: float) -> tuple[str, str] | None:
    """(rule, reason) when ``record`` must be dropped, None when it stays."""

    if record.get("error"):
        return "compile", compile_reason(str(record["error"]))
    limits = ARCH_LIMITS[arch]
    shared = record.get("shared_bytes")
    if rules.shared_memory and shared is not None and shared > limits.shared_per_block:
        return "shared_memory", (
            f"needs {shared / 1024:.1f} KiB of shared memory; {arch} allows {limits.shared_per_block / 1024:.0f} KiB "
            "per block"
        )
    spills = record.get("spill_bytes")
    if rules.spills and spills:
        return "spills", f"spills {spills} bytes of registers ({record.get('registers')} registers per thread)"
    occupancy = record.get("occupancy")
    if occupancy is not None and occupancy < min_occupancy:
        return "occupancy", (
            f"occupancy {occupancy:.2%} ({record.get('active_warps')} warps per SM, limited by "
            f"{record.get('limiter')}) is below the floor {min_occupancy:.2%}"
        )
    return None


def prune(
    tunable: Tunable,
    problem: Problem,
    configs: Sequence[Config],
    arch: str,
    *,
    rules: PruneRules | None = None,
    analysis_cache: Path | str | None = None,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
) -> PruneReport:
    """Compile each config for ``arch`` and keep the ones no rule removes (see module doc).

    ``jobs > 1`` compiles in that many worker processes (the tunable must then be importable by
    its ``ref``, as one loaded by ``load_tunable`` is). A config that fails to compile is removed
    with the compiler's message; nothing here raises for a bad config.
    """
    rules = rules or PruneRules()
    floor = default_min_occupancy(arch) if rules.min_occupancy is None else rules.min_occupancy
    report = PruneReport(arch=arch, min_occupancy=floor)
    cache = Path(analysis_cache) if analysis_cache is not None else None
    start = time.perf_counter()
    for index, (config, (record, seconds, source)) in enumerate(
        zip(configs, _analyse_all(tunable, problem, configs, arch, cache, jobs))
    ):
        report.cached += source == "cache"
        report.compiled += source == "compile"
        dropped = verdict(record, arch, rules, floor)
        if dropped is None:
            report.kept.append(Candidate(config=config, record=record))
        else:
            rule, reason = dropped
            report.removed.append(Removed(config=config, rule=rule, reason=reason))
            report.rules[rule].removed += 1
            report.rules[rule].seconds += seconds
        if progress is not None:
            progress(index + 1, len(configs))
    report.seconds = time.perf_counter() - start
    return report


def _analyse_all(tunable, problem, configs, arch, cache, jobs):
    if jobs <= 1 or len(configs) < 2:
        for config in configs:
            yield analyse_config(tunable, problem, config, arch, cache)
        return
    if tunable.ref is None:
        raise ValueError(
            f"tunable {tunable.name} has no import reference, so worker processes cannot load it; "
            "load it with load_tunable('module:NAME') or use jobs=1"
        )
    # Configs already in the analysis cache are read here (a millisecond each); only the ones to
    # compile go to workers, which each pay Triton's import and start-up first.
    results: list = [None] * len(configs)
    to_compile = []
    for index, config in enumerate(configs):
        if cache is not None and _cached(tunable, problem, config, arch, cache):
            results[index] = analyse_config(tunable, problem, config, arch, cache)
        else:
            to_compile.append(index)
    if len(to_compile) > 1:
        # spawn, not fork: the parent may hold CUDA or Triton state that a forked child must not share.
        context = multiprocessing.get_context("spawn")
        workers = min(jobs, len(to_compile))
        with concurrent.futures.ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            futures = {
                index: pool.submit(
                    _analyse_in_worker, tunable.ref, configs[index].to_json(), problem.to_json(), arch, cache
                )
                for index in to_compile
            }
            for index, future in futures.items():
                results[index] = future.result()
    else:
        for index in to_compile:
            results[index] = analyse_config(tunable, problem, configs[index], arch, cache)
    yield from results


def _cached(tunable, problem, config, arch, cache: Path) -> bool:
    try:
        launch = tunable.specialize(config, problem)
    except Exception:  # noqa: BLE001 - analyse_config reports a config the kernel refuses
        return False
    return _launch_cached(launch, arch, cache)


def _launch_cached(launch, arch: str, cache: Path) -> bool:
    """Whether the analysis cache holds this launch's record for ``arch``."""

    try:
        key = cache_key(launch, arch, ANALYSER_VERSION)
    except Exception:  # noqa: BLE001 - the analysis handles an unhashable kernel itself
        return False
    return (cache / key[:2] / key / "record.json").is_file()


def _analyse_in_worker(ref: str, config: dict, problem: dict, arch: str, cache: Path | None):
    return analyse_config(load_tunable(ref), Problem.from_json(problem), Config(config), arch, cache)


def analyse_config(
    tunable: Tunable, problem: Problem, config: Config, arch: str, cache: Path | None
) -> tuple[dict, float, str]:
    """(static record, seconds spent, where it came from: "cache", "compile" or "specialize",
    the last when the kernel refused the config before any compile)."""

    start = time.perf_counter()
    try:
        launch = tunable.specialize(config, problem)
    except Exception as error:  # noqa: BLE001 - a config the kernel cannot take is a per-config result
        return {"error": f"{type(error).__name__}: {error}"}, time.perf_counter() - start, "specialize"
    hit = cache is not None and _launch_cached(launch, arch, cache)
    (record,) = analyse_launches([launch], [arch], cache_dir=cache)
    return record, time.perf_counter() - start, "cache" if hit else "compile"


def worker_count(jobs: int | None) -> int:
    """``None`` or 0: one per CPU the process may use."""
    if jobs:
        return max(1, int(jobs))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


__all__ = [
    "RULES",
    "Candidate",
    "PruneReport",
    "PruneRules",
    "Removed",
    "RuleStats",
    "analyse_config",
    "default_analysis_cache",
    "default_min_occupancy",
    "prune",
    "verdict",
]
