"""How well `tesserabench history` finds steps: precision and recall on simulated histories.

Each history is a baseline's series of run medians: lognormal noise between runs (sd 1%, what a
quiet CI VM shows between runs of a CPU benchmark; 3%, a loaded one), each run's own interval as
wide as that noise, and one step of 5%, 10% or 20% at a random run (none, for the false-step
rate). A step counts as found when one is reported within one run of where it is.

    .venv/bin/python benchmarks/change_points.py              # 10 and 20 runs, 500 histories each
    .venv/bin/python benchmarks/change_points.py --histories 2000 --seed 7

Prints a markdown table: per history length, noise and step size, recall (histories whose step
was found), precision (reported steps that are real) and the false-step rate on histories
without one.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from pytest_tesserabench.history.steps import find_steps  # noqa: E402


def history(rng: random.Random, runs: int, sd: float, step: float, at: int) -> list[float]:
    return [10.0 * math.exp(rng.gauss(0, sd)) * (1 + step if i >= at else 1.0) for i in range(runs)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--histories", type=int, default=500, help="histories per cell (default 500)")
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--alpha", type=float, default=0.01)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    print("| runs | noise | step | recall | precision | false steps (no step) |")
    print("|---:|---:|---:|---:|---:|---:|")
    for runs in (10, 20):
        for sd in (0.01, 0.03):
            null = sum(
                bool(find_steps(history(rng, runs, sd, 0.0, runs), [1.96 * sd] * runs, alpha=args.alpha))
                for _ in range(args.histories)
            )
            for step in (0.05, 0.10, 0.20):
                caught = reported = real = 0
                for _ in range(args.histories):
                    at = rng.randint(2, runs - 2)
                    found = find_steps(history(rng, runs, sd, step, at), [1.96 * sd] * runs, alpha=args.alpha)
                    hits = [s for s in found if abs(s.index - at) <= 1]
                    caught += bool(hits)
                    reported += len(found)
                    real += len(hits[:1])
                precision = f"{real / reported:.1%}" if reported else "-"
                print(
                    f"| {runs} | {sd:.0%} | {step:.0%} | {caught / args.histories:.1%} | {precision} | "
                    f"{null / args.histories:.1%} |"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
