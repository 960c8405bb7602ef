"""The gate on hand-made run dicts: statuses, the one-line text, kernels, canary, odd records."""

import math

import numpy as np
import pytest

from pytest_tesserabench import gate
from pytest_tesserabench.gate import GateConfig, canary_ratio
from pytest_tesserabench.kernel_gate import compare_kernels
from pytest_tesserabench.results import RunDocument, Verdict
from pytest_tesserabench.units import format_ms

IDS = ("t.py::test_a", "t.py::test_b", "t.py::test_c", "t.py::test_d")


def docs(runs):
    """Hand-made run dicts as the typed documents the gate reads (validated on the way)."""
    return [RunDocument.from_json(run) if isinstance(run, dict) else run for run in runs]


def compare_runs(candidate, baseline, *args, **kwargs):
    return gate.compare_runs(docs(candidate), docs(baseline), *args, **kwargs)


def make_runs(n, rng, scale=None, drift=0.005, within=0.01, timer="cpu", canary=2.0, kernels=None):
    scale = scale or {}
    runs = []
    for _ in range(n):
        shift = rng.normal(0, drift)
        benchmarks = {}
        for bench_id in IDS:
            rounds = np.exp(shift + rng.normal(0, within, 12)) * scale.get(bench_id, 1.0)
            benchmarks[bench_id] = {
                "timer": timer,
                "rounds_ms": rounds.tolist(),
                "kernels": (kernels or {}).get(bench_id, []),
            }
        runs.append({"schema": 1, "canary_ms": [canary] * 5, "benchmarks": benchmarks})
    return runs


@pytest.fixture
def rng():
    return np.random.default_rng(42)


def test_a_thirty_percent_slowdown_fails_only_that_benchmark(rng):
    base = make_runs(3, rng)
    verdicts = compare_runs(make_runs(1, rng, scale={IDS[1]: 1.3}), base, GateConfig())
    assert [v.status for v in verdicts.values()] == ["UNCHANGED", "REGRESSED", "UNCHANGED", "UNCHANGED"]
    bad = verdicts[IDS[1]]
    assert bad.failed and bad.severity == "severe" and 1.25 < bad.ratio < 1.35
    assert bad.ci[0] < bad.ratio < bad.ci[1] and bad.p_value < 0.01 / 4
    line = bad.line()
    assert line.startswith("REGRESSED (severe), 1.00 ms -> 1.3") and "p=" in line and "threshold 5.0%" in line
    assert "%" in line and "[" in line


@pytest.mark.parametrize(("factor", "severity"), [(1.07, "mild"), (1.15, "moderate"), (1.25, "severe")])
def test_severity_bands(rng, factor, severity):
    verdicts = compare_runs(make_runs(1, rng, scale={IDS[0]: factor}), make_runs(5, rng), GateConfig())
    assert verdicts[IDS[0]].status == "REGRESSED" and verdicts[IDS[0]].severity == severity


def test_small_significant_change_is_below_the_practical_threshold(rng):
    verdicts = compare_runs(make_runs(1, rng, scale={IDS[0]: 1.015}), make_runs(5, rng), GateConfig())
    assert verdicts[IDS[0]].status == "UNCHANGED"


def test_improvement(rng):
    verdicts = compare_runs(make_runs(1, rng, scale={IDS[2]: 0.7}), make_runs(3, rng), GateConfig())
    assert verdicts[IDS[2]].status == "IMPROVED" and verdicts[IDS[2]].severity is None


def test_large_change_on_a_noisy_benchmark_is_inconclusive_with_a_hint(rng):
    # Baseline runs 15% apart: +35% is large, but not significant against that drift.
    base = [
        {
            "schema": 1,
            "benchmarks": {"x": {"timer": "cpu", "rounds_ms": (level * (1 + rng.normal(0, 0.002, 10))).tolist()}},
        }
        for level in (0.85, 1.0, 1.15)
    ]
    cand = [{"schema": 1, "benchmarks": {"x": {"timer": "cpu", "rounds_ms": [1.35] * 10}}}]
    verdict = compare_runs(cand, base)["x"]
    assert verdict.status == "INCONCLUSIVE", verdict.line()
    assert verdict.threshold > 0.15 and "quieter machine" in verdict.hint()


def test_short_history_hint_says_record_more_runs():
    hint = gate.settle_hint(history=1, noise=0.01)
    assert "--bench-save" in hint and "at least 3" in hint
    assert Verdict(id="x", status="UNCHANGED", hint_text="ignored").hint() is None
    assert Verdict(id="x", status="INCONCLUSIVE", hint_text=hint).hint() == hint


