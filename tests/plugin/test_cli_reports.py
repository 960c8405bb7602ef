"""`tesserabench compare` over many runs and `tesserabench report`, from files and baseline NAMEs."""

import csv
import json
import re
import sys

import numpy as np
import pytest

from pytest_tesserabench.cli import main
from pytest_tesserabench.machine import device as machine

KEY = "cpu-x86-64-test"
MACHINE = {"device": "test", "arch": "x86_64", "torch": "2.13.0"}


def run_dict(rng, index, slow=1.0, ids=("t.py::test_a[n1]", "t.py::test_a[n2]")):
    benchmarks = {}
    for n, record_id in enumerate(ids, 1):
        scale = slow if n == 2 else 1.0
        benchmarks[record_id] = {
            "group": "t.py::test_a",
            "params": {"n": n},
            "timer": "cpu",
            "flops": 2e9 * n,
            "rounds_ms": (n * scale * np.exp(rng.normal(0, 0.003) + rng.normal(0, 0.005, 10))).tolist(),
        }
    return {
        "schema": 1,
        "machine": MACHINE,
        "commit": {"sha": f"{index}" * 40},
        "started": f"2026-11-2{index}T10:00:00Z",
        "canary_ms": [2.0],
        "benchmarks": benchmarks,
    }


@pytest.fixture
def runs(tmp_path):
    rng = np.random.default_rng(0)
    paths = []
    for index in range(1, 4):
        path = tmp_path / f"run{index}.json"
        path.write_text(json.dumps(run_dict(rng, index)))
        paths.append(path)
    slower = tmp_path / "slower.json"
    slower.write_text(json.dumps(run_dict(rng, 4, slow=1.3)))
    return paths, slower


def test_compare_many_runs_shows_each_benchmark_across_them(runs, capsys, tmp_path):
    paths, slower = runs
    code = main(
        ["compare", *map(str, paths), str(slower), "--csv", str(tmp_path / "c.csv"), "--md", str(tmp_path / "c.md")]
    )
    assert code == 1  # n2 got 30% slower than the three runs before it
    out = capsys.readouterr().out
    block = out[out.index("t.py::test_a[n2]\n") :]
    lines = block.splitlines()[3:7]
    assert [line.split()[:2] for line in lines] == [
        ["1", "1111111"],
        ["2", "2222222"],
        ["3", "3333333"],
        ["4", "4444444"],
    ]
    assert lines[0].split()[-1] == "+0.0%" and re.search(r"\+3\d\.\d%$", lines[3])  # change from the first run
    assert "REGRESSED (severe)" in out and "1 regressed, 1 unchanged" in out
    rows = list(csv.DictReader((tmp_path / "c.csv").open()))
    assert len(rows) == 8 and {r["run"] for r in rows} == {"1", "2", "3", "4"}
    last = {r["id"]: r for r in rows if r["run"] == "4"}
    assert last["t.py::test_a[n2]"]["verdict"] == "REGRESSED" and float(last["t.py::test_a[n2]"]["change_pct"]) > 20
    assert (tmp_path / "c.md").read_text().splitlines()[2] == "**1 regressed, 1 unchanged**"


def test_compare_two_runs_is_the_plain_comparison(runs, capsys):
    paths, slower = runs
    assert main(["compare", str(paths[0]), str(paths[1])]) == 0
    out = capsys.readouterr().out
    assert "2 unchanged" in out and "vs first" not in out  # no across-runs tables for two


def test_compare_takes_a_baseline_name_for_the_files_machine(runs, capsys, tmp_path):
    from pytest_tesserabench.history.baseline import save_run
    from pytest_tesserabench.record.results import RunDocument

    paths, slower = runs
    key = machine.machine_key(MACHINE)
    for path in paths:
        save_run(tmp_path / "baselines", "main", key, RunDocument.from_json(json.loads(path.read_text())))
    save_run(tmp_path / "baselines", "main", "another-machine", RunDocument.from_json(json.loads(paths[0].read_text())))
    assert main(["compare", "main", str(slower), "--dir", str(tmp_path / "baselines")]) == 1
    assert "REGRESSED" in capsys.readouterr().out
    assert main(["compare", "nope", str(slower), "--dir", str(tmp_path / "baselines")]) == 2
    assert "'nope' is neither a file nor a baseline" in capsys.readouterr().err


def test_report_writes_a_page_and_compares_with_the_runs_after_it(runs, capsys, tmp_path):
    paths, slower = runs
    out = tmp_path / "report.html"
    assert main(["report", str(slower), *map(str, paths), "-o", str(out)]) == 0
    assert "wrote the HTML report of 2 benchmark(s)" in capsys.readouterr().out
    page = out.read_text()
    assert page.count('<section class="group"') == 1
    assert re.findall(r'<figure class="plot (\w+)">', page) == ["sweep", "distribution", "change", "history"]
    assert "1 regressed, 1 unchanged" in page and ">1111111<" in page


@pytest.mark.parametrize(
    "content, message",
    [
        ({"schema": 2, "benchmarks": {}}, "has schema 2, this pytest-tesserabench reads schema 1"),
        ({"schema": 1, "benchmarks": {}}, "holds no measured benchmark; nothing to plot"),
    ],
)
def test_report_of_another_schema_or_of_nothing_is_a_clear_error(tmp_path, capsys, content, message):
    path = tmp_path / "run.json"
    path.write_text(json.dumps(content))
    assert main(["report", str(path), "-o", str(tmp_path / "r.html")]) == 2
    err = capsys.readouterr().err
    assert message in err and str(path) in err and "Traceback" not in err
    assert not (tmp_path / "r.html").exists()


def test_report_without_matplotlib_names_the_extra(runs, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["report", str(runs[0][0]), "-o", str(tmp_path / "r.html")]) == 2
    assert "pip install 'pytest-tesserabench[report]'" in capsys.readouterr().err


def test_plotting_no_records_is_a_plot_error():
    from pytest_tesserabench.record.results import RunDocument
    from pytest_tesserabench.report.plots import PlotError, group_plots

    with pytest.raises(PlotError, match="no measured benchmark"):
        group_plots([], verdicts={}, history=[], current=RunDocument(benchmarks={}))


def test_report_into_a_folder_is_told_an_html_file(runs, tmp_path, capsys):
    assert main(["report", str(runs[0][0]), "-o", str(tmp_path)]) == 2
    assert f"is a directory; give a file path like {tmp_path / 'report.html'}" in capsys.readouterr().err
