"""How much drift between runs is left for history mode to judge, by number of interleaved passes.

    python benchmarks/pass_drift.py --reps 12 --passes 1,2,4,8   # ~1 minute per rep on 2 cores

In gate_real.py's throwaway repository (six pure-Python workloads of 0.3-5 ms), runs
`pytest --bench --bench-passes=N` REPS times for each N, the Ns interleaved in a shuffled order per
repetition so that none gets a quieter stretch of time. For each N, the runs are decomposed as the
gate does (`run_effect.fit`: Tukey's median polish of the benchmarks x runs table of run centres)
and it prints: the spread of the runs' shared shifts (what the run-effect model removes), the
residual drift per benchmark (what is left, the between-run noise the gate judges against), and
the mean wall time of a run. A run's centre is the gate's (gate.centres: the lowest pass's median).
Earlier figures, and those of the ways of combining passes tried before, are in
docs/gate-evidence.md ("Interleaved passes").
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gate_real  # noqa: E402  (the throwaway repository and its virtual environment)

from pytest_tesserabench.gate import model as run_effect  # noqa: E402
from pytest_tesserabench.gate.centres import log_centre  # noqa: E402
from pytest_tesserabench.record import results  # noqa: E402


def one_run(python: Path, repo: Path, passes: int, out: Path) -> tuple[results.RunDocument, float]:
    """One run's document, and its wall time."""
    out.unlink(missing_ok=True)
    began = time.time()
    args = ("test_ours.py", "-p", "no:benchmark", f"--bench-passes={passes}", f"--bench-json={out}")
    gate_real.run_pytest(python, repo, *args)
    seconds = time.time() - began
    return results.RunDocument.from_json(json.loads(out.read_text()), str(out)), seconds


def drift_row(label: str, runs: list[results.RunDocument], seconds: list[float]) -> str:
    """The table row of one number of passes and one rule: the runs decomposed as the gate does."""
    centres = [{i: log_centre(r) for i, r in run.benchmarks.items()} for run in runs]
    names = sorted(centres[0])
    by_bench = {name: {j: run[name] for j, run in enumerate(centres)} for name in names}
    model = run_effect.fit(by_bench, len(centres), [])
    table = np.array([[by_bench[name][j] for j in range(len(centres))] for name in names])
    effects = np.array([model.effects[name] for name in names])[:, None]
    residual = table - effects - np.array(model.run_shifts)[None, :]
    per_bench = np.sqrt((residual**2).sum(axis=1) / (residual.shape[1] - 1))
    listed = ", ".join(f"{name.split('[')[-1].rstrip(']')} {sd * 100:.1f}%" for name, sd in zip(names, per_bench))
    return (
        f"| {label} | {model.shift_sd * 100:.1f}% | {model.residual_sd * 100:.1f}% | {listed} | "
        f"{np.mean(seconds):.1f} s |"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=12)
    parser.add_argument("--passes", default="1,4")
    parser.add_argument("--work", type=Path, default=Path(gate_real.tempfile.gettempdir()) / "tesserabench-gate-real")
    parser.add_argument("--python", type=Path, help="an interpreter that has this project (default: gate_real's venv)")
    parser.add_argument("--keep", type=Path, help="keep every run's --bench-json file here (pN-rREP.json)")
    args = parser.parse_args()
    schemes = [int(p) for p in args.passes.split(",")]
    args.work.mkdir(parents=True, exist_ok=True)
    python = args.python.absolute() if args.python else gate_real.make_venv(args.work)
    repo = gate_real.make_repo(args.work)
    gate_real.checkout(repo, "v0")
    runs: dict[int, list[results.RunDocument]] = {n: [] for n in schemes}
    seconds: dict[int, list[float]] = {n: [] for n in schemes}
    rng = random.Random(0)
    for rep in range(args.reps):
        for n in rng.sample(schemes, len(schemes)):
            run, took = one_run(python, repo, n, args.work / "drift.json")
            runs[n].append(run)
            seconds[n].append(took)
            if args.keep:
                args.keep.mkdir(parents=True, exist_ok=True)
                shutil.copy(args.work / "drift.json", args.keep / f"p{n}-r{rep}.json")
        print(f"repetition {rep + 1}/{args.reps} done", file=sys.stderr)

    print(f"\n{args.reps} runs per number of passes, interleaved; six workloads of gate_real.py; defaults otherwise")
    print("\n| passes | shared shift sd | residual drift, median | residual drift per benchmark | wall time of a run |")
    print("|---|---:|---:|---|---:|")
    for n in schemes:
        print(drift_row(str(n), runs[n], seconds[n]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
