"""Judge the history-mode runs that gate_real.py kept again, offline, with the shipped pipeline:
the same candidates and baselines, only the gate's parameters differ (a controlled comparison).

    python benchmarks/gate_real.py --modes history --keep /tmp/kept ...
    python benchmarks/gate_rejudge.py /tmp/kept
    python benchmarks/gate_rejudge.py /tmp/kept --config threshold=0.1 --config outlier_z=5
    python benchmarks/gate_rejudge.py /tmp/kept --fresh none      # without the fresh processes the files kept

Each run is judged as `tesserabench compare` judges a run file (gate.pipeline.judge_run: the
run's shift from the benchmarks measured before it, its conditions, the fresh processes the file
kept). A `--config` changes a GateConfig field for the rejudging only; nothing in the package is
patched. Prints gate_real.py's table, and per baseline its residual drift and what it says the
gate can catch (History.detectable).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from dataclasses import replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gate_real  # noqa: E402  (its table)

from pytest_tesserabench.gate import GateConfig  # noqa: E402
from pytest_tesserabench.gate.pipeline import History, judge_run  # noqa: E402
from pytest_tesserabench.history import baseline  # noqa: E402

BASELINE_OF_MODE = {"history": "main", "history-1pass": "onepass", "history-first3": "first3"}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kept", type=Path, help="the folder gate_real.py --keep wrote")
    parser.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="a GateConfig field for the rejudging (repeatable), e.g. outlier_z=5",
    )
    parser.add_argument(
        "--fresh",
        choices=("kept", "none"),
        default="kept",
        help="the fresh processes the run files kept: judged as the plugin judged them, or left out",
    )
    parser.add_argument("--set", choices=gate_real.SETS, default="tuning", help="the workloads gate_real.py measured")
    args = parser.parse_args()
    config = gate_config(args.config)
    slowed = gate_real.WorkloadSet.named(args.set).slowed
    candidates = sorted(args.kept.glob("*.json"))
    if not candidates:
        print(f"{args.kept}: no kept runs", file=sys.stderr)
        return 2
    outcomes, reps = [], 0
    histories = {}
    for path in candidates:
        condition, rest = path.stem.split("-", 1)
        mode, version, rep = rest.rsplit("-", 2)
        if mode not in BASELINE_OF_MODE:
            continue
        reps = max(reps, int(rep) + 1)
        name = BASELINE_OF_MODE[mode]
        if name not in histories:
            histories[name] = _baseline_runs(args.kept, name)
        run = baseline.load_runs(path)[0]
        if args.fresh == "none":
            run = replace(run, benchmarks={i: replace(r, confirm=None) for i, r in run.benchmarks.items()})
        for bench_id, verdict in judge_run(run, histories[name], config).items():
            outcomes.append((condition, mode, version, bench_id.split("[")[-1].rstrip("]"), verdict.status))
    changed = ", ".join(args.config) or "the defaults"
    print(f"## {len(candidates)} kept runs of {args.kept} judged with {changed}; fresh processes: {args.fresh}")
    gate_real.report(outcomes, argparse.Namespace(reps=reps, load="?", load_kind="?", set=args.set), slowed)
    for name, runs in histories.items():
        history = History.of(runs, config)
        catches = ", ".join(f"{i.split('[')[-1].rstrip(']')} {d:.1%}" for i, d in sorted(history.detectable().items()))
        drift = f"residual drift {history.model.residual_sd:.2%}; " if history.model is not None else ""
        print(f"baseline {name}: {drift}catches {catches}")
    return 0


def gate_config(pairs: list[str]) -> GateConfig:
    """GateConfig with FIELD=VALUE changes, each converted to the field's type."""
    types = {f.name: type(f.default) for f in dataclasses.fields(GateConfig)}
    changes = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        if name not in types:
            raise SystemExit(f"--config {pair}: GateConfig has no field {name!r} (fields: {', '.join(types)})")
        changes[name] = types[name](value)
    return GateConfig(**changes)


def _baseline_runs(kept: Path, name: str):
    (path,) = (kept / "baselines" / name).glob("*.json")  # one machine: gate_real's
    return baseline.load_runs(path)


if __name__ == "__main__":
    sys.exit(main())
