"""Runs saved by pytest-benchmark, made into a baseline's history (``tesserabench import
pytest-benchmark``), so a team that moves over keeps its history on the first day.

pytest-benchmark saves a run (``--benchmark-autosave``, ``--benchmark-save=NAME``) as
``.benchmarks/<machine>/NNNN_<name>.json``: per test, its summary statistics in seconds, and the
time of every round only when saved with ``--benchmark-save-data`` (``stats.data``). Each file
becomes a run of the baseline, dated and attributed to its commit as pytest-benchmark recorded
them, each test a record whose rounds are pytest-benchmark's (or none, and its summary alone).

What the gate makes of them: they are another timer's figures (``TIMER``), shown in the
history (``tesserabench show``, the report's plots of the baseline), never compared with this
plugin's. pytest-benchmark times a round as one loop on the wall clock, sized by its own
calibration, while this plugin measures in interleaved passes, leaves the time the thread waited
for a CPU out, and judges a benchmark by its processes: the same code reads differently in the
two, so a comparison would report the difference of the tools as a change of the code. A test
whose baseline holds only imported runs is judged on its kernel figures alone until runs of this
plugin's own are saved beside them (``--bench-save``).
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from pathlib import Path
from typing import Any

from pytest_tesserabench.record.results import IMPORTED_TIMER, BenchRecord, RunDocument, Sampling, Stats

TIMER = IMPORTED_TIMER  # the timer of an imported record: shown, never gated (results.UNGATED_TIMERS)
TOOL = "pytest-benchmark"
_SAVED_NAME = re.compile(r"^\d{4}_.*\.json$")  # how pytest-benchmark names a saved run


class NotSavedRuns(ValueError):
    """A file or folder that is not pytest-benchmark's saved runs; the message names it and the fix."""


