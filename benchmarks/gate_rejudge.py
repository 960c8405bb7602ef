"""Judge the history-mode runs that gate_real.py kept again, offline, by each way of combining
a run's interleaved passes into its centre, and of judging --bench-confirm's fresh processes: a
controlled comparison (the same runs, the same baselines; only the rule differs).

    python benchmarks/gate_real.py --modes history,history-1pass --keep /tmp/kept ...
    python benchmarks/gate_rejudge.py /tmp/kept
    python benchmarks/gate_rejudge.py /tmp/kept --centres min --fresh none,one-run,kept
    python benchmarks/gate_rejudge.py /tmp/kept --centres min --baseline-processes kept,none

Each run is judged as `tesserabench compare` judges a saved run (run_effect.compare_run, the
run's own conditions included); in the plugin, a benchmark's shift comes from the benchmarks
measured before it, so the counts can differ slightly from those gate_real.py printed. It prints
gate_real.py's table per rule, and the residual drift of each baseline by each rule.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gate_real  # noqa: E402  (its table)

from pytest_tesserabench import baseline, confirm, gate, neighbours, run_effect, run_queue  # noqa: E402

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
    parser.add_argument(
        "--fresh",
        default="kept",
        help="comma list of how --bench-confirm's fresh processes (kept in the run files) are judged: kept (as "
        "the plugin judges them), none (this process alone), one-run (the median process with one process's "
        "variance: the rule of gate_real run W)",
    )
    parser.add_argument(
        "--baseline-processes",
        default="kept",
        help="comma list of how a baseline's fresh processes (--bench-save-processes, kept in the file) are read: "
        "kept (as runs of the history, as the plugin reads them), none (the session's processes alone: a baseline "
        "saved with --bench-save-processes=0)",
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
        (rule, held, state, fresh, saved)
        for rule in args.centres.split(",")
        for held in args.shared_cpu_rules.split(",")
        for state in states
        for fresh in args.fresh.split(",")
        for saved in args.baseline_processes.split(",")
    ]
    for rule, held, state, fresh, saved in settings:
        gate.noise_components = _one_run_of_processes if fresh == "one-run" else NOISE_COMPONENTS
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
            if saved == "none":
                history = [_without_processes(r) for r in history]
            run = baseline.load_runs(path)[0]
            if fresh == "none":
                run = _without_processes(run)
            verdicts = run_effect.compare_run(run, history, config)
            for bench_id, verdict in verdicts.items():
                workload = bench_id.split("[")[-1].rstrip("]")
                outcomes.append((condition, mode, version, workload, verdict.status))
        print(
            f"\n## run centre: the {rule} of the passes' centres; shared-CPU rules: {held}; pass states: {state}; "
            f"fresh processes: {fresh}; baseline's processes: {saved}"
        )
        gate_real.report(outcomes, argparse.Namespace(reps=reps, load="?", load_kind="?"))
        for mode, name in BASELINE_OF_MODE.items():
            runs = _baseline_runs(args.kept, name) if _has(args.kept, name) else []
            runs = confirm.with_processes(runs) if saved == "kept" else runs
            model = run_effect.fit_baseline(runs) if runs else None
            if model is not None:
                print(f"baseline {name} ({mode}): residual drift {model.residual_sd * 100:.2f}%")
    return 0


NOISE_COMPONENTS = gate.noise_components


def _one_run_of_processes(*summaries, candidate_spread=True):
    """gate.noise_components as run W judged --bench-confirm's processes: the median process
    alone, with one process's variance."""
    base, cand = summaries[:3], [np.atleast_2d(np.asarray(a, dtype=float)) for a in summaries[3:]]
    if not candidate_spread and cand[0].shape[-1] > 1:
        order = np.argsort(cand[0][0])
        middle = order[(len(order) - 1) // 2 : len(order) // 2 + 1]
        cand = [np.array([[float(np.mean(a[0][middle]))]]) for a in cand]
    return NOISE_COMPONENTS(*base, *cand, candidate_spread=candidate_spread)


def _without_processes(run):
    return replace(run, benchmarks={i: replace(r, confirm=None) for i, r in run.benchmarks.items()})


def _has(kept: Path, name: str) -> bool:
    return any((kept / "baselines" / name).glob("*.json"))


def _baseline_runs(kept: Path, name: str):
    (path,) = (kept / "baselines" / name).glob("*.json")  # one machine: gate_real's
    return baseline.load_runs(path)


if __name__ == "__main__":
    sys.exit(main())
