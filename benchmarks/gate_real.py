"""The gate on a real machine: false alarms and detections of history mode, A/B mode and
pytest-benchmark's `median:5%` rule, on the same CPU workloads, quiet and under a background load.

    python benchmarks/gate_real.py                  # the full run (~50 minutes on 2 cores)
    python benchmarks/gate_real.py --reps 1 --quick # a smoke run of the mechanics

What it does, in a throwaway directory (nothing of this checkout is touched):
* a virtual environment with this plugin (editable) and pytest-benchmark (pytest-xdist not needed);
* a git repository of six pure-Python workloads (0.3-5 ms a call), as tests for both plugins,
  committed unchanged (tag v0) and in versions with two workloads slowed by exactly +5%, +10% and
  +20% of their work (tags slow5, slow10, slow20);
* per condition (quiet; loaded = background busy processes started and stopped by the script,
  while every baseline was recorded quiet, so the load changes between baseline and candidate):
  - history mode: three `--bench-save=main` runs of v0, then `--bench-compare=main` of each version
    (in the default interleaved passes; `history-1pass` does the same in one pass, for comparison);
  - A/B mode: `--bench-ab=v0` of each version (both sides in the same job, so under the same load);
  - pytest-benchmark: `--benchmark-save` of v0 (quiet), then each version compared with it:
    a benchmark fails when its median is more than 5% above the saved one (`median:5%`).
  Versions, repetitions and modes are interleaved, so no mode gets a quieter stretch of time.
It prints, per mode and condition: false alarms among unchanged comparisons, detections per
slowdown, and INCONCLUSIVE counts; and the markdown table that docs/gate.md records.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
WORKLOADS = {  # name -> (kind, base size): sizes give about 0.3, 0.6, 1, 2, 3.5 and 5 ms here
    "w_sum": ("sum", 6_400),
    "w_sort": ("sort", 3_000),
    "w_dict": ("dict", 3_900),
    "w_str": ("str", 9_100),
    "w_sieve": ("sieve", 220_000),
    "w_matmul": ("matmul", 65),
}
SLOWED = ("w_dict", "w_sieve")  # the two workloads a slowed version makes slower
SETS = ("tuning", "heldout", "threads", "memory")  # tuning: the six above; the rest: benchmarks/gate_NAME.py
SUITE = "(suite-wide shift)"  # the outcome of a whole run of ours: failed by its suite-wide shift or not
VERSIONS = {"v0": 1.0, "slow5": 1.05, "slow10": 1.10, "slow20": 1.20}

WORKLOAD_MODULE = """
import random

SCALE = {scale!r}
BASE = {base!r}


def _n(name):
    kind, size = BASE[name]
    return kind, int(size * SCALE.get(name, 1.0))