def saved_files(path: Path) -> list[Path]:
    """The run files under ``path``: a ``.benchmarks`` folder (every machine folder in it), one
    machine folder, or one file; in pytest-benchmark's own order (by their number)."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise NotSavedRuns(f"{path}: no such file or folder; give pytest-benchmark's .benchmarks folder")
    found = sorted(p for p in path.rglob("*.json") if _SAVED_NAME.match(p.name))
    if not found:
        raise NotSavedRuns(
            f"{path}: no run saved by pytest-benchmark in it (files named NNNN_*.json, as "
            "--benchmark-autosave or --benchmark-save=NAME write them)"
        )
    return found


def read_run(path: Path) -> tuple[RunDocument, list[str]]:
    """One saved run as a RunDocument, and what it lacks (in words, once per kind)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise NotSavedRuns(f"{path}: cannot be read as JSON ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("benchmarks"), list):
        raise NotSavedRuns(f"{path}: not a run saved by pytest-benchmark (no 'benchmarks' list)")
    lacks: list[str] = []
    benchmarks: dict[str, BenchRecord] = {}
    for i, entry in enumerate(data["benchmarks"]):
        record = _record(entry, f"{path}: benchmarks[{i}]")
        if not record.rounds_ms:
            lacks.append("rounds (saved without --benchmark-save-data: the summary only)")
        benchmarks[record.id] = record
    machine = _machine(data.get("machine_info"))
    if "device" not in machine:
        lacks.append("the CPU model (pass --machine KEY to name the machine)")
    run = RunDocument(
        benchmarks=benchmarks,
        machine=machine,
        commit=_commit(data.get("commit_info")),
        started=_started(data.get("datetime")),
        measured_order=list(benchmarks),
        other={"imported_from": f"{TOOL} {data.get('version') or ''}".strip(), "imported_file": path.name},
    )
    return run, list(dict.fromkeys(lacks))


def _record(entry: Any, where: str) -> BenchRecord:
    if not isinstance(entry, dict) or not isinstance(entry.get("stats"), dict):
        raise NotSavedRuns(f"{where}: not a benchmark of pytest-benchmark (no 'stats')")
    nodeid = entry.get("fullname")
    if not isinstance(nodeid, str) or not nodeid:
        raise NotSavedRuns(f"{where}: no 'fullname' (the test's node id)")
    stats = entry["stats"]
    iterations = stats.get("iterations") if isinstance(stats.get("iterations"), int) else 1
    data = stats.get("data")
    rounds = [_ms(x, f"{where}.stats.data") for x in data] if isinstance(data, list) else []
    params = entry.get("params") if isinstance(entry.get("params"), dict) else {}
    return BenchRecord(
        nodeid=nodeid,
        name=None,
        group=entry.get("group") if isinstance(entry.get("group"), str) else nodeid.split("[", 1)[0],
        timer=TIMER,
        rounds_ms=rounds,
        stats=_stats(stats, rounds, where),
        params={str(k): _plain(v) for k, v in params.items()},
        sampling=Sampling(inner_loops=max(iterations, 1), passes=1),
        extra_info=entry.get("extra_info") if isinstance(entry.get("extra_info"), dict) else {},
        outcome=None,  # pytest-benchmark keeps a benchmark whose function ran, not whether its test passed
    )


def _plain(value: Any) -> Any:
    """A parameter's value as the record keeps it (its repr where it is not a JSON scalar)."""
    return value if isinstance(value, (str, int, float, bool)) or value is None else repr(value)


def _stats(stats: dict, rounds: list[float], where: str) -> Stats:
    """Ours, from pytest-benchmark's summary (seconds) where it kept no rounds: its median, and
    the median's approximate 95% interval from its quartiles and round count, median +- 1.57 IQR /
    sqrt(n) (McGill, Tukey and Larsen's notch, as box plots draw it); without those, its min to
    max. With its rounds, ours from them."""
    if rounds:
        return Stats.of(rounds, rounds)
    median = _ms(stats.get("median"), f"{where}.stats.median")
    count = stats.get("rounds") if isinstance(stats.get("rounds"), int) else 0
    q1, q3 = (_ms(stats.get(k, stats.get("median")), f"{where}.stats.{k}") for k in ("q1", "q3"))
    low, high = (_ms(stats.get(k, stats.get("median")), f"{where}.stats.{k}") for k in ("min", "max"))
    mean = _ms(stats.get("mean", stats.get("median")), f"{where}.stats.mean")
    sd = _ms(stats.get("stddev", 0.0), f"{where}.stats.stddev")
    if count >= 2 and q3 > q1:
        half = 1.57 * (q3 - q1) / math.sqrt(count)
        interval = (max(median - half, 0.0), median + half)
    else:
        interval = (min(low, median), max(high, median))
    return Stats(
        median_ms=median,
        ci95_ms=interval,
        mean_ms=mean,
        min_ms=low,
        max_ms=high,
        iqr_ms=max(q3 - q1, 0.0),
        stdev_ms=sd,
        cv=sd / mean if mean > 0 else 0.0,
        rounds=count,
        samples=count,
    )


def _ms(seconds: Any, where: str) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not math.isfinite(seconds) or seconds < 0:
        raise NotSavedRuns(f"{where} is {seconds!r}: expected a time in seconds (a number >= 0)")
    return float(seconds) * 1e3


def _machine(info: Any) -> dict[str, Any]:
    """Our machine fields from pytest-benchmark's ``machine_info`` (py-cpuinfo's ``brand_raw`` is
    /proc/cpuinfo's model name, the same text this plugin keys CPU baselines by)."""
    if not isinstance(info, dict):
        return {}
    cpu = info.get("cpu") if isinstance(info.get("cpu"), dict) else {}
    machine: dict[str, Any] = {
        "arch": info.get("machine") or cpu.get("arch_string_raw") or "unknown",
        "python": info.get("python_version"),
        "cpu_count": cpu.get("count"),
        "hostname": info.get("node"),
        "gpu_count": 0,
    }
    brand = cpu.get("brand_raw") or info.get("processor")
    if isinstance(brand, str) and brand.strip():
        machine["device"] = brand.strip()
    return {k: v for k, v in machine.items() if v is not None}


def _commit(info: Any) -> dict[str, Any]:
    if not isinstance(info, dict):
        return {"sha": None, "branch": None, "dirty": None}
    sha = info.get("id")
    return {
        "sha": sha if isinstance(sha, str) and sha else None,
        "branch": info.get("branch") if isinstance(info.get("branch"), str) else None,
        "dirty": info.get("dirty") if isinstance(info.get("dirty"), bool) else None,
    }


def _started(text: Any) -> str | None:
    """pytest-benchmark's ISO time as ours (UTC, to the second)."""
    if not isinstance(text, str):
        return None
    try:
        moment = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=_dt.timezone.utc)
    return moment.astimezone(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
