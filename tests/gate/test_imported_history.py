"""`tesserabench import pytest-benchmark`: another tool's saved runs as a baseline's history,
shown and never compared with this plugin's timings (pytest_tesserabench.history.imported)."""

from __future__ import annotations

import contextlib
import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from pytest_tesserabench.cli import main
from pytest_tesserabench.gate.pipeline import judge_run
from pytest_tesserabench.history.baseline import load_runs, save_run
from pytest_tesserabench.record.results import IMPORTED_TIMER, RunDocument

KEY = "cpu-x86-64-amd-epyc-7b13"
TESTS = (
    "tests/test_k.py::test_add",
    "tests/test_k.py::test_mul[64]",
    "tests/test_k.py::test_sub",
    "tests/test_k.py::test_div",
)


def their_run(when: str, sha: str, *, data: bool = True, scale: float = 1.0, seed: int = 0) -> dict:
    """A run as pytest-benchmark 5 saves it (seconds; ``data`` with --benchmark-save-data)."""
    rng = np.random.default_rng(seed)
    benchmarks = []
    for i, fullname in enumerate(TESTS):
        rounds = (1e-3 * (i + 1) * scale * np.exp(rng.normal(0, 0.01, 20))).tolist()
        stats = {
            "min": min(rounds), "max": max(rounds), "mean": float(np.mean(rounds)), "stddev": float(np.std(rounds)),
            "rounds": len(rounds), "median": float(np.median(rounds)), "iqr": 1e-5, "q1": min(rounds),
            "q3": max(rounds), "iqr_outliers": 0, "stddev_outliers": 0, "outliers": "0;0", "ld15iqr": min(rounds),
            "hd15iqr": max(rounds), "ops": 1 / float(np.mean(rounds)), "total": sum(rounds), "iterations": 1,
        }  # fmt: skip
        if data:
            stats["data"] = rounds
        name = fullname.split("::")[-1]
        benchmarks.append(
            {
                "group": None, "name": name, "fullname": fullname, "params": {"n": 64} if "[" in name else None,
                "param": "64" if "[" in name else None, "extra_info": {"note": "x"}, "options": {}, "stats": stats,
            }
        )  # fmt: skip
    return {
        "machine_info": {"node": "ci-7", "machine": "x86_64", "python_version": "3.11.7",
                         "cpu": {"brand_raw": "AMD EPYC 7B13", "count": 2, "arch_string_raw": "x86_64"}},
        "commit_info": {"id": sha, "time": when, "dirty": False, "project": "k", "branch": "main"},
        "benchmarks": benchmarks,
        "datetime": when,
        "version": "5.3.1",
    }  # fmt: skip


def saved(tmp_path: Path, runs: list[dict]) -> Path:
    folder = tmp_path / ".benchmarks" / "Linux-CPython-3.11-64bit"
    folder.mkdir(parents=True)
    for i, run in enumerate(runs, 1):
        (folder / f"{i:04d}_{run['commit_info']['id'][:8]}.json").write_text(json.dumps(run))
    return tmp_path / ".benchmarks"


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(args))
    return code, out.getvalue(), err.getvalue()


def test_saved_runs_become_the_baselines_history_in_the_order_they_were_made(tmp_path):
    # 0002 holds only the summary (no --benchmark-save-data): its median is kept, no rounds.
    folder = saved(
        tmp_path,
        [
            their_run("2026-03-01T10:00:00+00:00", "a" * 40),
            their_run("2026-03-02T10:00:00+00:00", "b" * 40, data=False),
        ],
    )
    code, out, err = cli("import", "pytest-benchmark", str(folder), "--name", "main", "--dir", str(tmp_path / "b"))
    assert code == 0, err
    assert f"imported 2 run(s) of 4 benchmark(s) into {tmp_path / 'b' / 'main' / KEY}.json" in out
    assert "rounds (saved without --benchmark-save-data: the summary only)" in out
    first, second = load_runs(tmp_path / "b" / "main" / f"{KEY}.json")
    assert [first.commit["sha"], second.commit["sha"]] == ["a" * 40, "b" * 40]
    assert (first.started, first.machine["device"]) == ("2026-03-01T10:00:00Z", "AMD EPYC 7B13")
    record = first.benchmarks["tests/test_k.py::test_mul[64]"]
    assert record.timer == IMPORTED_TIMER and record.params == {"n": 64} and record.extra_info == {"note": "x"}
    assert len(record.rounds_ms) == 20 and record.median_ms == pytest.approx(2.0, rel=0.05)  # ms, not s
    summary_only = second.benchmarks["tests/test_k.py::test_mul[64]"]
    assert summary_only.rounds_ms == [] and summary_only.median_ms == pytest.approx(2.0, rel=0.05)
    # its interval from its quartiles and round count (the box plot's notch), not a width of zero
    theirs = their_run("2026-03-02T10:00:00+00:00", "b" * 40, data=False)["benchmarks"][1]["stats"]
    half = 1.57 * (theirs["q3"] - theirs["q1"]) * 1e3 / math.sqrt(theirs["rounds"])
    assert summary_only.stats.ci95_ms == pytest.approx((summary_only.median_ms - half, summary_only.median_ms + half))
    assert summary_only.outcome is None  # (pytest-benchmark does not say whether the test passed)
    code, out, _ = cli("show", "main", "--dir", str(tmp_path / "b"), "--width", "150")
    assert code == 0 and "pytest-benchmark 5.3.1" in out


