"""Judge the history-mode runs that gate_real.py kept again, offline, by each way of combining
a run's interleaved passes into its centre: a controlled comparison (the same runs, the same
baselines; only the rule differs).

    python benchmarks/gate_real.py --modes history,history-1pass --keep /tmp/kept ...
    python benchmarks/gate_rejudge.py /tmp/kept

Each run is judged as `tesserabench compare` judges a saved run (run_effect.compare_run, the
run's own conditions included); in the plugin, a benchmark's shift comes from the benchmarks
measured before it, so the counts can differ slightly from those gate_real.py printed. It prints
gate_real.py's table per rule, and the residual drift of each baseline by each rule.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gate_real  # noqa: E402  (its table)

from pytest_tesserabench import baseline, gate, neighbours, run_effect, run_queue  # noqa: E402

BASELINE_OF_MODE = {"history": "main", "history-1pass": "onepass", "history-first3": "first3"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kept", type=Path, help="the folder gate_real.py --keep wrote")
    parser.add_argument("--centres", default=",".join(gate._COMBINE_PASSES), help="the pass-combining rules to try")
    parser.add_argument(
        "--pass-state",
        choices=("on", "off", "both"),
        default="on",
        help="widen a benchmark's noise by the gap between a baseline run's two lowest passes (gate.PASS_STATE_NOISE)",
    )
    parser.add_argument(
        "--shared-cpu-rules",
        default="plugin",
        help="comma list of what holds a regression back as timed on a shared CPU: plugin (as the plugin "
        "does), wait (the run-queue wait only), neighbours (busy processes beside it only), none",
    )
    args = parser.parse_args()
    candidates = sorted(p for p in args.kept.glob("*.json"))
    if not candidates:
        print(f"{args.kept}: no kept runs", file=sys.stderr)
        return 2
    config = gate.GateConfig()
    reps = 0
    plugin_rules = {"wait": run_queue.SHARED, "neighbours": neighbours.SHARED_CPUS}
    states = {"on": (True,), "off": (False,), "both": (True, False)}[args.pass_state]
    settings = [
        (rule, held, state)
        for rule in args.centres.split(",")
        for held in args.shared_cpu_rules.split(",")
        for state in states
    ]
    for rule, held, state in settings:
        gate.PASS_CENTRE = rule
        gate.PASS_STATE_NOISE = state
        never = float("inf")
        run_queue.SHARED = plugin_rules["wait"] if held in ("plugin", "wait") else never
        neighbours.SHARED_CPUS = plugin_rules["neighbours"] if held in ("plugin", "neighbours") else never
        outcomes = []
        for path in candidates:
            condition, rest = path.stem.split("-", 1)
            mode, version, rep = rest.rsplit("-", 2)
            if mode not in BASELINE_OF_MODE:
                continue
            reps = max(reps, int(rep) + 1)
            history = _baseline_runs(args.kept, BASELINE_OF_MODE[mode])
            verdicts = run_effect.compare_run(baseline.load_runs(path)[0], history, config)
            for bench_id, verdict in verdicts.items():
                workload = bench_id.split("[")[-1].rstrip("]")
                outcomes.append((condition, mode, version, workload, verdict.status))
        print(f"\n## run centre: the {rule} of the passes' centres; shared-CPU rules: {held}; pass states: {state}")
        gate_real.report(outcomes, argparse.Namespace(reps=reps, load="?", load_kind="?"))
        for mode, name in BASELINE_OF_MODE.items():
            model = run_effect.fit_baseline(_baseline_runs(args.kept, name)) if _has(args.kept, name) else None
            if model is not None:
                print(f"baseline {name} ({mode}): residual drift {model.residual_sd * 100:.2f}%")
    return 0


def _has(kept: Path, name: str) -> bool:
    return any((kept / "baselines" / name).glob("*.json"))


def _baseline_runs(kept: Path, name: str):
    (path,) = (kept / "baselines" / name).glob("*.json")  # one machine: gate_real's
    return baseline.load_runs(path)


if __name__ == "__main__":
    sys.exit(main())
