"""Baseline files: ``<root>/<NAME>/<machine-key>.json`` (docs/usage.md, "The run file").

A baseline file is ``{"schema": 1, "name": NAME, "machine_key": KEY, "runs": [run, ...]}`` with
sorted keys and two-space indent, so a change reads well in review. Runs keep round medians, never
raw samples or verdicts. Writes go through ``files.write_atomic`` under a lock file next to the
baseline, so an interrupted run or parallel savers never leave a half-written file, and temporary
files of a killed saver are removed by the next one. A file that is not ours to understand is an
error naming it, and is never overwritten.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pytest_tesserabench.options import parse_name
from pytest_tesserabench.record import files, held_lock
from pytest_tesserabench.record.results import SCHEMA, DocumentError, RunDocument, fresh_runs

DEFAULT_HISTORY = 10
LOCK_TIMEOUT_S = 600.0  # --bench-lock-timeout's default


class BaselineError(Exception):
    """A baseline name, file or run that cannot be used; the message names the culprit and the fix."""


class BaselineLocked(BaselineError):
    """Another process held the baseline's lock past the allowed wait; nothing was written, and
    the run is still whole to be saved later."""


def validate_name(name: str, *, what: str = "baseline name") -> str:
    try:
        return parse_name(name)
    except ValueError as exc:
        raise BaselineError(f"{what} {name!r} is not allowed: it {exc}") from None


def baseline_path(root: Path, name: str, machine_key: str) -> Path:
    validate_name(name)
    validate_name(machine_key, what="machine key")
    return Path(root) / name / f"{machine_key}.json"


def baseline_names(root: Path) -> list[str]:
    """The baselines recorded under ``root`` (folders holding at least one machine's file)."""
    root = Path(root)
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if p.is_dir() and any(p.glob("*.json")))


def machine_files(root: Path, name: str) -> list[Path]:
    """Every machine's file of baseline ``name``."""
    folder = Path(root) / validate_name(name)
    return sorted(folder.glob("*.json")) if folder.is_dir() else []


@dataclass
class Baseline:
    name: str
    machine_key: str
    runs: list[RunDocument] = field(default_factory=list)
    path: Path | None = None
    other: dict[str, Any] = field(default_factory=dict)  # keys a newer version wrote, written back as they were

    def to_json(self) -> dict:
        return {
            **self.other,
            "schema": SCHEMA,
            "name": self.name,
            "machine_key": self.machine_key,
            "runs": [run.to_json(samples=False) for run in self.runs],
        }

    @property
    def latest_machine(self) -> dict:
        return self.runs[-1].machine if self.runs else {}


def _parse_baseline(path: Path, data: Any, machine_key: str | None) -> Baseline:
    if not isinstance(data, dict) or "runs" not in data:
        raise BaselineError(
            f"{path}: not a TesseraBench baseline (expected an object with 'schema', 'machine_key' "
            "and 'runs'); move it away or restore it from version control"
        )
    if data.get("schema") != SCHEMA:
        raise BaselineError(
            f"{path}: schema {data.get('schema')!r}, this pytest-tesserabench reads schema {SCHEMA}; "
            "use the matching pytest-tesserabench version or re-record the baseline"
        )
    key = data.get("machine_key")
    if not isinstance(key, str):
        raise BaselineError(f"{path}: 'machine_key' is {key!r}, not a string; restore the file from version control")
    try:
        parse_name(key)  # it names the file, so it must be a plain file name
    except ValueError as exc:
        raise BaselineError(
            f"{path}: 'machine_key' {key!r} is not a machine key (it {exc}); "
            f"set it to the file's own name, {path.stem!r}, or restore the file from version control"
        ) from None
    if machine_key is not None and key != machine_key:
        raise BaselineError(
            f"{path}: holds a baseline for machine {key!r}, not {machine_key!r}; "
            f"the file is misplaced: move it to {path.with_name(key + '.json')}"
        )
    name = data.get("name", path.parent.name)
    if not isinstance(name, str):
        raise BaselineError(f"{path}: 'name' is {name!r}, not a string; restore the file from version control")
    runs = data["runs"]
    if not isinstance(runs, list):
        raise BaselineError(f"{path}: 'runs' is not a list; restore the file from version control")
    try:
        # Numbered from 1, as `tesserabench show` numbers them.
        parsed = [RunDocument.from_json(run, f"run {i}") for i, run in enumerate(runs, 1)]
    except DocumentError as exc:
        raise BaselineError(
            f"{path}: {exc}; fix that value (or delete that run) by hand, or restore the file from version control"
        ) from None
    other = {k: v for k, v in data.items() if k not in ("schema", "name", "machine_key", "runs")}
    return Baseline(name=name, machine_key=key, runs=parsed, path=path, other=other)


