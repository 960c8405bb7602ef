"""A baseline written by a newer version of the plugin keeps what this version does not know:
``--bench-save`` appends a run and writes the earlier runs back with their unknown keys."""

import json

from pytest_tesserabench.machine.device import machine_key
from pytest_tesserabench.record.results import Stats

BENCH_ID = "test_k.py::test_a"


def newer_baseline() -> dict:
    stats = Stats.of([1.0, 1.1, 0.9]).to_json()
    stats["newer_stat"] = {"p99_ms": 1.2}
    run = {
        "schema": 1,
        "machine": {},
        "commit": {"sha": "0abcdef0123"},
        "started": "t0",
        "canary_ms": [],
        "benchmarks": {
            BENCH_ID: {
                "nodeid": BENCH_ID,
                "name": None,
                "timer": "cpu",
                "rounds_ms": [1.0, 1.1, 0.9],
                "stats": stats,
                "sampling": {"stop": "time", "passes": 4, "newer_sampling": [1, 2]},  # (saved as this run measures)
                "newer_record": "kept",
            }
        },
        "newer_run": {"why": "a field a later version added"},
    }
    return {"schema": 1, "name": "main", "machine_key": machine_key(), "runs": [run], "newer_file": True}


def test_a_save_keeps_the_keys_a_newer_version_wrote(pytester, fast):
    pytester.makepyfile(test_k="def test_a(bench):\n    bench(lambda: sum(range(10)))\n")
    path = pytester.path / "baselines" / "main" / f"{machine_key()}.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(newer_baseline(), indent=2))
    result = pytester.runpytest("--bench-save=main", *fast)
    result.assert_outcomes(passed=1)
    saved = json.loads(path.read_text())
    assert len(saved["runs"]) == 2
    earlier = saved["runs"][0]
    record = earlier["benchmarks"][BENCH_ID]
    assert earlier["newer_run"] == {"why": "a field a later version added"}
    assert record["stats"]["newer_stat"] == {"p99_ms": 1.2}
    assert record["sampling"]["newer_sampling"] == [1, 2]
    assert record["newer_record"] == "kept"
    assert saved["newer_file"] is True
