"""Write expected.json: the verdicts the shipped pipeline gives each kept run of this folder.

    .venv/bin/python tests/gate/golden/update.py

Run it only when a change of the gate's rules is meant to change verdicts, and read its diff: it
is the change's effect on real runs (benchmarks/gate_real.py's tuning workloads, kept on the CI
VM on 2026-11-26, baseline and candidates; raw samples and the recorded verdicts stripped).
"""

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def judged() -> dict:
    from pytest_tesserabench.gate.pipeline import judge_run
    from pytest_tesserabench.history.baseline import load_runs

    baseline = load_runs(HERE / "baseline.json")
    out = {}
    for path in sorted(HERE.glob("*-*.json")):
        (run,) = load_runs(path)
        verdicts = sorted(judge_run(run, baseline).items())
        out[path.stem] = {
            bench_id.split("[")[-1].rstrip("]"): [v.status, v.stage, v.processes, v.ratio and round(v.ratio, 3)]
            for bench_id, v in verdicts
        }
    return out


if __name__ == "__main__":
    (HERE / "expected.json").write_text(json.dumps(judged(), indent=1, sort_keys=True) + "\n")
    sys.exit(0)