def load_baseline(path: Path, *, machine_key: str | None) -> Baseline | None:
    """The validated baseline at ``path``; None if there is none. BaselineError if unusable."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return None
    try:
        data = files.read_json(path, "baseline")
    except files.FileProblem as exc:
        raise BaselineError(str(exc)) from None
    return _parse_baseline(path, data, machine_key)


def save_run(
    root: Path,
    name: str,
    machine_key: str,
    run: RunDocument,
    *,
    history: int = DEFAULT_HISTORY,
    lock_timeout: float = LOCK_TIMEOUT_S,
    say: Callable[[str], None] = print,
    lock_option: str = "--bench-lock-timeout",
) -> Path:
    """Append ``run`` (without samples and verdicts) to baseline NAME for this machine, keeping
    the last ``history`` runs of each benchmark (``kept_runs``). The baseline's lock is waited for
    at most ``lock_timeout`` seconds (``say`` names its holder after a few); past it,
    BaselineLocked, whose message names ``lock_option`` as the way to wait longer."""
    return save_runs(
        root, name, machine_key, [run], history=history, lock_timeout=lock_timeout, say=say, lock_option=lock_option
    )


def save_runs(
    root: Path,
    name: str,
    machine_key: str,
    new: list[RunDocument],
    *,
    history: int = DEFAULT_HISTORY,
    lock_timeout: float = LOCK_TIMEOUT_S,
    say: Callable[[str], None] = print,
    lock_option: str = "--bench-lock-timeout",
    by_date: bool = False,
) -> Path:
    """``save_run`` for several runs at once, in one write; ``by_date``: the baseline's runs and
    these in the order they started (runs imported from another tool's history are older than
    the ones saved here)."""
    path = baseline_path(root, name, machine_key)
    if not isinstance(history, int) or history < 1:
        raise BaselineError(f"bench_history={history!r} is invalid: it must be a whole number >= 1 (default 10)")
    entries = [run.for_baseline() for run in new]
    for entry in entries:
        try:
            files.dumps(entry.to_json(samples=False))
        except (TypeError, ValueError) as exc:
            raise BaselineError(f"{path}: the run to save is not plain JSON ({exc}); nothing was written") from exc
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        lock = files.lock_for(path)
        held_lock.acquire(lock, timeout=lock_timeout, say=say, what=f"the lock of baseline {path}", option=lock_option)
        try:
            files.remove_stale_temporaries(path)
            existing = load_baseline(path, machine_key=machine_key)  # raises on a bad file: never overwritten
            runs = [*(existing.runs if existing else []), *entries]
            if by_date:
                runs.sort(key=lambda run: run.started or "")  # (stable: undated runs keep their order, first)
            runs = kept_runs(runs, history)
            other = existing.other if existing else {}
            files.write_json(path, Baseline(name, machine_key, runs, other=other).to_json())
        finally:
            held_lock.release(lock)
    except held_lock.LockWaitTimeout as exc:
        raise BaselineLocked(f"{exc}. Nothing was written") from None
    except OSError as exc:
        raise BaselineError(f"{path}: cannot be written ({exc.strerror or exc}); nothing was written") from None
    return path


def kept_runs(runs: list[RunDocument], history: int) -> list[RunDocument]:
    """The runs (oldest first) among which each benchmark's last ``history`` are: a run goes when
    every benchmark in it has ``history`` newer runs. Trimmed by run count, ten saves of one
    benchmark (``-k``) would push every other benchmark out of the baseline."""
    newer: dict[str, int] = {}
    kept = []
    for run in reversed(runs):
        if any(newer.get(bench_id, 0) < history for bench_id in run.benchmarks):
            kept.append(run)
        for bench_id in run.benchmarks:
            newer[bench_id] = newer.get(bench_id, 0) + 1
    return kept[::-1]


# A saved benchmark this many times slower or faster than the processes it is compared with is
# worth a warning: a machine busy for one run puts a figure into the history that widens every
# later verdict's noise.
OUTLYING_FACTOR = 1.5


@dataclass(frozen=True)
class Outlying:
    """A saved benchmark far from what measured it elsewhere: ``now`` (this run's own process)
    against ``typical``, the median of ``against``."""

    bench_id: str
    now: float  # ms
    typical: float  # ms
    against: str  # "runs": the sessions of every run; "run": the one earlier run; "fresh": this run's fresh processes
    crowded: str | None = None  # how other processes crowded out its threads in this run (gate.conditions)

    @property
    def ratio(self) -> float:
        return self.now / self.typical

    def blame(self) -> str:
        """Which run the figure says was disturbed, in words."""
        if self.crowded is not None:
            return (
                f"{self.crowded}: a multi-threaded benchmark's threads waited for CPUs other processes held; record "
                "a new baseline under --bench-threads=1 and compare with it (one thread: no waiting), or record again "
                "on a quiet runner"
            )
        if self.against == "run":
            return (
                "this run and the baseline's one earlier run disagree: one of them was timed on a busy machine, "
                "or the benchmark's speed differs from process to process (more saves will tell)"
            )
        if self.against == "fresh":
            if self.ratio > 1:
                return (
                    "this run's own process was slowed while it measured (a busy machine), "
                    "or the tests before it leave it slower"
                )
            return (
                "this run's fresh processes read it slower: the machine was busy while they measured, "
                "or the tests before it leave it faster in this run's own process"
            )
        if self.ratio > 1:
            return "unless its code changed, the machine was busy during this run: record again on a quiet one"
        return "the baseline's earlier runs read it slower: unless its code changed, they were timed on a busy machine"


def outlying(run: RunDocument, earlier: list[RunDocument]) -> list[Outlying]:
    """Each gated benchmark of ``run`` whose own process read it OUTLYING_FACTOR or more from
    what measured it elsewhere, either way, compared like with like: with the runs' own
    processes (this one's among them: of two earlier runs, one busy one would otherwise make the
    next, quiet save read as the outlier); with the one earlier run's (which of the two is off,
    nobody knows); on a first save, with this run's fresh processes. (A run's own process and its
    fresh ones may differ steadily, e.g. in what the tests before leave behind: they are not
    compared where earlier runs exist.)"""
    fresh = fresh_runs(run)
    out = []
    for bench_id, record in sorted(run.benchmarks.items()):
        now = record.median_ms
        if not now or not record.timing_gated:
            continue
        kept = [r.benchmarks[bench_id] for r in earlier if bench_id in r.benchmarks]
        sessions = [ms for r in kept if r.timing_gated and (ms := r.median_ms)]  # (not pytest-benchmark's)
        if len(sessions) >= 2:
            against, values = "runs", [*sessions, now]
        elif sessions:
            against, values = "run", sessions
        else:
            against, values = (
                "fresh",
                [ms for r in fresh if bench_id in r.benchmarks and (ms := r.benchmarks[bench_id].median_ms)],
            )
        if not values:
            continue
        typical = statistics.median(values)
        if max(now / typical, typical / now) >= OUTLYING_FACTOR:
            crowded = crowded_out(record, earlier) if now > typical and against != "fresh" else None
            out.append(Outlying(bench_id, now, typical, against, crowded))
    return out


def crowded_out(record, earlier: list[RunDocument]) -> str | None:
    """gate.conditions.crowded_out of a saved record against the earlier runs: a multi-threaded
    benchmark slowed by other processes' work, not by the machine's speed."""
    from pytest_tesserabench.gate import conditions
    from pytest_tesserabench.gate.config import GateConfig

    return conditions.crowded_out(record, earlier, GateConfig())


# A save measures a benchmark in fresh processes (--bench-save-processes) only while its baseline
# holds fewer process draws than this, the save's own process included: three saves of three
# processes. Beyond, each save is one more draw anyway (a new process), and the fresh ones would
# triple its cost for what the history already knows: in the simulation of the whole pipeline,
# ten single-process saves judged as well as three saves of three processes.
SAVE_DRAWS = 9


def process_draws(runs: list[RunDocument], history: int) -> dict[str, int]:
    """Per benchmark whose timings the gate judges, the processes that will have measured it in
    the baseline once one more save of it is kept: that save's own process, and every process
    (each run's own and its fresh ones) of its newest ``history`` - 1 earlier runs. (A timing the
    gate never judges, the interpreter's, is measured in no fresh process, so it never has enough:
    counted, it would keep the save's header promising fresh processes that never start.)"""
    draws: dict[str, int] = {}
    runs_of: dict[str, int] = {}
    for run in reversed(runs):
        for bench_id, record in run.benchmarks.items():
            if runs_of.get(bench_id, 0) >= history - 1:
                continue
            runs_of[bench_id] = runs_of.get(bench_id, 0) + 1
            if record.timing_gated:  # (nor are pytest-benchmark's imported runs draws of this plugin's timings)
                draws[bench_id] = draws.get(bench_id, 1) + 1 + len(record.confirm or [])
    return draws


def load_runs(path: Path) -> list[RunDocument]:
    """The runs in a ``--bench-json`` result file (one) or a baseline file (its history)."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        raise BaselineError(f"{path}: no such file; give a --bench-json result or a baselines/NAME/KEY.json file")
    try:
        data = files.read_json(path, "result or baseline file")
    except files.FileProblem as exc:
        raise BaselineError(str(exc)) from None
    if isinstance(data, dict) and "runs" in data:
        return list(_parse_baseline(path, data, None).runs)
    if isinstance(data, dict) and "benchmarks" in data:
        try:
            return [RunDocument.from_json(data, "the run")]
        except DocumentError as exc:
            raise BaselineError(f"{path}: {exc}") from None
    raise BaselineError(
        f"{path}: neither a TesseraBench result (--bench-json) nor a baseline file "
        "(expected 'benchmarks' or 'runs' at the top level)"
    )
