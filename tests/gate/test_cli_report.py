import json
from pathlib import Path

import numpy as np
import pytest

from pytest_tesserabench.cli import main
from pytest_tesserabench.gate.pipeline import judge_run
from pytest_tesserabench.history.baseline import save_run
from pytest_tesserabench.measure.canary import measure_canary
from pytest_tesserabench.record.results import RunDocument
from pytest_tesserabench.report.comparison_table import render_comparison, software_differences

KEY = "cpu-x86-64-test"


def make_run(rng, scale=1.0, torch="2.13.0"):
    return RunDocument.from_json(run_dict(rng, scale, torch))


def run_dict(rng, scale=1.0, torch="2.13.0"):
    shift = rng.normal(0, 0.003)
    return {
        "schema": 1,
        "machine": {"torch": torch, "triton": "3.9.0", "python": "3.11.9", "device": "cpu"},
        "commit": {"sha": "a" * 40, "branch": "main", "dirty": False},
        "started": "2026-11-21T15:07:16Z",
        "canary_ms": [2.0, 2.1],
        "benchmarks": {
            name: {"timer": "cpu", "rounds_ms": (np.exp(shift + rng.normal(0, 0.005, 10)) * s).tolist()}
            for name, s in (("t::fast", 1.0), ("t::slow", scale))
        },
    }


@pytest.fixture
def files(tmp_path):
    rng = np.random.default_rng(0)
    for _ in range(3):
        baseline = save_run(tmp_path / "baselines", "main", KEY, make_run(rng))
    same, slower = tmp_path / "same.json", tmp_path / "slower.json"
    same.write_text(json.dumps(run_dict(rng)))
    slower.write_text(json.dumps(run_dict(rng, scale=1.3, torch="2.11.0")))
    return baseline, same, slower


def test_compare_same_exits_zero(files, capsys):
    baseline, same, _ = files
    assert main(["compare", str(baseline), str(same)]) == 0
    out = capsys.readouterr().out
    assert "t::fast" in out and "UNCHANGED" in out and "canary: 1.000x" in out


def test_compare_slower_exits_one_and_names_it(files, capsys):
    baseline, _, slower = files
    assert main(["compare", str(baseline), str(slower)]) == 1
    out = capsys.readouterr().out
    assert "t::slow: REGRESSED (severe)" in out
    assert "torch 2.13.0 -> 2.11.0" in out


def test_compare_warns_when_the_run_judged_is_older_than_what_it_is_judged_against(files, tmp_path, capsys):
    baseline, same, _ = files
    assert main(["compare", str(baseline), str(same)]) == 0
    assert "warning" not in capsys.readouterr().err  # (all started alike: nothing to say)
    earlier = json.loads(same.read_text())
    earlier["started"] = "2026-11-20T09:00:00Z"
    older = tmp_path / "older.json"
    older.write_text(json.dumps(earlier))
    main(["compare", str(baseline), str(older)])
    err = capsys.readouterr().err
    assert "warning: older.json, the run judged (the last argument), was recorded 2026-11-20 09:00, before every" in err
    assert "compare takes the runs oldest first, the one to judge last" in err


def test_compare_threshold_option(files):
    baseline, _, slower = files
    assert main(["compare", str(baseline), str(slower), "--threshold", "50"]) == 0
    # One parser for percentages: 0 (fail on any significant slowdown) is accepted by both.
    assert main(["compare", str(baseline), str(slower), "--threshold", "0%"]) == 1


def test_compare_work_threshold_option(tmp_path):
    # the same kernel holding half as many instructions again: a note, or a failure past the threshold
    def run(sass):
        data = run_dict(np.random.default_rng(1))
        kernel = {"name": "k", "arch": "sm_90", "num_warps": 4, "sass_instructions": sass, "occupancy": 0.5}
        data["benchmarks"]["t::fast"]["kernels"] = [kernel]
        path = tmp_path / f"run{sass}.json"
        path.write_text(json.dumps(data))
        return str(path)

    old, new = run(200), run(300)
    assert main(["compare", old, new]) == 0
    assert main(["compare", old, new, "--work-threshold", "20"]) == 1


@pytest.mark.parametrize(
    "argv",
    [
        ["compare", "x"],
        ["compare", "a", "b", "--alpha", "2"],
        ["compare", "a", "b", "--threshold", "abc"],
        ["compare", "a", "b", "--threshold", "-1"],
        ["frobnicate"],
        [],
    ],
)
def test_usage_errors_exit_two(argv, capsys):
    assert main(argv) == 2


def test_bad_file_exits_two_and_names_it(files, tmp_path, capsys):
    baseline, _, _ = files
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert main(["compare", str(baseline), str(broken)]) == 2
    err = capsys.readouterr().err
    # either kind of file is read here: the message does not guess which it was meant to be
    assert str(broken) in err and "the result or baseline file is not valid JSON" in err


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (a device where every write fails)")
def test_a_failed_write_is_one_line_naming_the_path(files, capsys):
    baseline, same, _ = files
    for option in ("--md", "--csv"):
        assert main(["compare", str(baseline), str(same), option, "/dev/full"]) == 2
        assert f"tesserabench: error: {option} /dev/full: cannot write it: No space left on device\n" in (
            capsys.readouterr().err
        )
    pytest.importorskip("matplotlib")
    assert main(["report", str(same), "-o", "/dev/full"]) == 2
    assert "error: -o /dev/full: cannot write it: No space left on device" in capsys.readouterr().err


