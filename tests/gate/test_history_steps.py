"""Steps in a baseline's history (history/steps.py) and `tesserabench history` (history/timeline.py)."""

import math
import random
import re

import numpy as np
import pytest

from pytest_tesserabench.cli import main
from pytest_tesserabench.history import steps
from pytest_tesserabench.history.baseline import save_run
from pytest_tesserabench.record.results import RunDocument

pytest.importorskip("ruptures", reason="needs ruptures (the 'history' extra; CI installs it)")


def _series(rng: random.Random, n: int, sd: float, step: float = 0.0, at: int | None = None) -> list[float]:
    return [10.0 * math.exp(rng.gauss(0, sd)) * (1 + step if at is not None and i >= at else 1) for i in range(n)]


def test_a_step_is_found_where_it_is_with_its_size_and_confidence():
    medians = _series(random.Random(3), 12, 0.01, step=0.2, at=6)
    (found,) = steps.find_steps(medians, [0.02] * 12)
    assert found.index == 6
    assert found.ratio == pytest.approx(1.2, abs=0.03)
    assert found.confidence > 0.999


def test_no_step_in_noise_nor_from_the_latest_run_alone():
    rng = random.Random(4)
    assert all(not steps.find_steps(_series(rng, 12, 0.02), [0.04] * 12) for _ in range(50))
    outlier = _series(rng, 10, 0.01) + [16.0]  # the latest run alone, 60% slower: an outlier or a step
    assert steps.find_steps(outlier, [0.02] * 11) == []


def test_a_noisy_run_weighs_less():
    medians = [10.0, 10.1, 9.9, 10.0, 12.5, 10.0, 10.1, 9.9, 10.0, 10.05]
    assert steps.find_steps(medians, [0.01] * 10) == []  # (one run off: not a level)
    wide = [0.01] * 10
    wide[4] = 0.5
    shifted = medians[:5] + [11.5, 11.6, 11.4, 11.5, 11.55]
    (found,) = steps.find_steps(shifted, wide)
    assert found.index in (4, 5)


