"""pytest-benchmark and this plugin installed together, and a suite moving from one to the other
with its history (docs/usage.md, "Coming from pytest-benchmark")."""

from __future__ import annotations

import json

import pytest

from pytest_tesserabench.cli import main as tesserabench
from pytest_tesserabench.machine.device import machine_info, machine_key

pytest.importorskip("pytest_benchmark", reason="pytest-benchmark is not installed (the test extra installs it)")


@pytest.fixture(autouse=True)
def outside_xdist(monkeypatch):
    """pytest-benchmark turns itself off in an xdist worker (PYTEST_XDIST_WORKER), which the
    in-process runs inherit when this suite runs under -n."""
    monkeypatch.delenv("PYTEST_XDIST_WORKER", raising=False)


THEIRS_FAST = ("--benchmark-max-time=0.01", "--benchmark-min-rounds=3", "--benchmark-warmup=off")

BOTH = """
def work():
    return sum(range(2000))

def test_theirs(benchmark):
    benchmark(work)

def test_ours(bench):
    bench(work)
"""


def test_both_run_side_by_side_and_each_can_be_turned_off(pytester, fast):
    pytester.makepyfile(test_k=BOTH)
    result = pytester.runpytest(
        "--bench", "--bench-json=ours.json", "--benchmark-json=theirs.json", *fast, *THEIRS_FAST
    )
    result.assert_outcomes(passed=2)
    ours = json.loads((pytester.path / "ours.json").read_text())["benchmarks"]
    theirs = json.loads((pytester.path / "theirs.json").read_text())["benchmarks"]
    assert list(ours) == ["test_k.py::test_ours"] and [b["fullname"] for b in theirs] == ["test_k.py::test_theirs"]
    # Each plugin off: its fixture is gone (that test errors), the other one's works as before.
    result = pytester.runpytest("-p", "no:benchmark", "--bench", *fast)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*fixture 'benchmark' not found*"])
    result = pytester.runpytest("-p", "no:tesserabench", *THEIRS_FAST)
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*fixture 'bench' not found*"])


def test_a_suite_moves_over_with_its_history(pytester, fast, capsys):
    # Before: pytest-benchmark, saving each run with its rounds.
    pytester.makepyfile(
        test_k="def work():\n    return sum(range(2000))\n\ndef test_k(benchmark):\n    benchmark(work)\n"
    )
    for _ in range(2):
        pytester.runpytest("--benchmark-autosave", "--benchmark-save-data", *THEIRS_FAST).assert_outcomes(passed=1)
    # The move: its saved runs become the baseline's history (filed under this machine's key,
    # whatever py-cpuinfo called the CPU), and the test uses `bench`.
    key = machine_key(machine_info())
    code = tesserabench(["import", "pytest-benchmark", str(pytester.path / ".benchmarks"), "--name", "main",
                         "--dir", str(pytester.path / "baselines"), "--machine", key])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 0 and "imported 2 run(s) of 1 benchmark(s)" in out
    pytester.makepyfile(test_k="def work():\n    return sum(range(2000))\n\ndef test_k(bench):\n    bench(work)\n")
    # Compared with their runs alone: shown, not judged (another tool's figures).
    result = pytester.runpytest("--bench-compare=main", "--bench-json=run.json", *fast)
    result.assert_outcomes(passed=1)
    (record,) = json.loads((pytester.path / "run.json").read_text())["benchmarks"].values()
    assert record["verdict"]["status"] == "NOT_GATED"
    assert "only in runs imported from pytest-benchmark" in " ".join(record["verdict"]["notes"])
    # The baseline lists their runs, then ours once saved.
    pytester.runpytest("--bench-save=main", *fast).assert_outcomes(passed=1)
    capsys.readouterr()
    code = tesserabench(["show", "main", "--dir", str(pytester.path / "baselines"), "--width", "200"])
    shown = capsys.readouterr().out
    assert code == 0 and shown.count("pytest-benchmark") == 2 and "imported from" in shown