def test_per_benchmark_threshold_override(rng):
    cand, base = make_runs(1, rng, scale={IDS[0]: 1.12}), make_runs(5, rng)
    assert compare_runs(cand, base)[IDS[0]].status == "REGRESSED"
    relaxed = compare_runs(cand, base, thresholds={IDS[0]: 0.25})[IDS[0]]
    assert relaxed.status == "UNCHANGED" and relaxed.threshold == pytest.approx(0.25)


def test_n_compared_divides_alpha(rng):
    cand, base = make_runs(1, rng), make_runs(3, rng)
    assert compare_runs(cand, base, n_compared=100)[IDS[0]].alpha_per_test == pytest.approx(1e-4)


def test_new_missing_failed_and_interpreter_records_never_crash(rng):
    base = make_runs(3, rng)
    cand = make_runs(1, rng)
    del cand[0]["benchmarks"][IDS[0]]
    cand[0]["benchmarks"]["t.py::test_new"] = {"timer": "cpu", "rounds_ms": [1.0]}
    cand[0]["benchmarks"][IDS[1]] = {"timer": "cpu"}  # the test failed
    cand[0]["benchmarks"][IDS[2]]["timer"] = "interpreter"
    cand[0]["benchmarks"][IDS[3]]["rounds_ms"] = [0.0]  # a CUDA-graph round that measured nothing
    verdicts = compare_runs(cand, base)
    assert {k: v.status for k, v in verdicts.items()} == {
        IDS[0]: "MISSING",
        IDS[1]: "NOT_GATED",
        IDS[2]: "NOT_GATED",
        IDS[3]: "NOT_GATED",
        "t.py::test_new": "NEW",
    }
    assert "interpreter" in verdicts[IDS[2]].line()
    assert all(isinstance(v.line(), str) for v in verdicts.values())


def test_interpreter_timing_is_never_gated_even_when_much_slower(rng):
    base = make_runs(3, rng, timer="interpreter")
    verdicts = compare_runs(make_runs(1, rng, scale={i: 5.0 for i in IDS}, timer="interpreter"), base)
    assert {v.status for v in verdicts.values()} == {"NOT_GATED"}


def test_kernel_figures_regress_without_statistics(rng):
    old = {
        IDS[0]: [{"name": "k", "arch": "sm_90", "spill_bytes": 0, "occupancy": 0.5, "registers": 96}],
        IDS[1]: [{"name": "k", "arch": "sm_90", "spill_bytes": 0, "occupancy": 0.5}],
    }
    new = {
        IDS[0]: [{"name": "k", "arch": "sm_90", "spill_bytes": 128, "occupancy": 0.25, "registers": 255}],
        IDS[1]: [{"name": "k", "arch": "sm_80", "spill_bytes": 64, "occupancy": 0.1}],
    }  # another arch
    verdicts = compare_runs(
        make_runs(1, rng, kernels=new, timer="interpreter"), make_runs(3, rng, kernels=old, timer="interpreter")
    )
    first = verdicts[IDS[0]]
    assert first.status == "REGRESSED" and first.severity == "moderate"
    assert first.reasons == ("kernel k (sm_90): spills 0 B -> 128 B", "kernel k (sm_90): occupancy 0.50 -> 0.25")
    assert "registers 96 -> 255" in " ".join(first.notes)
    assert "spills 0 B -> 128 B" in first.line()
    assert verdicts[IDS[1]].status == "NOT_GATED"


def test_kernel_changes_ignores_missing_figures():
    found = compare_kernels(
        [{"name": "k", "arch": "sm_90", "spill_bytes": None}], [{"name": "k", "arch": "sm_90", "spill_bytes": 0}]
    )
    assert (found.regressions, found.notes) == ([], [])
    found = compare_kernels(None, None)
    assert (found.regressions, found.notes) == ([], [])


def test_canary_ratio_and_normalisation(rng):
    base = make_runs(3, rng, canary=2.0)
    slow_machine = make_runs(1, rng, scale={i: 1.2 for i in IDS}, canary=2.4)
    assert canary_ratio(docs(slow_machine), docs(base)) == pytest.approx(1.2)
    assert canary_ratio(docs([{"benchmarks": {}}]), docs(base)) is None
    plain = compare_runs(slow_machine, base)
    assert {v.status for v in plain.values()} == {"REGRESSED"}
    normalised = compare_runs(slow_machine, base, GateConfig(normalize_by_canary=True))
    assert {v.status for v in normalised.values()} == {"UNCHANGED"}
    assert any("canary" in note for note in normalised[IDS[0]].notes)


def test_several_candidate_runs(rng):
    verdicts = compare_runs(make_runs(3, rng, scale={IDS[0]: 1.2}), make_runs(3, rng))
    assert verdicts[IDS[0]].status == "REGRESSED" and verdicts[IDS[1]].status == "UNCHANGED"