def test_a_creep_of_small_steps_is_told_apart():
    rng = random.Random(5)
    # three steps of +3% (runs 4, 8, 12): each under the 5% threshold, +9% in all
    medians = [10.0 * 1.03 ** (i // 4) * math.exp(rng.gauss(0, 0.005)) for i in range(16)]
    found = steps.find_steps(medians, [0.01] * 16)
    assert found and all(0 < step.ratio - 1 < 0.05 for step in found)
    assert steps.creep(medians, found, threshold=0.05) == pytest.approx(0.093, abs=0.01)
    assert steps.creep(medians, found, threshold=0.10) is None
    big = [steps.Step(index=5, before_ms=10.0, after_ms=11.0, p_value=0.001)]
    assert steps.creep(medians, big, threshold=0.05) is None  # a step past the threshold says it instead
    # one busy run at the end, measured tightly, is no creep
    outlier = [10.0] * 7 + [13.0]
    assert steps.creep(outlier, [], threshold=0.05, half_widths=[0.01] * 7 + [0.001]) is None
    # +6% between runs measured too loosely to tell: no creep said
    loose = [10.0, 10.0, 10.0, 10.3, 10.3, 10.6, 10.6, 10.6]
    assert steps.creep(loose, [], threshold=0.05, half_widths=[0.3] * 8) is None
    assert steps.creep(loose, [], threshold=0.05, half_widths=[0.01] * 8) == pytest.approx(0.06, abs=0.001)


def test_false_steps_and_power_on_simulated_histories():
    rng = random.Random(2026)
    false = sum(bool(steps.find_steps(_series(rng, 20, 0.01), [0.02] * 20)) for _ in range(200))
    caught = 0
    for _ in range(100):
        at = rng.randint(3, 17)
        caught += any(abs(s.index - at) <= 1 for s in steps.find_steps(_series(rng, 20, 0.01, 0.1, at), [0.02] * 20))
    assert false <= 4  # 2% of histories at most (alpha 1% per history, Bonferroni over places)
    assert caught >= 95


def _run(rng, scale):
    return RunDocument.from_json(
        {
            "schema": 1,
            "machine": {"device": "cpu"},
            "commit": {"sha": f"{rng.integers(1 << 60):015x}", "branch": "main", "dirty": False},
            "started": "2026-11-21T15:07:16Z",
            "benchmarks": {
                name: {"timer": "cpu", "rounds_ms": (np.exp(rng.normal(0, 0.005, 10)) * s).tolist()}
                for name, s in (("t::steady", 1.0), ("t::stepped", scale))
            },
        }
    )


def test_history_lists_the_runs_and_names_the_step(tmp_path, capsys):
    rng = np.random.default_rng(0)
    for i in range(10):
        save_run(tmp_path, "main", "cpu-test", _run(rng, 1.25 if i >= 5 else 1.0))
    assert main(["history", "main", "--dir", str(tmp_path), "--width", "120"]) == 1
    out = capsys.readouterr().out
    stepped = out[out.index("t::stepped") :]
    assert "step +2" in stepped and "first in run 6" in stepped
    assert "no step in 10 run(s)" in out[out.index("t::steady") : out.index("t::stepped")]
    assert main(["history", "main", "--dir", str(tmp_path), "-k", "steady"]) == 0
    assert "t::stepped" not in capsys.readouterr().out
    assert main(["history", "main", "--dir", str(tmp_path), "-k", "stedy"]) == 2  # a typo is no pass
    assert "no benchmark of 'main' has an id containing 'stedy'" in capsys.readouterr().err
    assert main(["history", "main", "--dir", str(tmp_path), "--machine", "gpu"]) == 2
    assert "(machines recorded: cpu-test)" in capsys.readouterr().err


def test_kernels_timed_in_the_interpreter_have_no_history(tmp_path, capsys):
    rng = np.random.default_rng(5)
    for i in range(8):
        run = _run(rng, 2.0 if i >= 4 else 1.0).to_json()
        run["benchmarks"]["t::stepped"]["timer"] = "interpreter"
        save_run(tmp_path, "main", "cpu-test", RunDocument.from_json(run))
    assert main(["history", "main", "--dir", str(tmp_path)]) == 0
    assert "t::stepped" not in capsys.readouterr().out


def test_history_without_ruptures_or_baseline_says_what_to_do(tmp_path, capsys, monkeypatch):
    assert main(["history", "main", "--dir", str(tmp_path)]) == 2
    assert "no baseline 'main'" in capsys.readouterr().err
    save_run(tmp_path, "main", "cpu-test", _run(np.random.default_rng(1), 1.0))

    def missing():
        raise steps.MissingLibrary("finding steps needs ruptures: pip install 'pytest-tesserabench[history]'")

    monkeypatch.setattr(steps, "ruptures_library", missing)
    save_run(tmp_path, "main", "cpu-test", _run(np.random.default_rng(2), 1.0))
    # said before a history is long enough for steps, too: the command works the same at every length
    assert main(["history", "main", "--dir", str(tmp_path)]) == 2
    assert "pip install 'pytest-tesserabench[history]'" in capsys.readouterr().err
    for seed in range(3, 6):
        save_run(tmp_path, "main", "cpu-test", _run(np.random.default_rng(seed), 1.0))
    assert main(["history", "main", "--dir", str(tmp_path)]) == 2
    assert "pip install 'pytest-tesserabench[history]'" in capsys.readouterr().err


def test_a_comparison_names_a_baseline_that_crept(pytester):
    from pytest_tesserabench.machine import device as machine

    rng = np.random.default_rng(7)
    for i in range(12):  # +4% at runs 5 and 9: each under the 5% threshold, +8% in all
        run = _run(rng, 1.0).to_json()
        run["benchmarks"] = {
            "test_creep.py::test_a": {
                "nodeid": "test_creep.py::test_a",
                "timer": "cpu",
                "rounds_ms": (np.exp(rng.normal(0, 0.002, 10)) * 1.04 ** (i // 4)).tolist(),
            }
        }
        save_run(pytester.path / "baselines", "main", machine.machine_key(), RunDocument.from_json(run))
    pytester.makepyfile(test_creep="def test_a(bench):\n    bench(sum, range(100))\n")
    result = pytester.runpytest("--bench-compare=main", "--bench-max-time=0.01", "--bench-warmup=0")
    result.stdout.fnmatch_lines(
        ["creep: 1 benchmark(s) of baseline main got slower over its runs by more than 5% with no single step "
         "that large: test_creep.py::test_a (+7.*); `tesserabench history main` shows the runs"]
    )  # fmt: skip


def test_the_reports_history_plot_marks_the_steps():
    pytest.importorskip("matplotlib")
    from pytest_tesserabench.report.plots import history_plot

    rng = np.random.default_rng(3)
    history = [_run(rng, 1.25 if i >= 5 else 1.0) for i in range(10)]
    current = _run(rng, 1.25)
    plot = history_plot(list(current.benchmarks.values()), history, current, {})
    assert "dashed: 1 step(s) in the baseline's runs" in plot.caption
    assert "+25%" in plot.svg or "+24%" in plot.svg
    steady = [_run(rng, 1.0) for _ in range(10)]
    assert (
        "no step in the baseline's runs" in history_plot(list(current.benchmarks.values()), steady, current, {}).caption
    )


def test_what_moved_every_benchmark_is_said_once_and_taken_out_of_each(tmp_path, capsys):
    rng = np.random.default_rng(11)
    for i in range(10):  # (a baseline keeps 10 runs)
        machine = 1.5 if i >= 7 else 1.0  # the machine slows every benchmark from run 8
        scales = {"t::a": 1.0, "t::b": 2.0, "t::c": 3.0, "t::stepped": 1.2 if i >= 4 else 1.0}
        run = {
            "schema": 1,
            "machine": {"device": "cpu"},
            "commit": {"sha": f"{i:040x}", "branch": "main", "dirty": False},
            "started": "2026-11-21T15:07:16Z",
            "benchmarks": {
                name: {"timer": "cpu", "rounds_ms": (np.exp(rng.normal(0, 0.003, 10)) * s * machine).tolist()}
                for name, s in scales.items()
            },
        }
        save_run(tmp_path, "main", "cpu-test", RunDocument.from_json(run))
    assert main(["history", "main", "--dir", str(tmp_path), "--width", "120"]) == 1
    out = capsys.readouterr().out
    assert "the whole run stepped +5" in out and "at run 8" in out
    stepped = out[out.index("t::stepped") :]
    assert re.search(r"step \+(19|20)\.\d%", stepped) and "first in run 5" in stepped
    assert "shared shift taken out" in stepped
    for steady in ("t::a", "t::b", "t::c"):
        block = out[out.index(f"\n{steady}\n") :]
        assert block[: block.index("\n\n", 2) if "\n\n" in block[2:] else None].count("step +") == 0


def test_a_long_history_is_searched_for_steps_in_its_latest_runs(tmp_path, capsys, monkeypatch):
    from pytest_tesserabench.history import timeline

    monkeypatch.setattr(timeline, "LATEST_RUNS", 8)  # (the default, 200, would make the test slow)
    rng = np.random.default_rng(1)
    runs = [_run(rng, 1.25 if i >= 9 else 1.0) for i in range(12)]
    from pytest_tesserabench.history.baseline import save_runs

    save_runs(tmp_path, "main", "cpu-test", runs, history=100)
    assert main(["history", "main", "--dir", str(tmp_path), "--width", "120"]) == 1
    out = capsys.readouterr().out
    assert "the latest 8 of 12 runs" in out
    stepped = out[out.index("t::stepped") :]
    assert "first in run 10" in stepped  # numbered as saved, not from the first run shown
    assert re.search(r"^\s+5\s", stepped, re.M) and not re.search(r"^\s+4\s", stepped, re.M)
