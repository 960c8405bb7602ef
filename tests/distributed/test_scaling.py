"""Strong and weak scaling arithmetic, and the `tesserabench scaling` command."""

import json

import pytest

from pytest_tesserabench import cli
from pytest_tesserabench.record.results import BenchRecord, RunDocument, Stats
from pytest_tesserabench.report.scaling import ScalingError, scaling


def run(world_size, times):
    records = {
        name: BenchRecord(nodeid=name, name=None, group="g", timer="cpu", rounds_ms=[t] * 3, stats=Stats.of([t] * 3))
        for name, t in times.items()
    }
    machine = {"device": "cpu", "arch": "x86_64"} | ({"world_size": world_size} if world_size > 1 else {})
    return RunDocument(benchmarks=records, machine=machine)


def test_efficiencies_against_the_smallest_world():
    table = scaling([("a", run(1, {"t": 8.0, "alone": 1.0})), ("b", run(2, {"t": 5.0})), ("c", run(4, {"t": 4.0}))])
    assert list(table) == ["t"]  # measured at one size only: no scaling to show
    one, two, four = table["t"]
    assert (one.speedup, one.strong_efficiency, one.weak_efficiency) == (1.0, 1.0, 1.0)
    assert two.speedup == pytest.approx(1.6) and two.strong_efficiency == pytest.approx(0.8)
    assert four.speedup == pytest.approx(2.0) and four.strong_efficiency == pytest.approx(0.5)
    assert four.weak_efficiency == pytest.approx(8.0 / 4.0)  # T0 / T: fixed work per rank


def test_the_smallest_world_need_not_be_one():
    (_, four) = scaling([("x", run(4, {"t": 2.0})), ("y", run(2, {"t": 3.0}))])["t"]
    assert four.strong_efficiency == pytest.approx(1.5 * 2 / 4)


def test_two_runs_of_one_size_are_refused():
    with pytest.raises(ScalingError, match="a and b both ran on 2 rank"):
        scaling([("a", run(2, {"t": 1.0})), ("b", run(2, {"t": 1.0}))])


def test_command(tmp_path, capsys):
    paths = []
    for n, t in ((1, 8.0), (2, 5.0)):
        path = tmp_path / f"ws{n}.json"
        path.write_text(json.dumps(run(n, {"tests/x.py::t": t}).to_json()))
        paths.append(str(path))
    assert cli.main(["scaling", *paths]) == cli.EXIT_OK
    out = capsys.readouterr().out
    assert "tests/x.py::t" in out and "1.60x" in out and "80%" in out
    assert cli.main(["scaling", paths[0]]) == cli.EXIT_USAGE
    assert "no benchmark was measured at two world sizes" in capsys.readouterr().err
