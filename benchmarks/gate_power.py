"""False-positive rate and power of the gate, a fixed `median > 5%` rule and Mann-Whitney p < 0.05.

All three see the same seeded simulated suites (tests/gate/gate_simulation.py: round noise 1%,
5% of rounds slowed 10-50%, 10 rounds per run, between-run drift as given). The fixed rule and
Mann-Whitney compare against the latest baseline run (as pytest-benchmark and pyperf do); the
gate uses the whole history. Prints a markdown table.

    .venv/bin/python benchmarks/gate_power.py [--suites 2000] [--suite-size 10]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "gate"))
from gate_simulation import (  # noqa: E402
    Scenario,
    fixed_threshold_flags,
    gate_flags,
    mann_whitney_flags,
    run_effect_flags,
    simulate,
)

from pytest_tesserabench.gate import GateConfig  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", type=int, default=2000, help="simulated suites per row")
    parser.add_argument("--suite-size", type=int, default=10, help="benchmarks per suite (m)")
    parser.add_argument("--seed", type=int, default=2026)
    args = parser.parse_args()
    rng = np.random.default_rng(args.seed)
    config = GateConfig()
    rows = [(h, d, s) for h in (3, 10) for d in (0.005, 0.01, 0.02) for s in (0.0, 0.05, 0.10)]
    started = time.perf_counter()
    print(
        f"m = {args.suite_size} benchmarks per suite, {args.suites} suites per row "
        f"({args.suites * args.suite_size} comparisons), seed {args.seed}\n"
    )
    print(
        "| history | drift | injected | gate | fixed median > 5% | Mann-Whitney p < 0.05 "
        "| gate: suites with any failure |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for history, drift, slowdown in rows:
        sc = Scenario(history=history, drift=drift, slowdown=slowdown, suite_size=args.suite_size)
        base, cand = simulate(rng, args.suites, sc)
        gate = gate_flags(base, cand, config)
        fixed = fixed_threshold_flags(base, cand)
        mw = mann_whitney_flags(base, cand)
        kind = "A/A" if slowdown == 0 else f"+{slowdown:.0%}"
        print(
            f"| {history} | {drift:.1%} | {kind} | {gate.mean():.2%} | {fixed.mean():.2%} | {mw.mean():.2%} "
            f"| {gate.any(axis=1).mean():.1%} |"
        )
    shared_drift_table(args)
    print(f"\n({time.perf_counter() - started:.1f} s)")


def shared_drift_table(args) -> None:
    """The same rules when drift is partly shared by every benchmark of a run, as on a real
    machine; two of the benchmarks are slowed, the rest are the unchanged comparisons."""
    rng = np.random.default_rng(args.seed + 1)
    config = GateConfig()
    print(
        "\nShared drift (one N(0, shared) shift per run for the whole suite, plus 0.5% per benchmark), "
        "history 3, two of the benchmarks slowed:\n"
    )
    print(
        "| shared drift | injected | run-effect model: caught | its false alarms | drift-per-benchmark rule: caught "
        "| its false alarms | fixed median > 5%: caught | its false alarms |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    for shared in (0.0, 0.02, 0.05):
        for slowdown in (0.05, 0.10, 0.20):
            sc = Scenario(history=3, drift=0.005, shared_drift=shared, slowdown=slowdown, slowed=2,
                          suite_size=args.suite_size)  # fmt: skip
            base, cand = simulate(rng, args.suites, sc)
            cells = []
            for flags in (run_effect_flags(base, cand, config), gate_flags(base, cand, config),
                          fixed_threshold_flags(base, cand)):  # fmt: skip
                cells += [f"{flags[:, :2].mean():.1%}", f"{flags[:, 2:].mean():.2%}"]
            print(f"| {shared:.0%} | +{slowdown:.0%} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