@pytest.mark.parametrize("command", [["show", "main"], ["compare", "a.json", "b.json"], ["scaling", "a.json"]])
@pytest.mark.parametrize("width", ["-1", "0", "39", "wide", "100000"])
def test_a_width_no_table_fits_is_refused(command, width, capsys):
    assert main([*command, f"--width={width}"]) == 2
    assert f"argument --width: width '{width}' " in capsys.readouterr().err


def test_show_lists_runs_within_80_columns(files, tmp_path, capsys):
    assert main(["show", "main", "--dir", str(tmp_path / "baselines"), "--width", "80"]) == 0
    out = capsys.readouterr().out
    assert KEY in out and "aaaaaaaa" in out and "2.13.0" in out
    assert out.count("2026-11-21 15:07") == 3  # to the minute
    path = str(tmp_path / "baselines" / "main" / f"{KEY}.json")
    assert f"  {path}\n" in out  # the file, whole, on a line of its own however long
    assert max(len(line.rstrip()) for line in out.splitlines() if path not in line) <= 80
    rows = [line.split() for line in out.splitlines() if "2026-11-21" in line]
    assert all(len(row) == len(rows[0]) for row in rows) and "…" not in out  # no cell cut or wrapped
    assert "every run: torch 2.13.0, triton 3.9.0" in " ".join(out.split())  # shared by all: in the title


def test_show_says_how_many_processes_a_saved_run_was_measured_in(files, tmp_path, capsys):
    rng = np.random.default_rng(1)
    run = run_dict(rng)
    fresh = {"rounds_ms": [1.0, 1.0, 1.0], "pass_rounds": [3], "canary_ms": 2.0}
    run["benchmarks"]["t::fast"]["confirm"] = [fresh, fresh]
    save_run(tmp_path / "baselines", "main", KEY, RunDocument.from_json(run))
    assert main(["show", "main", "--dir", str(tmp_path / "baselines"), "--width", "80"]) == 0
    out = capsys.readouterr().out
    table = [line for line in out.splitlines() if str(tmp_path) not in line]  # (the path's line is whole)
    assert "processes" in out and max(len(line.rstrip()) for line in table) <= 80
    rows = [line.split() for line in out.splitlines() if "2026-11-21" in line]
    assert [row[6] for row in rows] == ["-", "-", "-", "3"]  # (after #, date, time, commit, branch, benchmarks)


def test_show_says_what_the_gate_can_catch_against_the_baseline(files, tmp_path, capsys):
    # Three saves of two benchmarks about 0.3% apart: slowdowns of about 3% are caught, so the
    # default 5% threshold is within reach and a 1% one is not, and it says what to do.
    from pytest_tesserabench.gate.pipeline import History
    from pytest_tesserabench.history.baseline import load_baseline

    assert main(["show", "main", "--dir", str(tmp_path / "baselines"), "--width", "100"]) == 0
    out = capsys.readouterr().out
    catches = History.of(load_baseline(files[0], machine_key=KEY).runs).detectable()
    assert set(catches) == {"t::fast", "t::slow"} and all(0.01 < c < 0.05 for c in catches.values())
    rows = {line.split()[0]: line.split()[1] for line in out.splitlines() if line.strip().startswith("t::")}
    assert rows == {bench_id: f"{size:.1%}" for bench_id, size in catches.items()}
    assert "judged at 5%" in out and "cannot be judged" not in out
    assert {line.split()[-1] for line in out.splitlines() if line.strip().startswith("t::")} == {"yes"}
    assert main(["show", "main", "--dir", str(tmp_path / "baselines"), "--threshold", "1", "--width", "100"]) == 0
    out = capsys.readouterr().out
    assert {line.split()[-1] for line in out.splitlines() if line.strip().startswith("t::")} == {"no"}
    strict = " ".join(out.split())
    assert "threshold 1%" in strict and "judged at 1%" in strict
    assert "2 of 2 benchmark(s) cannot be judged at 1% on this machine" in strict and "--bench-ab=REF" in strict


