"""What a large baseline costs: a synthetic baseline of B benchmarks x R runs (60 rounds each, as
`--bench-save` keeps them) and a run of two of its benchmarks, then the wall time of
`tesserabench show`, `tesserabench compare` and `tesserabench report` on them, each in a process
of its own, as a user runs them.

    python benchmarks/large_baseline.py                  # 100, 1000 and 2000 benchmarks x 10 runs
    python benchmarks/large_baseline.py --sizes 1000x10 --budget 15

A baseline keeps the last `bench_history` (10) runs of each benchmark, so its size grows with the
suite, not with time: 1000 benchmarks x 10 runs is 10,000 records. `--budget S` exits 1 when a
command of the largest size takes longer than S seconds (docs/performance.md states the budget).
"""

from __future__ import annotations

import argparse
import json
import math
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

KEY = "cpu-x86-64-large"


def record(rng: random.Random, i: int, shift: float) -> dict:
    base = 1.0 + (i % 97) * 0.1
    return {
        "timer": "cpu",
        "outcome": "passed",
        "rounds_ms": [base * math.exp(shift + rng.gauss(0, 0.01)) for _ in range(60)],
    }


def write(folder: Path, benchmarks: int, runs: int) -> tuple[Path, Path]:
    rng = random.Random(1)
    machine = {"device": "large", "arch": "x86_64"}
    docs = []
    for r in range(runs):
        shift = rng.gauss(0, 0.02)
        docs.append({
            "schema": 1, "canary_ms": [2.0] * 5, "machine": machine, "started": f"2026-01-{r + 1:02d}T00:00:00Z",
            "benchmarks": {f"t.py::test_w[{i}]": record(rng, i, shift) for i in range(benchmarks)},
        })  # fmt: skip
    baseline = folder / "baselines" / "main" / f"{KEY}.json"
    baseline.parent.mkdir(parents=True, exist_ok=True)
    baseline.write_text(json.dumps({"schema": 1, "name": "main", "machine_key": KEY, "runs": docs}))
    run = folder / "run.json"
    two = {f"t.py::test_w[{i}]": record(rng, i, 0.0) for i in range(2)}
    run.write_text(json.dumps({"schema": 1, "canary_ms": [2.0] * 5, "machine": machine, "benchmarks": two}))
    return baseline, run


def timed(command: list[str], cwd: Path) -> float:
    began = time.perf_counter()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True)
    seconds = time.perf_counter() - began
    if done.returncode not in (0, 1):  # (1: compare found a regression; not an error)
        raise SystemExit(f"{' '.join(command)} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="100x10,1000x10,2000x10", help="BENCHMARKSxRUNS, comma-separated")
    parser.add_argument("--budget", type=float, default=None, help="seconds a command of the largest size may take")
    args = parser.parse_args()
    tool = [sys.executable, "-m", "pytest_tesserabench.cli"]
    print("| baseline | size | show | compare | report |")
    print("|---|---:|---:|---:|---:|")
    worst = 0.0
    for size in args.sizes.split(","):
        benchmarks, runs = (int(x) for x in size.split("x"))
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            baseline, run = write(folder, benchmarks, runs)
            figures = [
                timed([*tool, "show", "main", "--dir", "baselines", "--width", "120"], folder),
                timed([*tool, "compare", "main", str(run), "--dir", "baselines", "--width", "120"], folder),
                timed([*tool, "report", str(run), "main", "--dir", "baselines", "-o", "r.html"], folder),
            ]
            worst = max(figures)
            megabytes = baseline.stat().st_size / 1e6
            shown = " | ".join(f"{s:.1f} s" for s in figures)
            print(f"| {benchmarks} benchmarks x {runs} runs | {megabytes:.0f} MB | {shown} |", flush=True)
    if args.budget is not None and worst > args.budget:
        print(f"over budget: {worst:.1f} s > {args.budget} s")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