def run(name):
    kind, n = _n(name)
    if kind == "sum":
        return sum(i * i for i in range(n))
    if kind == "sort":
        data = [((i * 7919) % 10007) for i in range(n)]
        return sorted(data)[n // 2]
    if kind == "dict":
        d = {{}}
        for i in range(n):
            d[i % 997] = d.get(i % 997, 0) + i
        return len(d)
    if kind == "str":
        return len("".join(str(i % 10) for i in range(n)))
    if kind == "sieve":
        flags = bytearray([1]) * n
        for i in range(2, int(n ** 0.5) + 1):
            if flags[i]:
                flags[i * i::i] = bytearray(len(flags[i * i::i]))
        return sum(flags)
    if kind == "matmul":
        a = [[(i + j) % 7 for j in range(n)] for i in range(n)]
        return sum(sum(a[i][k] * a[k][j] for k in range(n)) for i in range(n) for j in range(0, n, 8))
    raise ValueError(kind)
"""
OURS = """
import pytest
import workloads

@pytest.mark.parametrize("name", {names!r})
def test_w(bench, name):
    bench(workloads.run, name)
"""
THEIRS = """
import pytest
import workloads

@pytest.mark.parametrize("name", {names!r})
def test_w(benchmark, name):
    benchmark(workloads.run, name)
"""


# -- the throwaway environment ----------------------------------------------------------------------
def sh(*args, cwd=None, env=None, check=True, timeout=1800):
    return subprocess.run(args, cwd=cwd, env=env, check=check, capture_output=True, text=True, timeout=timeout)


def make_venv(folder: Path, with_torch: bool = False) -> Path:
    python = folder / "venv" / "bin" / "python"
    if not python.exists():
        sh(sys.executable, "-m", "venv", str(folder / "venv"))
        sh(str(python), "-m", "pip", "install", "-q", "-e", str(REPO_ROOT), "pytest-benchmark")
    if with_torch and sh(str(python), "-c", "import torch", check=False).returncode:
        constraints = str(REPO_ROOT / "constraints.txt")  # the CPU build: no CUDA wheels
        sh(str(python), "-m", "pip", "install", "-q", "-c", constraints, "torch", "numpy")
    return python


class WorkloadSet:
    """The workloads a study measures: names, the two a slowed version slows, and the module's
    text for a version (``scale``: workload -> factor of its work)."""

    def __init__(self, names, slowed, module, needs_torch=False):
        self.names, self.slowed, self.module, self.needs_torch = list(names), tuple(slowed), module, needs_torch

    @classmethod
    def named(cls, name: str) -> WorkloadSet:
        if name != "tuning":
            sys.path.insert(0, str(Path(__file__).parent))
            held_out = __import__(f"gate_{name}")
            return cls(held_out.NAMES, held_out.SLOWED, held_out.MODULE.format, needs_torch=name == "heldout")
        return cls(WORKLOADS, SLOWED, lambda scale: WORKLOAD_MODULE.format(scale=scale, base=WORKLOADS))


def make_repo(folder: Path, workloads: WorkloadSet | None = None) -> Path:
    repo = folder / "repo"
    shutil.rmtree(repo, ignore_errors=True)
    repo.mkdir()
    sh("git", "init", "-q", "-b", "main", cwd=repo)
    workloads = workloads or WorkloadSet.named("tuning")
    names = workloads.names
    (repo / "test_ours.py").write_text(OURS.format(names=names))
    (repo / "test_theirs.py").write_text(THEIRS.format(names=names))
    (repo / ".gitignore").write_text(".pytest_cache/\n__pycache__/\n.benchmarks/\nbaselines/\n")
    for tag, factor in VERSIONS.items():
        scale = {name: factor for name in workloads.slowed} if factor != 1.0 else {}
        (repo / "workloads.py").write_text(workloads.module(scale=scale))
        sh("git", "add", "-A", cwd=repo)
        sh("git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", tag, "--allow-empty", cwd=repo)
        sh("git", "tag", tag, cwd=repo)
    return repo


def checkout(repo: Path, tag: str) -> None:
    sh("git", "checkout", "-q", tag, "--", "workloads.py", cwd=repo)


# -- background load --------------------------------------------------------------------------------
def _burn() -> None:
    x = 1
    while True:
        x = (x * 1103515245 + 12345) % 2**31


def _stream() -> None:
    """A neighbour that also takes the caches and memory bandwidth (as a build or a test suite
    does): copies between two 64 MiB arrays, far past any last-level cache."""
    import numpy as np

    a, b = np.ones(8 << 20), np.empty(8 << 20)
    while True:
        np.copyto(b, a)
        np.copyto(a, b)


LOAD_KINDS = {"spin": _burn, "memory": _stream}


class Load:
    """Busy processes, one per core: a benchmark then shares its core with one of them."""

    def __init__(self, processes: int, kind: str = "spin"):
        self.processes = processes
        self.target = LOAD_KINDS[kind]
        self.workers: list[multiprocessing.Process] = []

    def __enter__(self):
        for _ in range(self.processes):
            worker = multiprocessing.Process(target=self.target, daemon=True)
            worker.start()
            self.workers.append(worker)
        time.sleep(0.5)
        return self

    def __exit__(self, *exc):
        for worker in self.workers:
            worker.terminate()
        for worker in self.workers:
            worker.join()
        self.workers.clear()


# -- the three rules --------------------------------------------------------------------------------
def run_pytest(python: Path, repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "COLUMNS": "200"}
    env.pop("PYTEST_ADDOPTS", None)
    return sh(str(python), "-m", "pytest", "-q", "-p", "no:randomly", *args, cwd=repo, env=env, check=False)


def ours(python, repo, out: Path, *args) -> dict[str, str]:
    done = run_pytest(python, repo, "test_ours.py", "-p", "no:benchmark", f"--bench-json={out}", *args)
    if not out.exists():
        raise RuntimeError(f"pytest {' '.join(args)} wrote no results:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    run = json.loads(out.read_text())
    statuses = {
        rid.split("[")[-1].rstrip("]"): (r.get("verdict") or {}).get("status", "-")
        for rid, r in run["benchmarks"].items()
    }
    # A run failed by its suite-wide shift is a false alarm too: no version slows the whole suite.
    statuses[SUITE] = "REGRESSED" if "FAILED: suite-wide shift" in done.stdout else "UNCHANGED"
    return statuses


def theirs_medians(path: Path) -> dict[str, float]:
    data = json.loads(path.read_text())
    return {b["param"]: b["stats"]["median"] for b in data["benchmarks"]}


def theirs(python, repo, out: Path, saved: dict[str, float]) -> dict[str, str]:
    run_pytest(python, repo, "test_theirs.py", "-p", "no:tesserabench", f"--benchmark-json={out}")
    now = theirs_medians(out)
    return {name: ("REGRESSED" if now[name] > saved[name] * 1.05 else "UNCHANGED") for name in now}


# -- the experiment -------------------------------------------------------------------------------------
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5, help="candidate runs per version, mode and condition")
    parser.add_argument(
        "--set",
        choices=SETS,
        default="tuning",
        help="the workloads: tuning (six pure-Python ones, those the gate was shaped on), heldout "
        "(benchmarks/gate_heldout.py: torch, numpy and the standard library, never tuned on), threads "
        "(benchmarks/gate_threads.py: BLAS, scipy and Python threads without torch, never tuned on) or memory "
        "(benchmarks/gate_memory.py: memory streams, random reads and allocation, never tuned on)",
    )
    parser.add_argument("--conditions", default="quiet,loaded")
    parser.add_argument(
        "--modes",
        default="history,ab,pytest-benchmark",
        help="also history-first3: history mode against the baseline's first 3 runs only; "
        "history-1pass: history mode measured in one pass over the suite (baseline and candidates; "
        "history itself makes the default passes)",
    )
    parser.add_argument("--work", type=Path, default=Path(tempfile.gettempdir()) / "tesserabench-gate-real")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2, help="busy processes in the loaded condition")
    parser.add_argument(
        "--load-kind",
        choices=sorted(LOAD_KINDS),
        default="spin",
        help="what the busy processes do: spin (arithmetic in registers) or memory (stream through 128 MiB)",
    )
    parser.add_argument("--baseline-runs", type=int, default=3, help="history mode: runs saved into the baseline")
    parser.add_argument("--quick", action="store_true", help="short budgets (mechanics only, not evidence)")
    parser.add_argument("--json", type=Path, help="write every outcome here")
    parser.add_argument(
        "--keep",
        type=Path,
        help="keep every candidate run's --bench-json file (CONDITION-MODE-VERSION-REP.json) and the "
        "baselines here, to judge them again offline (gate_rejudge.py)",
    )
    parser.add_argument(
        "--python",
        type=Path,
        help="an interpreter that already has this project and pytest-benchmark (a machine without "
        "network, e.g. the GPU machine); default: a virtual environment made under --work",
    )
    args = parser.parse_args()
    args.work.mkdir(parents=True, exist_ok=True)
    workloads = WorkloadSet.named(args.set)
    python = args.python.absolute() if args.python else make_venv(args.work, workloads.needs_torch)
    repo = make_repo(args.work, workloads)
    budget = ["--bench-max-time=0.2", "--bench-warmup=0.02"] if args.quick else []
    modes = args.modes.split(",")
    outcomes = []  # (condition, mode, version, workload, status)
    seconds = defaultdict(list)  # mode -> wall time of each candidate run (the cost of the mode)

    # Baselines, recorded quiet.
    checkout(repo, "v0")
    save_seconds = []  # wall time of each --bench-save=main run (with its fresh processes)
    if any(mode.startswith("history") for mode in modes):
        for i in range(args.baseline_runs):
            began = time.time()
            ours(python, repo, args.work / "save.json", "--bench-save=main", *budget)
            save_seconds.append(time.time() - began)
            if "history-1pass" in modes:  # interleaved with main's runs: the same stretches of time
                ours(python, repo, args.work / "save.json", "--bench-save=onepass", "--bench-passes=1", *budget)
            if i == 2 and "history-first3" in modes:  # the same history cut at 3 runs: a controlled comparison
                shutil.copytree(repo / "baselines" / "main", repo / "baselines" / "first3")
    saved = {}
    if "pytest-benchmark" in modes:
        run_pytest(
            python, repo, "test_theirs.py", "-p", "no:tesserabench", f"--benchmark-json={args.work / 'base.json'}"
        )
        saved = theirs_medians(args.work / "base.json")

    started = time.time()
    for condition in args.conditions.split(","):
        for rep in range(args.reps):
            for version in VERSIONS:
                for mode in modes:
                    checkout(repo, version)
                    out = args.work / "out.json"
                    out.unlink(missing_ok=True)
                    load = Load(args.load if condition == "loaded" else 0, args.load_kind)
                    began = time.time()
                    with load:
                        if mode == "history":
                            statuses = ours(python, repo, out, "--bench-compare=main", *budget)
                        elif mode == "history-1pass":
                            statuses = ours(python, repo, out, "--bench-compare=onepass", "--bench-passes=1", *budget)
                        elif mode == "history-first3":
                            statuses = ours(python, repo, out, "--bench-compare=first3", *budget)
                        elif mode == "ab":
                            statuses = ours(python, repo, out, "--bench-ab=v0", *budget)
                        else:
                            statuses = theirs(python, repo, out, saved)
                    seconds[mode].append(time.time() - began)
                    if args.keep and out.exists():
                        args.keep.mkdir(parents=True, exist_ok=True)
                        shutil.copy(out, args.keep / f"{condition}-{mode}-{version}-{rep}.json")
                    for workload, status in statuses.items():
                        outcomes.append((condition, mode, version, workload, status))
                    checkout(repo, "v0")
            elapsed = time.time() - started
            print(f"[{condition}] repetition {rep + 1}/{args.reps} done, {elapsed / 60:.1f} min", file=sys.stderr)

    if args.keep and (repo / "baselines").exists():  # (none where no mode saved one: A/B alone)
        shutil.copytree(repo / "baselines", args.keep / "baselines", dirs_exist_ok=True)
    report(outcomes, args, workloads.slowed)
    costs = ", ".join(f"{mode} {sum(v) / len(v):.0f} s" for mode, v in seconds.items())
    print(f"\nmean wall time of a candidate run ({len(workloads.names)} benchmarks, pytest start-up included): {costs}")
    if save_seconds:
        print(f"wall time of each baseline save (history mode): {', '.join(f'{s:.0f} s' for s in save_seconds)}")
    if args.json:
        args.json.write_text(json.dumps(outcomes, indent=1))
    return 0


def report(outcomes, args, slowed_names=SLOWED) -> None:
    table = defaultdict(lambda: defaultdict(int))
    for condition, mode, version, workload, status in outcomes:
        slowed = version != "v0" and workload in slowed_names
        key = (condition, mode)
        if workload == SUITE:
            table[key]["runs"] += 1
            table[key]["suite_failed"] += status == "REGRESSED"
        elif slowed:
            table[key][f"n_{version}"] += 1
            table[key][f"caught_{version}"] += status == "REGRESSED"
            table[key][f"inconclusive_{version}"] += status == "INCONCLUSIVE"
        else:
            table[key]["n_unchanged"] += 1
            table[key]["false_alarms"] += status == "REGRESSED"
            table[key]["inconclusive_unchanged"] += status == "INCONCLUSIVE"
    print(
        f"\nmachine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, Python "
        f"{platform.python_version()}; workloads: {getattr(args, 'set', 'tuning')}; {args.reps} candidate run(s) "
        "per version, mode and condition; "
        f"loaded = {args.load} busy process(es) ({getattr(args, 'load_kind', 'spin')}); baselines recorded quiet"
    )
    print(
        "\n| condition | mode | false alarms (unchanged) | +5% caught | +10% caught | +20% caught "
        "| INCONCLUSIVE (unchanged / slowed) | runs failed by the suite-wide shift |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for (condition, mode), row in table.items():

        def caught(v, row=row):
            return f"{row[f'caught_{v}']}/{row[f'n_{v}']}"

        slowed_inconclusive = sum(row[f"inconclusive_{v}"] for v in ("slow5", "slow10", "slow20"))
        print(
            f"| {condition} | {mode} | {row['false_alarms']}/{row['n_unchanged']} | {caught('slow5')} | "
            f"{caught('slow10')} | {caught('slow20')} | {row['inconclusive_unchanged']} / {slowed_inconclusive} | "
            + (f"{row['suite_failed']}/{row['runs']} |" if row["runs"] else "- |")
        )


if __name__ == "__main__":
    sys.exit(main())