def test_one_run_measured_in_several_processes_is_centred_on_the_median_process(rng):
    # --bench-confirm: this process and two fresh ones read a benchmark +12%; a fresh one, by a
    # draw of its own, +70%. Judged as one run, the odd process neither moves the centre nor
    # widens the interval (it narrows: a median of three); as three runs, its spread joins the
    # between-run noise.
    base = make_runs(3, rng)
    processes = [make_runs(1, rng, scale={IDS[0]: factor})[0] for factor in (1.12, 1.12, 1.7)]
    alone = compare_runs(processes[:1], base)[IDS[0]]
    one_run = compare_runs(processes, base, processes_of_one_run=True)[IDS[0]]
    as_runs = compare_runs(processes, base)[IDS[0]]
    assert alone.status == one_run.status == "REGRESSED" and as_runs.status == "INCONCLUSIVE"
    assert 1.08 < one_run.ratio < 1.16
    width = math.log(one_run.ci[1] / one_run.ci[0])
    assert 0.6 < width / math.log(alone.ci[1] / alone.ci[0]) < 0.95


PATTERN = np.linspace(-0.01, 0.01, 12)  # the rounds of a run about its centre


def runs_at(*centres, first=None):
    """Runs whose benchmarks sit exactly at ``centres`` (one per run), the first benchmark also
    scaled by ``first`` (one factor per run)."""
    first = first or [1.0] * len(centres)
    return [
        {
            "schema": 1,
            "canary_ms": [2.0] * 5,
            "benchmarks": {
                i: {"timer": "cpu", "rounds_ms": (c * (f if i == IDS[0] else 1.0) * np.exp(PATTERN)).tolist()}
                for i in IDS
            },
        }
        for c, f in zip(centres, first)
    ]


def test_three_processes_that_read_a_slowdown_alike_decide_what_one_cannot():
    # Baseline runs 1.2% apart; this process and two fresh ones all read +6%: the median of three
    # processes carries about half the between-run variance of one, so together they decide it.
    base = runs_at(math.exp(-0.012), 1.0, math.exp(0.012))
    processes = runs_at(1.0, 1.0, 1.0, first=[1.064, 1.06, 1.056])
    alone = compare_runs(processes[:1], base)[IDS[0]]
    together = compare_runs(processes, base, processes_of_one_run=True)[IDS[0]]
    assert alone.status == "INCONCLUSIVE" and together.status == "REGRESSED"
    assert together.ratio == pytest.approx(1.06, abs=0.002)
    assert together.p_value < alone.alpha_per_test < alone.p_value


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="alpha"):
        GateConfig(alpha=2)
    with pytest.raises(ValueError, match="threshold"):
        GateConfig(threshold=-0.1)


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (1.0, "1.00 ms"),
        (0.0456, "45.6 µs"),
        (2100, "2.10 s"),
        (0.0000812, "81.2 ns"),
        (0.99963, "1.00 ms"),
        (250.0, "250 ms"),
        (None, "-"),
        (math.nan, "-"),
    ],
)
def test_format_ms(ms, text):
    assert format_ms(ms) == text


def test_a_verdict_does_not_depend_on_which_other_benchmarks_ran(rng):
    # The plugin judges each test on its own (xdist workers, -k): the prior comes from the
    # baseline history, so judging one benchmark alone gives the whole suite's verdict for it.
    base = make_runs(4, rng, drift=0.01)
    cand = make_runs(1, rng, scale={IDS[1]: 1.06})
    whole = compare_runs(cand, base, n_compared=len(IDS))
    for bench_id in IDS:
        alone_run = {**cand[0], "benchmarks": {bench_id: cand[0]["benchmarks"][bench_id]}}
        alone = compare_runs([alone_run], base, n_compared=len(IDS))[bench_id]
        assert (alone.status, alone.p_value) == (whole[bench_id].status, pytest.approx(whole[bench_id].p_value))


def test_precomputed_priors_give_the_same_verdicts(rng):
    from pytest_tesserabench.gate import baseline_priors

    base = make_runs(4, rng, drift=0.01)
    cand = make_runs(1, rng, scale={IDS[2]: 1.08})
    priors = baseline_priors(docs(base), GateConfig().between_run_floor)
    assert set(priors) == set(IDS)
    fresh, cached = compare_runs(cand, base), compare_runs(cand, base, priors=priors)
    assert {i: (v.status, v.p_value) for i, v in fresh.items()} == {i: (v.status, v.p_value) for i, v in cached.items()}


def kernel(**fields):
    return {"name": "k", "arch": "sm_90", "constexprs": {"BLOCK": 1024}, "num_warps": 4, "spill_bytes": 0,
            "occupancy": 1.0, **fields}  # fmt: skip