def test_show_missing_and_bad_names(tmp_path, capsys):
    assert main(["show", "nope", "--dir", str(tmp_path)]) == 2
    assert "--bench-save=nope" in capsys.readouterr().err
    assert main(["show", "main", "--dir", str(tmp_path), "--machine", "other"]) == 2
    assert main(["show", "..", "--dir", str(tmp_path)]) == 2
    assert "baseline name '..' is a path, not a name" in capsys.readouterr().err
    for name in ("main\n", ".hidden", "-", "main.json", "..main", "a..b"):
        assert main(["show", name, "--dir", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert "must start with a letter or digit" in err and "such as 'main'" in err  # what a valid name is
        assert "--bench-save" not in err  # never a suggestion to save under the name refused


def test_show_and_compare_find_the_baselines_from_a_subdirectory(files, tmp_path, capsys, monkeypatch):
    # as the plugin's default, <rootdir>/baselines, is found from anywhere in the project
    (tmp_path / "tests" / "deep").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "tests" / "deep")
    assert main(["show", "main", "--width", "80"]) == 0
    assert KEY in capsys.readouterr().out
    monkeypatch.chdir(tmp_path.parent)  # no baselines/ here or above: the message names the path tried
    assert main(["show", "main"]) == 2
    assert f"under {tmp_path.parent / 'baselines'}" in capsys.readouterr().err


def test_inspect_is_delegated(capsys):
    code = main(["inspect", "--help"])
    assert code == 0
    assert "tesserabench inspect" in capsys.readouterr().out


def test_render_comparison_text():
    rng = np.random.default_rng(1)
    verdicts = judge_run(make_run(rng, scale=1.3), [make_run(rng) for _ in range(3)])
    text = render_comparison(verdicts, version_diffs=["torch 2.11 -> 2.13"], canary_ratio=1.02, width=100)
    assert "\x1b[" not in text
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 100
    assert text.index("t::slow") < text.index("t::fast")  # regressions first
    assert "REGRESSED (severe)" in text and "1 regressed, 1 unchanged" in text
    assert "canary: 1.020x" in text and "torch 2.11 -> 2.13" in text
    assert "\x1b[" in render_comparison(verdicts, version_diffs=[], canary_ratio=None, color=True)


def test_software_differences():
    assert software_differences(
        {"torch": "2.13", "cuda": "12.8", "python": "3.12"}, {"torch": "2.11", "cuda": "12.8"}
    ) == ["torch 2.11 -> 2.13", "python ? -> 3.12"]
    assert software_differences({}, None) == []


def test_canary_is_a_fixed_short_workload():
    samples = measure_canary(samples=5)
    assert len(samples) == 5 and all(0 < s < 1000 for s in samples)


@pytest.mark.parametrize(
    ("ratio", "said"),
    [
        (0.97, "3.0% less time: a faster machine"),
        (1.37, "37.0% more time: a slower machine"),
        (1.0, "as fast"),
        (0.992, "-0.8%: about as fast a machine"),  # within the canary's own spread: no claim either way
    ],
)
def test_the_canary_line_says_which_way_the_machine_moved(ratio, said):
    # The figure is a ratio of times: 0.984x read as "speed 0.984x" looks slower, and is faster.
    from pytest_tesserabench.report.comparison_table import canary_line

    assert canary_line(ratio).startswith(f"canary: {ratio:.3f}x the baseline's time") and said in canary_line(ratio)


def test_show_names_the_kernels_whose_figures_the_baseline_gates(tmp_path, capsys):
    kernels = [
        {"name": "softmax_kernel", "arch": arch, "registers": 16, "occupancy": 1.0} for arch in ("sm_80", "sm_90")
    ]
    record = {"timer": "interpreter", "rounds_ms": [80.0] * 3, "kernels": kernels}
    save_run(tmp_path / "baselines", "main", KEY, RunDocument.from_json({"benchmarks": {"t::softmax": record}}))
    assert main(["show", "main", "--dir", str(tmp_path / "baselines"), "--width", "200"]) == 0
    out = capsys.readouterr().out
    assert "Kernel figures of 1 kernel(s) on sm_80, sm_90 (softmax_kernel): compared exactly" in out
    # a baseline of timings alone says nothing of kernels
    save_run(tmp_path / "plain", "main", KEY, make_run(np.random.default_rng(0)))
    assert main(["show", "main", "--dir", str(tmp_path / "plain"), "--width", "200"]) == 0
    assert "Kernel figures" not in capsys.readouterr().out


def test_show_keeps_ids_that_differ_apart_and_whole_on_one_line(tmp_path, capsys):
    # two long ids that differ only in their middle, at 80 columns: shortened, never merged or split
    ids = [f"tests/kernels/attention/flash/{way}/test_attention.py::test_fwd[causal-bf16-seq4096-head128-A]"
           for way in ("forward", "backward")]  # fmt: skip
    for k in range(3):
        benchmarks = {i: {"timer": "cpu", "rounds_ms": [1.0 + 0.01 * k] * 5} for i in ids}
        save_run(tmp_path / "baselines", "main", KEY, RunDocument.from_json({"benchmarks": benchmarks}))
    assert main(["show", "main", "--dir", str(tmp_path / "baselines"), "--width", "80"]) == 0
    rows = [line for line in capsys.readouterr().out.splitlines() if line.strip().startswith("tests/")]
    assert len(rows) == 2 and len({row.split()[0] for row in rows}) == 2
    assert all(len(row.rstrip()) <= 80 and row.split()[-1] in ("yes", "no") for row in rows)