def _ours(seed: int, scale: float = 1.0, when: str = "2026-03-10T10:00:00Z") -> RunDocument:
    rng = np.random.default_rng(seed)
    return RunDocument.from_json(
        {
            "schema": 1,
            "machine": {"device": "AMD EPYC 7B13", "arch": "x86_64", "python": "3.11.7"},
            "commit": {"sha": "c" * 40, "branch": "main", "dirty": False},
            "started": when,
            "benchmarks": {
                nodeid: {
                    "timer": "cpu",
                    "outcome": "passed",
                    "rounds_ms": (
                        0.9 * (i + 1) * (scale if i == 0 else 1.0) * np.exp(rng.normal(0, 0.01, 20))
                    ).tolist(),
                }
                for i, nodeid in enumerate(TESTS)
            },
        }
    )


def test_the_gate_never_compares_our_timings_with_theirs(tmp_path):
    folder = saved(tmp_path, [their_run(f"2026-03-0{i}T10:00:00+00:00", f"{i}" * 40, seed=i) for i in range(1, 4)])
    root = tmp_path / "b"
    assert cli("import", "pytest-benchmark", str(folder), "--name", "main", "--dir", str(root))[0] == 0
    # Ours reads 10% faster than theirs (another tool, another figure): no verdict on timings.
    verdicts = judge_run(_ours(9), load_runs(root / "main" / f"{KEY}.json"))
    assert {v.status for v in verdicts.values()} == {"NOT_GATED"}
    assert "imported from pytest-benchmark" in " ".join(verdicts[TESTS[0]].notes)
    # Beside runs of our own, theirs change nothing: the verdicts are those against ours alone.
    alone = tmp_path / "alone"
    for seed in range(3):
        save_run(root, "main", KEY, _ours(seed))
        save_run(alone, "main", KEY, _ours(seed))
    slower = _ours(7, scale=1.3)
    mixed = judge_run(slower, load_runs(root / "main" / f"{KEY}.json"))
    ours = judge_run(slower, load_runs(alone / "main" / f"{KEY}.json"))
    assert mixed[TESTS[0]].status == "REGRESSED"
    assert {i: (v.status, v.ratio, v.ci) for i, v in mixed.items()} == {
        i: (v.status, v.ratio, v.ci) for i, v in ours.items()
    }


def test_imported_runs_go_before_the_newer_runs_of_our_own(tmp_path):
    root = tmp_path / "b"
    save_run(root, "main", KEY, _ours(0, when="2026-04-01T10:00:00Z"))
    folder = saved(tmp_path, [their_run("2026-03-01T10:00:00+00:00", "a" * 40)])
    assert cli("import", "pytest-benchmark", str(folder), "--name", "main", "--dir", str(root))[0] == 0
    runs = load_runs(root / "main" / f"{KEY}.json")
    assert [run.started for run in runs] == ["2026-03-01T10:00:00Z", "2026-04-01T10:00:00Z"]


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (None, "no run saved by pytest-benchmark in it (files named NNNN_*.json"),
        ("{not json", "cannot be read as JSON"),
        (json.dumps({"benchmarks": {}}), "not a run saved by pytest-benchmark (no 'benchmarks' list)"),
        (json.dumps({"benchmarks": [{"fullname": "t.py::a", "stats": {"median": "fast"}}]}), "stats.median is 'fast'"),
        (json.dumps({"benchmarks": [{"stats": {"median": 1.0}}]}), "no 'fullname' (the test's node id)"),
    ],
)
def test_what_is_not_their_saved_runs_is_refused_naming_the_file_and_nothing_is_written(tmp_path, content, said):
    folder = tmp_path / ".benchmarks" / "m"
    folder.mkdir(parents=True)
    if content is not None:
        (folder / "0001_x.json").write_text(content)
    code, out, err = cli(
        "import", "pytest-benchmark", str(tmp_path / ".benchmarks"), "--name", "main", "--dir", str(tmp_path / "b")
    )
    assert code == 2 and said in err and out == ""
    assert not (tmp_path / "b").exists()


def test_a_run_that_names_no_cpu_needs_a_machine_key(tmp_path):
    run = their_run("2026-03-01T10:00:00+00:00", "a" * 40)
    run["machine_info"] = {"machine": "x86_64"}
    folder = saved(tmp_path, [run])
    code, _, err = cli("import", "pytest-benchmark", str(folder), "--name", "main", "--dir", str(tmp_path / "b"))
    assert code == 2 and "name the machine with --machine KEY" in err
    code, out, _ = cli(
        "import", "pytest-benchmark", str(folder), "--name", "main", "--dir", str(tmp_path / "b"), "--machine", "ci-box"
    )
    assert code == 0 and (tmp_path / "b" / "main" / "ci-box.json").is_file()


def test_each_machines_runs_go_to_its_own_file(tmp_path):
    other = their_run("2026-03-02T10:00:00+00:00", "b" * 40)
    other["machine_info"]["cpu"]["brand_raw"] = "Intel Xeon Platinum 8480"
    folder = saved(tmp_path, [their_run("2026-03-01T10:00:00+00:00", "a" * 40), other])
    code, out, _ = cli("import", "pytest-benchmark", str(folder), "--name", "main", "--dir", str(tmp_path / "b"))
    assert code == 0 and out.count("imported 1 run(s) of 4 benchmark(s)") == 2
    assert sorted(p.name for p in (tmp_path / "b" / "main").iterdir()) == [
        f"{KEY}.json",
        "cpu-x86-64-intel-xeon-platinum-8480.json",
    ]