def test_interpreted_records_with_unchanged_figures_are_unchanged_not_ungated(rng):
    same = {i: [kernel()] for i in IDS}
    verdicts = compare_runs(make_runs(1, rng, kernels=same, timer="interpreter"), make_runs(3, rng, kernels=same))
    assert {v.status for v in verdicts.values()} == {"UNCHANGED"}
    assert verdicts[IDS[0]].notes[0] == "kernel figures compared; timings not (timed in the Triton interpreter)"


def test_a_new_config_that_spills_regresses_unless_its_timing_shows_it_is_not_slower(rng):
    old = {IDS[0]: [kernel()]}
    worse = {IDS[0]: [kernel(constexprs={"BLOCK": 8192}, num_warps=1, spill_bytes=664, occupancy=0.12)]}
    # Without a timing (the interpreter): the figures decide.
    verdict = compare_runs(make_runs(1, rng, kernels=worse, timer="interpreter"), make_runs(3, rng, kernels=old))[
        IDS[0]
    ]
    assert verdict.status == "REGRESSED" and verdict.severity == "moderate"
    assert "kernel k (sm_90): the new config spills 664 B" in verdict.reasons
    assert any("config changed: BLOCK 1024 -> 8192, num_warps 4 -> 1" in note for note in verdict.notes)
    # Timed, and not slower: an autotuner may trade occupancy for speed; shown, not gated.
    timed = compare_runs(make_runs(1, rng, kernels=worse), make_runs(3, rng, kernels=old))[IDS[0]]
    assert timed.status == "UNCHANGED" and "its timing is not slower" in " ".join(timed.notes)
    # Timed and slower: the new config's losses join the timing's regression.
    slower = compare_runs(make_runs(1, rng, kernels=worse, scale={IDS[0]: 1.3}), make_runs(3, rng, kernels=old))[IDS[0]]
    assert slower.status == "REGRESSED" and "kernel k (sm_90): the new config spills 664 B" in slower.reasons


def test_unchanged_only_when_a_slowdown_past_the_threshold_is_ruled_out(rng):
    def runs(n, drift):  # each benchmark drifting on its own between runs
        return [
            {
                "schema": 1,
                "benchmarks": {
                    i: {"timer": "cpu", "rounds_ms": (np.exp(rng.normal(0, drift) + rng.normal(0, 0.01, 12))).tolist()}
                    for i in IDS
                },
            }
            for _ in range(n)
        ]

    # runs that drift 6% apart: an unchanged candidate cannot be told from +10%, and says so
    noisy = compare_runs(runs(1, 0.0), runs(3, 0.06), GateConfig())
    assert {v.status for v in noisy.values()} == {"INCONCLUSIVE"}
    assert all(v.ci[1] >= 1.05 and not v.failed for v in noisy.values())
    quiet = compare_runs(runs(1, 0.0), runs(3, 0.002), GateConfig())
    assert {v.status for v in quiet.values()} == {"UNCHANGED"}
    assert all(v.ci[1] < 1.05 for v in quiet.values())


def test_a_change_and_its_interval_read_in_one_form():
    from pytest_tesserabench.results import Verdict

    def text(ratio, low, high):
        return Verdict(id="x", status="UNCHANGED", ratio=ratio, ci=(low, high)).change_text()

    assert text(1.151, 1.12, 1.183) == "+15.1% [+12.0%, +18.3%]"
    assert text(12.4, 11.0, 13.0) == "12.4x [11x, 13x]"
    # an interval reaching past 3x either way turns the whole change into factors, never a mix
    assert text(0.674, 0.3, 1.501) == "0.67x [0.3x, 1.5x]"


def test_a_baseline_process_timed_on_a_busy_machine_is_left_out_of_the_noise():
    # Nine baseline processes 0.2% apart; one read the first benchmark 200x (a busy machine while
    # saving). Kept, it made every later interval [0.006x, 171x]; left out, an unchanged run is
    # decided and a +20% slowdown fails, and the verdict says what was left out.
    centres = [math.exp(0.002 * k) for k in (-4, -3, -2, -1, 0, 1, 2, 3, 4)]
    base = runs_at(*centres, first=[1, 1, 1, 200, 1, 1, 1, 1, 1])
    unchanged = compare_runs(runs_at(1.0), base)[IDS[0]]
    slower = compare_runs(runs_at(1.0, first=[1.2]), base)[IDS[0]]
    assert unchanged.status == "UNCHANGED" and unchanged.ci[1] < 1.05
    assert slower.status == "REGRESSED"
    assert f"{gate.BUSY_NOTE} 199.6 ms" in unchanged.notes
    # one in three at a second level is the benchmark's own noise, not a busy machine's
    two_levels = runs_at(*centres, first=[1, 1.6, 1, 1, 1.6, 1, 1, 1.6, 1])
    judged = compare_runs(runs_at(1.0), two_levels)[IDS[0]]
    assert judged.status == "INCONCLUSIVE" and not any(gate.BUSY_NOTE in note for note in judged.notes)
