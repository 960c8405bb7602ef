"""History mode's run-effect model on seeded data whose drift is shared by every benchmark of a run."""

import math
import re
import warnings
from dataclasses import replace

import numpy as np
import pytest

from pytest_tesserabench.gate import GateConfig
from pytest_tesserabench.gate import model as run_effect
from pytest_tesserabench.gate.centres import log_centre, pass_centres
from pytest_tesserabench.gate.pipeline import History, judge_run
from pytest_tesserabench.record.results import RunDocument

IDS = [f"t.py::test_{i}" for i in range(6)]


def runs(rng, n, *, shared=0.0, own=0.003, within=0.01, level=None, slower=None, canary=2.0):
    """Runs whose log time = benchmark level + one shared shift per run + a small own drift."""
    level = level or {i: math.log(1.0 + k * 0.7) for k, i in enumerate(IDS)}
    out = []
    for _ in range(n):
        shift = rng.normal(0, shared) if isinstance(shared, float) else shared()
        benchmarks = {}
        for bench_id in IDS:
            centre = level[bench_id] + shift + rng.normal(0, own) + math.log((slower or {}).get(bench_id, 1.0))
            benchmarks[bench_id] = {"timer": "cpu", "rounds_ms": np.exp(centre + rng.normal(0, within, 10)).tolist()}
        out.append(RunDocument.from_json({"canary_ms": [canary * math.exp(shift)] * 5, "benchmarks": benchmarks}))
    return out


def judge(baseline, candidate, *, model=True, canary=None):
    """As the plugin does: each benchmark judged with the run's shift from the others (all of
    them measured, as in the last of several passes); ``model=False``: no run-effect model at all
    (each benchmark judged on its own drift)."""
    history = History.of(baseline, None if model else GateConfig(min_benchmarks_for_shift=10**6))
    measured = {i: log_centre(r) for i, r in candidate[0].benchmarks.items()}
    shifts = {i: history.shift(i, measured, None) for i in IDS} if model else None
    verdicts = history.judge(list(candidate[0].benchmarks.values()), m=len(IDS), shifts=shifts)
    return verdicts, history.model, measured


def test_median_polish_recovers_the_run_shifts():
    rng = np.random.default_rng(1)
    effects, shifts = rng.normal(0, 1, 8), np.array([0.0, 0.1, -0.05, 0.2])
    table = effects[:, None] + shifts[None, :] + rng.normal(0, 0.001, (8, 4))
    table[2, 1] = np.nan  # a benchmark missing from one run
    rows, columns, residual = run_effect.median_polish(table)
    assert np.allclose(columns - columns[0], shifts - shifts[0], atol=0.003)
    assert np.nanmax(np.abs(residual)) < 0.01


