"""Mutations of valid run and baseline documents: loading them either works or raises the
project's own error naming the problem; whatever loads, the gate and the reports take."""

import copy
import json
import math
import os

import pytest

pytest.importorskip("hypothesis", reason="needs hypothesis (the 'test' extra; CI installs it)")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from pytest_tesserabench.gate.pipeline import judge_run
from pytest_tesserabench.history.baseline import BaselineError, load_baseline, load_runs
from pytest_tesserabench.report.comparison_table import render_comparison
from pytest_tesserabench.report.terminal import render_summary

KEY = "cpu-x86-64-fuzz"
RECORD = {
    "nodeid": "t.py::test_a[M=64]",
    "name": None,
    "group": "t.py::test_a",
    "params": {"M": 64, "precision": "bf16"},
    "dtype": "bf16",
    "timer": "cpu",
    "rounds_ms": [1.0, 1.02, 0.99, 1.01],
    "stats": {
        "median_ms": 1.005,
        "ci95_ms": [0.99, 1.02],
        "mean_ms": 1.005,
        "min_ms": 0.98,
        "max_ms": 1.03,
        "iqr_ms": 0.015,
        "stdev_ms": 0.013,
        "cv": 0.013,
        "rounds": 4,
        "samples": 40,
        "outliers": 0,
        "noisy": False,
    },
    "sampling": {"warmup_calls": 3, "inner_loops": 1, "samples_per_round": 10, "stop": "converged", "elapsed_s": 0.1},
    "flops": 1e9,
    "bytes": 1e6,
    "tflops": 1.0,
    "gbps": 1.0,
    "roofline": {"peak_tflops": 10.0, "peak_gbps": 100.0, "efficiency": 0.1, "bound": "compute"},
    "accuracy": {"max_abs": 0.001, "max_rel": 0.01},
    "kernels": [
        {"name": "k", "arch": "sm_90", "constexprs": {"BLOCK": 64}, "num_warps": 4, "num_stages": 3, "registers": 32,
         "spill_bytes": 0, "shared_bytes": 1024, "occupancy": 0.5, "notes": []}
    ],
    "targets": [],
    "telemetry": None,
    "extra_info": {"note": "x"},
    "outcome": "passed",
    "verdict": {"status": "UNCHANGED", "ratio": 1.0, "ci": [0.99, 1.01], "p_value": 0.5, "history": 3},
}  # fmt: skip
RUN = {
    "schema": 1,
    "machine": {"device": "cpu", "arch": "x86_64", "triton": "3.9.0"},
    "commit": {"sha": "a" * 40, "branch": "main", "dirty": False},
    "started": "2026-11-22T00:00:00Z",
    "canary_ms": [2.0, 2.1],
    "benchmarks": {"t.py::test_a[M=64]": RECORD, "t.py::test_a[M=64]::torch": {**RECORD, "name": "torch"}},
}
BASELINE = {"schema": 1, "name": "main", "machine_key": KEY, "runs": [RUN, RUN]}

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=6,
)


def paths(node, prefix=()):
    yield prefix
    if isinstance(node, dict):
        for key, value in node.items():
            yield from paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from paths(value, (*prefix, i))


@st.composite
def mutated(draw, document):
    doc = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 3))):
        targets = list(paths(doc))[1:]
        if not targets:
            break
        path = draw(st.sampled_from(targets))
        parent = doc
        for step in path[:-1]:
            parent = parent[step]
        action = draw(st.sampled_from(["replace", "delete", "insert"]))
        if action == "delete" and isinstance(parent, dict):
            del parent[path[-1]]
        elif action == "insert" and isinstance(parent, dict):
            parent[draw(st.text(max_size=6))] = draw(values)
        else:
            parent[path[-1]] = draw(values)
    return doc


def survives_downstream(runs):
    verdicts = judge_run(runs[-1], runs)
    render_comparison(verdicts, version_diffs=[], canary_ratio=None, width=100)
    render_summary(runs[-1].benchmarks, width=100)
    render_summary(runs[-1].benchmarks, verbosity=-1)
    for verdict in verdicts.values():
        verdict.line()
        assert verdict.ratio is None or math.isfinite(verdict.ratio)


# TESSERABENCH_FUZZ_EXAMPLES=5000 for a deeper search than CI's.
FUZZ = settings(
    max_examples=int(os.environ.get("TESSERABENCH_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@FUZZ
@given(document=mutated(BASELINE))
def test_mutated_baselines_load_or_fail_with_a_named_error(tmp_path, document):
    path = tmp_path / "main" / f"{KEY}.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(document))
    try:
        baseline = load_baseline(path, machine_key=KEY)
    except BaselineError as exc:
        assert str(path) in str(exc)
        return
    if baseline is not None and baseline.runs:
        survives_downstream(baseline.runs)


@FUZZ
@given(document=mutated(RUN))
def test_mutated_run_files_load_or_fail_with_a_named_error(tmp_path, document):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(document))
    try:
        runs = load_runs(path)
    except BaselineError as exc:
        assert str(path) in str(exc)
        return
    survives_downstream(runs)