def test_a_run_whose_every_process_was_left_out_leaves_the_others_effects_as_they_were():
    # (a save on a busy machine: each benchmark's process there left out as far)
    table = np.array([[1.0, 1.1, np.nan], [2.0, 2.1, np.nan], [3.0, 3.2, np.nan]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rows, columns, _ = run_effect.median_polish(table)
    expected_rows, expected_columns, _ = run_effect.median_polish(table[:, :2])
    assert np.allclose(rows, expected_rows) and np.allclose(columns[:2], expected_columns)
    assert np.isnan(columns[2])


def test_a_run_shifted_as_a_whole_raises_no_false_alarm():
    rng = np.random.default_rng(2)
    baseline = runs(rng, 3, shared=0.03)
    loaded = runs(rng, 1, shared=lambda: math.log(1.25))  # every benchmark 25% slower: the machine
    plain, _, _ = judge(baseline, loaded, model=False)
    # The old rule sees every benchmark 25% slower: each one a regression or a warning.
    assert all(v.status in ("REGRESSED", "INCONCLUSIVE") for v in plain.values())
    verdicts, model, measured = judge(baseline, loaded)
    assert {v.status for v in verdicts.values()} == {"UNCHANGED"}
    assert all("this run's shared shift +2" in " ".join(v.notes) for v in verdicts.values())  # ~ +25%


def test_the_comparison_table_shows_the_shift_it_removed():
    """'now' is what was measured; beside a change that is not now/baseline the table says why."""
    from pytest_tesserabench.report.comparison_table import render_comparison

    rng = np.random.default_rng(2)
    verdicts, _, _ = judge(runs(rng, 3, shared=0.03), runs(rng, 1, shared=lambda: math.log(1.25)))
    lines = render_comparison(verdicts, version_diffs=[], canary_ratio=None, width=200).splitlines()
    header = next(line for line in lines if line.startswith("benchmark"))
    assert header.split()[4:7] == ["baseline", "now", "shift"]
    rows = [line for line in lines if line.startswith("(unlabelled)")]
    assert len(rows) == 6 and all(re.search(r" ms +\+2\d\.\d% ", row) for row in rows), rows  # ~ +25%, after now
    rng = np.random.default_rng(2)  # a run without a shift to speak of: no column
    verdicts, _, _ = judge(runs(rng, 3, shared=0.003), runs(rng, 1, shared=0.0))
    assert "shift" not in render_comparison(verdicts, version_diffs=[], canary_ratio=None, width=200)


def test_one_regression_inside_a_shared_shift_is_still_caught():
    rng = np.random.default_rng(3)
    baseline = runs(rng, 3, shared=0.03)
    candidate = runs(rng, 1, shared=lambda: math.log(1.2), slower={IDS[2]: 1.10})
    verdicts, _, _ = judge(baseline, candidate)
    assert verdicts[IDS[2]].status == "REGRESSED" and 1.07 < verdicts[IDS[2]].ratio < 1.13
    assert [i for i, v in verdicts.items() if v.status == "REGRESSED"] == [IDS[2]]


def test_the_model_gains_power_where_drift_is_shared():
    # Baseline runs 3% apart, all together: the old rule reads 3% drift per benchmark and cannot
    # call a 10% slowdown; removing the run effect leaves the benchmark's own 0.3%.
    found = {True: 0, False: 0}
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        baseline = runs(rng, 3, shared=0.03)
        candidate = runs(rng, 1, shared=0.03, slower={IDS[0]: 1.10})
        for model in (True, False):
            verdicts, _, _ = judge(baseline, candidate, model=model)
            found[model] += verdicts[IDS[0]].status == "REGRESSED"
    assert found[True] >= 18 and found[True] > found[False] + 5


def test_the_suite_wide_shift_fails_only_when_the_canary_does_not_explain_it():
    rng = np.random.default_rng(4)
    baseline = runs(rng, 3, shared=0.005)
    everything_slower = runs(rng, 1, shared=0.0, slower={i: 1.15 for i in IDS})
    _, model, measured = judge(baseline, everything_slower)
    quiet_canary = math.log(2.0)
    shift = run_effect.suite_shift(model, measured, quiet_canary, threshold=0.05, alpha=0.01)
    assert shift.failed and 0.13 < math.expm1(shift.shift) < 0.17
    assert "every benchmark got slower together" in shift.line()
    slow_machine = math.log(2.0 * 1.15)
    assert not run_effect.suite_shift(model, measured, slow_machine, threshold=0.05, alpha=0.01).failed
    unchanged = runs(rng, 1, shared=0.0)
    _, _, measured = judge(baseline, unchanged)
    assert not run_effect.suite_shift(model, measured, quiet_canary, threshold=0.05, alpha=0.01).failed
    # A canary faster than the baseline's never makes an unchanged suite slower: it only excuses.
    fast_canary = math.log(2.0 / 1.25)
    assert not run_effect.suite_shift(model, measured, fast_canary, threshold=0.05, alpha=0.01).failed


def test_before_enough_benchmarks_are_measured_no_shift_is_assumed():
    rng = np.random.default_rng(5)
    model = run_effect.fit(run_effect.run_centres(runs(rng, 3)), 3, [math.log(2.0)] * 3)
    alone = {IDS[0]: model.effects[IDS[0]] + math.log(1.3)}
    shift = run_effect.candidate_shift(model, alone, IDS[0])
    assert shift.value == 0.0 and shift.source.startswith("none yet")
    # the canary moved +30% since the baseline: still no correction, but that much uncertainty
    moved = run_effect.candidate_shift(model, alone, IDS[0], model.canary_centre + math.log(1.3))
    assert moved.value == 0.0 and moved.variance >= math.log(1.3) ** 2 and "+30.0%" in moved.source
    three = {i: model.effects[i] + math.log(1.3) for i in IDS[:4]}
    assert run_effect.candidate_shift(model, three, IDS[0]).value == pytest.approx(math.log(1.3), abs=0.01)


def test_the_shift_removed_is_as_uncertain_as_the_others_took_it_unalike():
    # Nine other benchmarks moved +40% at their median: all alike, or anywhere from 0.4 to 1.6
    # of it (a loaded machine). One that took 0.4 of it is then within the correction's error,
    # not a benchmark that got 17% faster.
    rng = np.random.default_rng(6)
    ids = [f"t.py::test_{k}" for k in range(10)]
    level = {i: math.log(1.0 + k * 0.3) for k, i in enumerate(ids)}
    model = run_effect.fit(run_effect.run_centres(runs_of(rng, ids, level)), 3, [])
    shift = math.log(1.4)
    shares = np.linspace(0.4, 1.6, 9)
    alike = {i: model.effects[i] + shift for i in ids[1:]}
    unalike = {i: model.effects[i] + share * shift for i, share in zip(ids[1:], shares)}
    tight, wide = (run_effect.candidate_shift(model, measured, ids[0]) for measured in (alike, unalike))
    assert tight.value == pytest.approx(wide.value, abs=0.01) and tight.unalike == 0.0
    assert wide.unalike > 0.1 and wide.variance >= wide.unalike**2
    took_least = 0.4 * shift - wide.value
    assert abs(took_least) > 3 * math.sqrt(tight.variance)  # alike: that would be a change
    assert abs(took_least) < 2.5 * math.sqrt(wide.variance)  # unalike: within the correction's error


def runs_of(rng, ids, level, n=3):
    """``n`` quiet runs of benchmarks at ``level`` (log ms), as documents."""

    def record(i):
        return {"timer": "cpu", "rounds_ms": np.exp(level[i] + rng.normal(0, 0.005, 10)).tolist()}

    return [RunDocument.from_json({"benchmarks": {i: record(i) for i in ids}}) for _ in range(n)]


def test_the_suite_wide_shift_is_what_every_pass_and_most_benchmarks_show():
    rng = np.random.default_rng(4)
    baseline = runs(rng, 3, shared=0.005)
    _, model, measured = judge(baseline, runs(rng, 1, shared=0.0))
    quiet_canary = math.log(2.0)

    def suite(pass_shifts, per_benchmark=None):
        """Four passes, each every benchmark at its effect moved by the pass's shift (log)."""
        passes = [{i: model.effects[i] + s + (per_benchmark or {}).get(i, 0.0) for i in IDS} for s in pass_shifts]
        centres = {i: float(np.median([p[i] for p in passes])) for i in IDS}
        return run_effect.suite_shift(model, centres, quiet_canary, threshold=0.05, alpha=0.01, pass_measured=passes)

    slower_code = math.log(1.15)
    assert suite([slower_code] * 4).failed  # a slower code shows in every pass
    # the machine's slow state over two passes of four: the median of the passes reads +15% too
    stretch = suite([math.log(1.3), math.log(1.3), 0.0, 0.0])
    assert math.expm1(stretch.shift) > 0.14 and not stretch.failed
    # two of six benchmarks regressed +25% and a third noisy +10%: the median reads +5.9%, not
    # a slowdown of the suite
    some = {IDS[0]: math.log(1.25), IDS[1]: math.log(1.25), IDS[2]: math.log(1.10), IDS[3]: 0.02}
    assert not suite([0.0] * 4, some).failed
    assert "not a slowdown of the whole suite" in stretch.line()
    failed = suite([slower_code] * 4).line()
    assert failed.startswith("FAILED: ") and "three quarters of them at least +15.0% in every pass" in failed


def test_a_machine_shift_the_canary_took_least_is_not_a_suite_wide_slowdown():
    # A loaded machine, +40%, taken 0.6-1.5 times by different programs; the canary took 0.6 of
    # it, most benchmarks more: the canary explains the shift only to within their spread.
    rng = np.random.default_rng(4)
    _, model, _ = judge(runs(rng, 3, shared=0.005), runs(rng, 1, shared=0.0))
    load = math.log(1.4)
    responses = dict(zip(IDS, [0.8, 1.0, 1.1, 1.2, 1.3, 1.5]))

    def suite(moved: dict, canary_moved: float):
        passes = [{i: model.effects[i] + moved[i] for i in IDS}] * 4
        centres = {i: model.effects[i] + moved[i] for i in IDS}
        canary = model.canary_centre + canary_moved
        return run_effect.suite_shift(model, centres, canary, threshold=0.05, alpha=0.01, pass_measured=passes)

    loaded = suite({i: r * load for i, r in responses.items()}, 0.6 * load)
    assert not loaded.failed and "cannot tell whether the whole suite got +5.0% slower" in loaded.line()
    # A slower code on a machine that did not move is still caught.
    assert suite(dict.fromkeys(IDS, math.log(1.15)), 0.0).failed


def test_with_fewer_than_four_benchmarks_there_is_no_model():
    rng = np.random.default_rng(6)
    three = [RunDocument(benchmarks={i: r.benchmarks[i] for i in IDS[:3]}) for r in runs(rng, 3)]
    assert run_effect.fit(run_effect.run_centres(three), 3, []) is None


def _passes_record(rounds_per_pass, speed_per_pass, level=1.0, extra=()):
    rounds = [level * speed for n, speed in zip(rounds_per_pass, speed_per_pass) for _ in range(n)] + list(extra)
    data = {"timer": "cpu", "rounds_ms": rounds, "sampling": {"passes": len(rounds_per_pass)}}
    data["sampling"]["pass_rounds"] = list(rounds_per_pass)
    return RunDocument.from_json({"benchmarks": {"t.py::test": data}}).benchmarks["t.py::test"]


def test_a_speed_change_between_passes_moves_every_benchmark_alike():
    # The machine ran 1.5x slower in the first two of four passes. Adaptive stopping took 3 rounds
    # a pass of one benchmark there and 10 of another: the median of all rounds would read the
    # first at full speed and the second slowed; the lowest of the passes' centres reads both at
    # full speed (the median of the passes would read both half-way).
    slow_fast = (1.5, 1.5, 1.0, 1.0)
    few_slow = log_centre(_passes_record((3, 3, 10, 10), slow_fast))
    many_slow = log_centre(_passes_record((10, 10, 3, 3), slow_fast))
    assert few_slow == pytest.approx(0.0) and many_slow == pytest.approx(0.0)
    # A slow stretch that caught one pass, or three, of this benchmark alone is left out (the mean
    # of the passes' centres would move it by a share of the stretch: drift of its own).
    assert log_centre(_passes_record((5, 5, 5, 5), (1.0, 1.5, 1.0, 1.0))) == pytest.approx(0.0)
    assert log_centre(_passes_record((5, 5, 5, 5), (1.5, 1.5, 1.0, 1.5))) == pytest.approx(0.0)
    # Rounds settling added after the last pass are the last pass's.
    settled = pass_centres(_passes_record((3, 3), (1.0, 1.0), extra=[2.0] * 5))
    assert settled == pytest.approx([0.0, math.log(2.0)])  # the last pass: 3 rounds at 1.0, 5 settled at 2.0
    # One pass (or no counts): the median of the rounds, as before.
    assert log_centre(_passes_record((5,), (1.2,))) == pytest.approx(math.log(1.2))


def test_pass_rounds_that_are_not_counts_name_the_field():
    from pytest_tesserabench.record.results import DocumentError

    data = {"timer": "cpu", "rounds_ms": [1.0], "sampling": {"pass_rounds": "3,3"}}
    with pytest.raises(DocumentError, match=r"sampling\.pass_rounds.*expected a list of round counts"):
        RunDocument.from_json({"benchmarks": {"t.py::test": data}})


@pytest.mark.parametrize("order", ["t.py::a", ["t.py::a"], ["t.py::a", "t.py::b", "t.py::b"], ["t.py::a", "t.py::c"]])
def test_a_measured_order_that_is_not_the_files_ids_names_the_field(order):
    from pytest_tesserabench.record.results import DocumentError

    record = {"timer": "cpu", "rounds_ms": [1.0]}
    data = {"benchmarks": {"t.py::a": record, "t.py::b": record}, "measured_order": order}
    with pytest.raises(DocumentError, match=r"measured_order: expected a list of the file's benchmark ids, each once"):
        RunDocument.from_json(data)
    data["measured_order"] = ["t.py::b", "t.py::a"]  # any order of them all is the file's
    assert RunDocument.from_json(data).measured_order == ["t.py::b", "t.py::a"]


def _passes_run(speeds_by_id: dict[str, tuple[float, ...]], level: float = 1.0) -> RunDocument:
    """A run of four-pass records, 5 rounds a pass, each benchmark's passes at the given speeds."""
    benchmarks = {}
    for bench_id, speeds in speeds_by_id.items():
        rounds = [level * s for s in speeds for _ in range(5)]
        benchmarks[bench_id] = {"timer": "cpu", "rounds_ms": rounds, "sampling": {"passes": 4, "pass_rounds": [5] * 4}}
    return RunDocument.from_json({"benchmarks": benchmarks})


@pytest.mark.parametrize("interpreted_change", [1 / 3, 3.0])
def test_interpreter_timings_move_no_other_benchmarks_shift(interpreted_change):
    # Triton's CPU interpreter is never gated, and its time swings with a kernel's config: three
    # interpreted benchmarks 3x slower (or faster) must leave the unchanged CPU benchmarks alone.
    rng = np.random.default_rng(11)
    baseline = runs(rng, 3, shared=0.01)
    candidate = runs(rng, 1, shared=0.0)
    interpreted = IDS[:3]
    for run in baseline + candidate:
        for bench_id in interpreted:
            run.benchmarks[bench_id] = replace(run.benchmarks[bench_id], timer="interpreter")
    for bench_id in interpreted:
        record = candidate[0].benchmarks[bench_id]
        slower = [ms * interpreted_change for ms in record.rounds_ms]
        candidate[0].benchmarks[bench_id] = replace(record, rounds_ms=slower)
    fitted = run_effect.fit_baseline(baseline)
    assert fitted is None or not set(interpreted) & set(fitted.effects)
    verdicts = judge_run(candidate[0], baseline, GateConfig())
    for bench_id in IDS[3:]:
        assert verdicts[bench_id].status in ("UNCHANGED", "INCONCLUSIVE"), verdicts[bench_id]
        assert 0.95 < verdicts[bench_id].ratio < 1.05
    assert all(verdicts[i].status == "NOT_GATED" for i in interpreted)
