"""The gate on hand-made run dicts: statuses, the one-line text, kernels, processes, odd records."""

import math
from dataclasses import replace

import numpy as np
import pytest

from pytest_tesserabench.gate import GateConfig
from pytest_tesserabench.gate.kernels import compare_kernels
from pytest_tesserabench.gate.pipeline import LEFT_OUT_NOTE, History, judge_run, leave_one_out_medians
from pytest_tesserabench.gate.rule import NoiseComponents, decide
from pytest_tesserabench.record.results import FreshProcess, RunDocument, Verdict
from pytest_tesserabench.record.units import format_ms

IDS = ("t.py::test_a", "t.py::test_b", "t.py::test_c", "t.py::test_d")


def docs(runs):
    """Hand-made run dicts as the typed documents the gate reads (validated on the way)."""
    return [RunDocument.from_json(run) if isinstance(run, dict) else run for run in runs]


def compare_runs(candidate, baseline, config=None, *, processes=()):
    """The candidate run judged as `tesserabench compare` judges a file (the whole pipeline);
    ``processes``: runs whose rounds the file keeps as the fresh processes that measured it too."""
    (run,) = docs(candidate)
    for process in docs(processes):
        for bench_id, record in run.benchmarks.items():
            again = process.benchmarks[bench_id]
            kept = FreshProcess(tuple(again.rounds_ms))
            run.benchmarks[bench_id] = replace(record, confirm=(*(record.confirm or ()), kept))
    return judge_run(run, docs(baseline), config)


def judge(candidate, baseline, config=None, **options):
    """The rule's stages on the candidate's records, without this run's shift (History.judge)."""
    (run,) = docs(candidate)
    history = History.of(docs(baseline), config)
    return history.judge(list(run.benchmarks.values()), **{"m": len(run.benchmarks), **options})


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


def test_large_change_on_a_noisy_benchmark_is_inconclusive_and_says_what_it_could_catch(rng):
    # Baseline runs 15% apart: +35% is large, but not significant against that drift. The
    # threshold stays the user's; the verdict says the size the gate could have caught.
    base = [
        {
            "schema": 1,
            "benchmarks": {"x": {"timer": "cpu", "rounds_ms": (level * (1 + rng.normal(0, 0.002, 10))).tolist()}},
        }
        for level in (0.85, 1.0, 1.15)
    ]
    cand = [{"schema": 1, "benchmarks": {"x": {"timer": "cpu", "rounds_ms": [1.35] * 10}}}]
    verdict = compare_runs(cand, base)["x"]
    assert verdict.status == "INCONCLUSIVE" and verdict.stage == "rule", verdict.line()
    assert verdict.threshold == pytest.approx(0.05) and verdict.detectable > 0.5
    assert f"could detect {verdict.detectable * 100:.1f}% or more" in verdict.line()
    assert "can catch slowdowns of" in verdict.hint() and "--bench-ab=REF" in verdict.hint()
    assert verdict.hint_text is None  # no cause of its own: the summary's line names it with the others


def test_short_history_hint_says_record_more_runs():
    base = [{"schema": 1, "benchmarks": {"x": {"timer": "cpu", "rounds_ms": [level] * 10}}} for level in (0.9, 1.1)]
    cand = [{"schema": 1, "benchmarks": {"x": {"timer": "cpu", "rounds_ms": [1.2] * 10}}}]
    verdict = compare_runs(cand, base)["x"]
    assert verdict.status == "INCONCLUSIVE" and verdict.history == 2
    assert "--bench-save" in verdict.hint() and "at least 3" in verdict.hint()
    assert Verdict(id="x", status="UNCHANGED", hint_text="ignored").hint() is None


def test_a_canary_move_with_too_few_others_advises_what_this_run_lacks():
    from pytest_tesserabench.gate.model import Shift
    from pytest_tesserabench.gate.pipeline import RULE, _hint

    moved = Shift(0.0, 0.01, "none yet (too few other benchmarks measured)", canary_moved=0.1)
    once = _hint(RULE, 3, 0.2, 0.05, moved)
    assert "measuring in passes" in once and "--bench-ab=REF" in once
    # measured in passes already (a -k of two benchmarks): passes cannot be the advice
    passes = _hint(RULE, 3, 0.2, 0.05, moved, in_passes=True)
    assert "measuring in passes" not in passes and "more of the suite in the run" in passes


def test_per_benchmark_threshold_override(rng):
    cand, base = make_runs(1, rng, scale={IDS[0]: 1.12}), make_runs(5, rng)
    assert judge(cand, base)[IDS[0]].status == "REGRESSED"
    relaxed = judge(cand, base, thresholds={IDS[0]: 0.25})[IDS[0]]
    assert relaxed.status == "UNCHANGED" and relaxed.threshold == pytest.approx(0.25)


def test_m_divides_alpha(rng):
    cand, base = make_runs(1, rng), make_runs(3, rng)
    assert judge(cand, base, m=100)[IDS[0]].alpha_per_test == pytest.approx(1e-4)


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


def test_a_machine_slower_for_the_whole_suite_is_removed_as_this_runs_shift(rng):
    # Every benchmark 20% slower, the canary too: the run's shared shift, not four regressions;
    # each verdict says it was removed, and the suite-wide shift reports what the suite moved.
    base = make_runs(3, rng, canary=2.0)
    slow_machine = make_runs(1, rng, scale={i: 1.2 for i in IDS}, canary=2.4)
    verdicts = compare_runs(slow_machine, base)
    assert not any(v.failed for v in verdicts.values())
    # (measured in one pass, the first benchmarks had no others to tell the shift from: the
    # canary's move since the baseline is their uncertainty instead)
    last = verdicts[IDS[-1]]
    assert last.status == "UNCHANGED" and last.shift == pytest.approx(0.2, abs=0.03)
    assert "this run's shared shift +19.9% removed" in last.line()
    assert verdicts[IDS[0]].status == "INCONCLUSIVE" and verdicts[IDS[0]].shift == 0.0
    suite = History.of(docs(base)).suite_shift(docs(slow_machine)[0].benchmarks.values(), math.log(2.4))
    assert suite is not None and math.expm1(suite.shift) == pytest.approx(0.2, abs=0.03) and not suite.failed


EIGHT = [f"t.py::test_{k}" for k in range(8)]


def eight_at(rng, levels) -> dict:
    """A run of eight benchmarks at these levels (ms), each measured with 0.5% round noise."""
    bench = {
        i: {"timer": "cpu", "rounds_ms": (level * np.exp(rng.normal(0, 0.005, 12))).tolist()}
        for i, level in zip(EIGHT, levels)
    }
    return {"schema": 1, "canary_ms": [2.0] * 5, "benchmarks": bench, "measured_order": EIGHT[::-1]}


def test_benchmarks_that_took_a_shared_shift_unalike_are_not_judged_through_it(rng):
    # A loaded run: the others slowed 40-90%, this one +33%. Removing their median shift would
    # read it faster (a sign flipped by a correction); how unalike they took the shift is its
    # uncertainty, so the verdict is decided neither way, and its hint names the cause.
    base = [eight_at(rng, [1.0] * 8) for _ in range(3)]
    loaded = eight_at(rng, [1.33, 1.4, 1.5, 1.6, 1.66, 1.7, 1.8, 1.9])
    verdict = compare_runs([loaded], base)[EIGHT[0]]
    assert verdict.status == "INCONCLUSIVE" and verdict.stage == "shift", verdict.line()
    assert verdict.ratio < 0.85 and verdict.shift > 0.6  # what the correction alone would have decided
    assert "benchmarks did not slow alike" in verdict.hint()


def test_an_interval_widened_by_how_unalike_the_others_moved_says_so_whatever_the_shift_itself(rng):
    # The others moved -25% to +25% around a median of about nothing: the shift removed is small,
    # its uncertainty is not. The hint names that uncertainty, not a correction of -0.4% that
    # "cannot be judged through" (the two read as contradicting each other).
    base = [eight_at(rng, [1.0] * 8) for _ in range(3)]
    verdict = compare_runs([eight_at(rng, [1.08, 0.75, 0.85, 0.95, 1.0, 1.05, 1.15, 1.25])], base)[EIGHT[0]]
    assert verdict.status == "INCONCLUSIVE" and verdict.stage == "rule", verdict.line()
    assert abs(verdict.shift) < 0.03
    assert "most of its interval is the uncertainty of this run's shared shift" in verdict.hint()
    assert "unalike" in verdict.hint() and "cannot be judged through" not in verdict.hint()


@pytest.mark.parametrize(
    "change, shift, unalike, status", [(0.008, 0.1, 0.01, "UNCHANGED"), (-0.15, 0.3, 0.04, "INCONCLUSIVE")]
)
def test_a_shift_is_a_correction_to_judge_through_while_how_unalike_it_was_taken_cannot_turn_a_verdict(
    change, shift, unalike, status
):
    # A steady benchmark read +0.8% after a +10% shift of this run was removed, the benchmarks
    # 1% unalike in how they took it: more than the benchmark's own noise, yet too little to turn
    # a verdict at a 5% threshold, so the correction stands. Read -15% after +30% removed, 4%
    # unalike: the verdict rests on this benchmark's share of the shift, decided neither way.
    one = np.array
    nc = NoiseComponents(
        diff=one([change]), base_centre=one([0.0]), cand_centre=one([change]), between_est=one([1e-5]),
        between_df=one([3.0]), within_base=one([1e-7]), within_cand=one([1e-7]), n_base=one([4.0]),
        n_cand=one([1.0]), cand_spread=one([0.0]), here_diff=one([change]), later_diff=one([np.nan]),
        low_diff=one([change]), high_diff=one([change]),
    )  # fmt: skip
    dec = decide(
        nc, one([1e-5]), GateConfig(), 8, shift_var=unalike**2 + 1e-5, shift_df=8.0, unalike_var=unalike**2, shift=shift
    )
    assert (dec.status[0], dec.stage[0]) == (status, "rule" if status == "UNCHANGED" else "shift")


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
    # Baseline runs 1.2% apart (each benchmark's own drift); this process and two fresh ones all
    # read +12%: the median of three processes carries about half the between-run variance of one,
    # so together they decide it.
    drift = [math.exp(0.012 * k) for k in (-1, 0, 1)]
    base = [
        {
            "schema": 1,
            "benchmarks": {
                i: {"timer": "cpu", "rounds_ms": (drift[(j + n) % 3] * np.exp(PATTERN)).tolist()}
                for n, i in enumerate(IDS)
            },
        }
        for j in range(3)
    ]  # each benchmark drifting on its own, not with the run
    processes = runs_at(1.0, 1.0, 1.0, first=[1.125, 1.12, 1.115])
    alone = compare_runs(processes[:1], base)[IDS[0]]
    together = compare_runs(processes[:1], base, processes=processes[1:])[IDS[0]]
    assert alone.status == "INCONCLUSIVE" and together.status == "REGRESSED"
    assert (alone.processes, together.processes) == (1, 3)
    assert together.ratio == pytest.approx(1.12, abs=0.002)
    assert together.p_value < alone.alpha_per_test < alone.p_value
    assert together.detectable < alone.detectable
    kept = "measured again in 2 fresh process(es) the run file kept: +12.0%, +11.5%"
    assert any(note.startswith(kept) for note in together.notes)


def test_processes_that_disagree_by_more_than_the_change_confirm_nothing():
    # This process read +30%; two fresh ones +6% and +60%: their median is +30%, but processes
    # that far apart say nothing about the code, whatever the variance says.
    base = runs_at(*(math.exp(0.002 * k) for k in (-4, -2, 0, 2, 4)))
    agree = compare_runs(runs_at(1.0, first=[1.3]), base, processes=runs_at(1.0, 1.0, first=[1.28, 1.32]))[IDS[0]]
    assert agree.status == "REGRESSED" and agree.processes == 3
    split = compare_runs(runs_at(1.0, first=[1.3]), base, processes=runs_at(1.0, 1.0, first=[1.06, 1.6]))[IDS[0]]
    assert split.status == "INCONCLUSIVE" and split.stage == "processes"
    assert "disagree by more than the change" in split.hint()


def test_a_slowdown_one_of_the_processes_read_less_than_half_of_confirms_nothing():
    # This process and one fresh one read +46%, the other fresh one -1%: the code ran at the
    # baseline's speed there, so the +46% is a state two processes of three share (a benchmark
    # whose processes sit at two levels, of which the baseline's drew only one), not the code.
    base = runs_at(*(math.exp(0.002 * k) for k in (-4, -2, 0, 2, 4)))
    split = compare_runs(runs_at(1.0, first=[1.46]), base, processes=runs_at(1.0, 1.0, first=[1.46, 0.99]))[IDS[0]]
    assert split.status == "INCONCLUSIVE" and split.stage == "processes"
    # A process a hair slower than the baseline (+0.5%: its own noise) ran the code at the
    # baseline's speed all the same: it is nearer no change than the change.
    hair = compare_runs(runs_at(1.0, first=[1.46]), base, processes=runs_at(1.0, 1.0, first=[1.46, 1.005]))[IDS[0]]
    assert hair.status == "INCONCLUSIVE" and hair.stage == "processes"
    # Fresh processes that read it larger together (a busy moment: +45%, +50%) make the median
    # larger, not this process's +20% a process that did not read it: the code.
    busy = compare_runs(runs_at(1.0, first=[1.2]), base, processes=runs_at(1.0, 1.0, first=[1.45, 1.5]))[IDS[0]]
    assert busy.status == "REGRESSED", busy.line()
    # Every process more than half the change slower (the least by +30%): the code.
    moved = compare_runs(runs_at(1.0, first=[1.46]), base, processes=runs_at(1.0, 1.0, first=[1.46, 1.3]))[IDS[0]]
    assert moved.status == "REGRESSED"


def test_a_speed_up_one_of_the_processes_read_as_a_slowdown_is_not_improved():
    # This process read +12%; two fresh ones, in a faster state of their own, -8% and -10%: their
    # median process says -8%, but a code change moves every process, and this one moved the
    # other way. (A code 10% slower, read so in a real study.)
    base = runs_at(*(math.exp(0.002 * k) for k in (-4, -2, 0, 2, 4)))
    split = compare_runs(runs_at(1.0, first=[1.12]), base, processes=runs_at(1.0, 1.0, first=[0.92, 0.9]))[IDS[0]]
    assert split.status == "INCONCLUSIVE" and split.stage == "processes", split.line()
    # Every process faster by more than half the change: the code.
    faster = compare_runs(runs_at(1.0, first=[0.95]), base, processes=runs_at(1.0, 1.0, first=[0.92, 0.9]))[IDS[0]]
    assert faster.status == "IMPROVED", faster.line()


def test_fresh_processes_that_agree_with_each_other_and_not_with_this_one_confirm_nothing():
    # This process read +6% in its passes; two fresh processes, measured one after the other
    # later, +90% and +109% (a neighbour contending for the memory then): the median of the three
    # is theirs, but they are one moment against another, further apart than the change they read
    # together, and nothing tells the code's change from that moment's.
    base = runs_at(*(math.exp(0.002 * k) for k in (-4, -2, 0, 2, 4)))
    later = compare_runs(runs_at(1.0, first=[1.06]), base, processes=runs_at(1.0, 1.0, first=[1.9, 2.09]))[IDS[0]]
    assert later.status == "INCONCLUSIVE" and later.stage == "processes"
    # The same readings with this process read at the fresh processes' moment decide it.
    alike = compare_runs(runs_at(1.0, first=[1.85]), base, processes=runs_at(1.0, 1.0, first=[1.9, 2.09]))[IDS[0]]
    assert alike.status == "REGRESSED"
    # Read slower here than there, this process is the odd one (a process's state, or a busy
    # pass): the fresh processes' +25% stands.
    odd_here = compare_runs(runs_at(1.0, first=[2.0]), base, processes=runs_at(1.0, 1.0, first=[1.24, 1.26]))[IDS[0]]
    assert odd_here.status == "REGRESSED" and odd_here.ratio == pytest.approx(1.26, abs=0.01)


def test_config_validation_names_the_field():
    with pytest.raises(ValueError, match="alpha"):
        GateConfig(alpha=2)
    with pytest.raises(ValueError, match="threshold"):
        GateConfig(threshold=-0.1)
    with pytest.raises(ValueError, match="unalike_share_of_threshold"):
        GateConfig(unalike_share_of_threshold=-1)
    with pytest.raises(ValueError, match="later_run_drift"):
        GateConfig(later_run_drift=-1)


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
    whole = judge(cand, base)
    for bench_id in IDS:
        alone_run = {**cand[0], "benchmarks": {bench_id: cand[0]["benchmarks"][bench_id]}}
        alone = judge([alone_run], base, m=len(IDS))[bench_id]
        assert (alone.status, alone.p_value) == (whole[bench_id].status, pytest.approx(whole[bench_id].p_value))


def kernel(**fields):
    return {"name": "k", "arch": "sm_90", "constexprs": {"BLOCK": 1024}, "num_warps": 4, "spill_bytes": 0,
            "occupancy": 1.0, **fields}  # fmt: skip


def test_interpreted_records_with_unchanged_figures_are_unchanged_not_ungated(rng):
    same = {i: [kernel()] for i in IDS}
    verdicts = compare_runs(make_runs(1, rng, kernels=same, timer="interpreter"), make_runs(3, rng, kernels=same))
    assert {v.status for v in verdicts.values()} == {"UNCHANGED"}
    assert verdicts[IDS[0]].notes[0] == "kernel figures compared; timings not (timed in the Triton interpreter)"


def test_interpreted_records_measured_in_other_passes_than_the_baseline_are_still_judged_on_figures(rng):
    # a test timed in the interpreter measures once, whatever passes its baseline's runs made:
    # its verdict is about the kernel figures, which the passes do not centre
    same = {i: [kernel()] for i in IDS}

    def in_passes(runs, passes):
        for run in runs:
            for record in run["benchmarks"].values():
                record["sampling"] = {"passes": passes, "pass_rounds": [12 // passes] * passes}
        return runs

    base = in_passes(make_runs(3, rng, kernels=same, timer="interpreter"), 4)
    verdicts = compare_runs(in_passes(make_runs(1, rng, kernels=same, timer="interpreter"), 1), base)
    assert {v.status for v in verdicts.values()} == {"UNCHANGED"}, [v.line() for v in verdicts.values()]


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
    from pytest_tesserabench.record.results import Verdict

    def text(ratio, low, high):
        return Verdict(id="x", status="UNCHANGED", ratio=ratio, ci=(low, high)).change_text()

    assert text(1.151, 1.12, 1.183) == "+15.1% [+12.0%, +18.3%]"
    assert text(12.4, 11.0, 13.0) == "12.4x [11x, 13x]"
    # an interval reaching past 3x either way turns the whole change into factors, never a mix
    assert text(0.674, 0.3, 1.501) == "0.67x [0.3x, 1.5x]"
    # a large factor in digits, never as an exponent (5e+02x)
    assert text(473.2, 347.0, 12400.0) == "473x [347x, 12,400x]"
    from pytest_tesserabench.record.units import format_factor

    assert format_factor(0.00004) == "1/25,000x" and format_factor(0.013) == "0.013x"


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
    assert f"{LEFT_OUT_NOTE}: 200 ms" in unchanged.notes
    # one left out 3% off the others is left out as well, but not named as a busy machine's: a
    # note reading "3.09 ms" beside a baseline of 3.00 ms says nothing a reader can use
    slight = compare_runs(runs_at(1.0), runs_at(*centres, first=[1, 1, 1, 1.03, 1, 1, 1, 1, 1]))[IDS[0]]
    assert slight.status == "UNCHANGED" and not any(LEFT_OUT_NOTE in note for note in slight.notes)
    # a third of them at a second level is the benchmark's own noise, not a busy machine's
    two_levels = runs_at(*centres, first=[1, 1.6, 1, 1, 1.6, 1, 1, 1.6, 1])
    judged = compare_runs(runs_at(1.0), two_levels)[IDS[0]]
    assert judged.status == "INCONCLUSIVE" and not any(LEFT_OUT_NOTE in note for note in judged.notes)


def test_a_save_names_only_the_left_out_processes_a_compare_would_fail_on():
    # A tight benchmark (0.2% apart) leaves out a process 2.5% fast as well as one 200x slow; a
    # compare reading it 2.5% fast fails nothing, so only the slow one is named at save time
    centres = [math.exp(0.002 * k) for k in (-4, -3, -2, -1, 0, 1, 2, 3, 4)]
    history = History.of(docs(runs_at(*centres, first=[1, 1, 1, 200, 1, 1, 1, 1, 0.975])))
    assert history.left_out[IDS[0]] == {3, 8}
    times, typical, newest = history.left_out_times(slower_by=0.05)[IDS[0]]
    assert len(times) == 1 and times[0] > 100 * typical and not newest  # (run 3 of 9, not the newest save's)
    assert len(history.left_out_times()[IDS[0]][0]) == 1  # (only slower ones, by default by anything)
    assert history.left_out_times(slower_by=300.0) == {}


def test_a_far_process_is_far_from_the_shift_the_other_benchmarks_read():
    # A real baseline of six benchmarks in nine processes (three saves of three; each process's
    # centre, % from the benchmark's median). The fifth process read w_str +54.5%: far, and left
    # out. Judged against the model's shifts, medians w_str took part in, a share of its residuals
    # were zeroed, their robust spread shrank to 1.5%, three processes read as far, and the rule
    # "a quarter or more far: two levels, its own noise" kept the +54.5% in (the gate then could
    # catch only a 96% slowdown of it).
    table = {
        "w_dict": [1.2, -2.8, 13.5, 6.0, 0.0, 0.8, -2.0, -5.3, -2.5],
        "w_matmul": [-4.1, 7.4, 3.2, -0.9, 2.4, 1.1, 0.0, -0.5, -1.6],
        "w_sieve": [-3.0, -0.6, -2.1, 0.0, 35.8, 38.8, 3.0, -1.8, 0.4],
        "w_sort": [0.0, -1.6, -1.1, -2.7, -1.3, 5.4, 3.9, 0.4, 8.1],
        "w_str": [0.0, 2.8, -1.2, 8.2, 54.5, -0.5, 2.2, -0.1, -1.7],
        "w_sum": [3.3, 1.9, -2.9, -3.1, 0.8, 53.3, 0.0, -2.2, -3.1],
    }
    runs = [
        {
            "schema": 1,
            "benchmarks": {
                f"t.py::{name}": {"timer": "cpu", "rounds_ms": (1 + pcts[j] / 100) * np.exp(PATTERN)}
                for name, pcts in table.items()
            },
        }
        for j in range(9)
    ]
    for run in runs:
        for record in run["benchmarks"].values():
            record["rounds_ms"] = record["rounds_ms"].tolist()
    history = History.of(docs(runs))
    assert history.left_out["t.py::w_str"] == {4}
    assert history.detectable()["t.py::w_str"] < 0.3


def test_leave_one_out_medians_are_each_column_s_median_without_the_row():
    rng = np.random.default_rng(7)
    for _ in range(60):
        table = np.round(rng.normal(size=(rng.integers(1, 8), rng.integers(1, 4))), 1)  # (ties too)
        table[rng.random(table.shape) < 0.2] = np.nan
        got = leave_one_out_medians(table)
        for (row, col), cell in np.ndenumerate(table):
            others = np.delete(table[:, col], row)
            others = others[np.isfinite(others)]
            want = np.median(others) if np.isfinite(cell) and others.size else np.nan
            assert got[row, col] == pytest.approx(want, nan_ok=True)


def test_an_undecided_benchmark_is_measured_again_only_where_more_processes_could_decide_it():
    # Fresh processes cost a start-up and the test's time each: spent where, reading it half-way
    # to the top of its interval, they would decide it; not on a benchmark whose runs are 6% or
    # 40% apart (with measure_again_reach=1, reading as high as its interval reaches, the 6% one
    # was measured again too, and stayed undecided).
    def level(first, spread):
        return runs_at(*(math.exp(spread * k) for k in (-1, 0, 1)), first=first)

    for spread, reach, measured in ((0.012, 0.5, 3), (0.06, 0.5, 1), (0.06, 1.0, 3), (0.4, 1.0, 1)):
        base = level([1.0, 1.0, 1.0], 0.0)
        for run, k in zip(base, (-1, 0, 1)):  # the first benchmark's own drift between saves
            record = run["benchmarks"][IDS[0]]
            record["rounds_ms"] = [ms * math.exp(spread * k) for ms in record["rounds_ms"]]
        fresh = runs_at(1.0, 1.0, first=[1.08, 1.08])
        config = GateConfig(measure_again_reach=reach)
        verdict = compare_runs(runs_at(1.0, first=[1.08]), base, config, processes=fresh)[IDS[0]]
        assert verdict.processes == measured, (spread, reach, verdict.line())


def test_the_processes_of_one_save_share_its_drift():
    # Saves whose processes agree but which differ from each other: most of the noise is the save's,
    # which more processes of one run do not average out; the reverse, most is each process's own.
    def saves(by_save, by_process):
        runs = []
        for s, save_level in enumerate(by_save):
            run = runs_at(1.0, first=[save_level * by_process[s]])[0]
            for bench_id, record in run["benchmarks"].items():  # (a save measures every benchmark again)
                levels = [by_process[(s + p + 1) % len(by_process)] for p in range(2)]
                levels = [save_level * lv for lv in levels] if bench_id == IDS[0] else [1.0, 1.0]
                kept = [
                    {"rounds_ms": list(lv * np.exp(PATTERN)), "pass_rounds": [], "canary_ms": None} for lv in levels
                ]
                record["confirm"] = kept
            runs.append(run)
        return History.of(docs(runs))

    shared = saves([0.97, 1.0, 1.03], [1.0, 1.001, 0.999])
    own = saves([1.0, 1.0, 1.0], [0.97, 1.0, 1.03])
    assert shared.process_share < 0.2 < 0.8 < own.process_share


def test_an_undecided_line_says_what_p_the_suite_needs():
    # a 95% interval clear of the threshold, yet not significant at alpha / m: the line says so
    verdict = Verdict(
        id="t", status="INCONCLUSIVE", baseline_ms=1.0, candidate_ms=1.25, ratio=1.25, ci=(1.05, 1.48),
        p_value=0.0067, threshold=0.05, alpha_per_test=0.002,
    )  # fmt: skip
    assert "p=0.0067 (needs < 0.002, alpha split over the benchmarks compared: a bar past the 95% interval shown)" in (
        verdict.line()
    )
    assert "needs" not in replace(verdict, p_value=0.001, status="REGRESSED").line()


def test_an_unchanged_line_that_reads_faster_says_why_it_is_not_improved():
    verdict = Verdict(
        id="t", status="UNCHANGED", baseline_ms=1.0, candidate_ms=0.59, ratio=0.59, ci=(0.35, 0.98),
        p_value=0.99, threshold=0.05, alpha_per_test=0.002,
    )  # fmt: skip
    assert verdict.line().startswith("UNCHANGED (faster), ")
    assert "short of the bar for IMPROVED" in verdict.line()
    assert "IMPROVED" not in replace(verdict, ci=(0.9, 1.02)).line()
    assert replace(verdict, ci=(0.9, 1.02)).head() == "UNCHANGED"
    # the tables (terminal, markdown, HTML) show the same head
    from pytest_tesserabench.report.comparison_table import render_comparison

    table = render_comparison({verdict.id: verdict}, version_diffs=[], canary_ratio=None, width=200)
    assert "UNCHANGED (faster)" in table


def test_a_benchmark_measured_in_passes_is_not_told_to_measure_in_passes(rng):
    # One benchmark of a four-benchmark baseline (a -k), the machine 12% slower by the canary:
    # no other benchmark tells the run's shift, and the record was measured in four passes.
    def run(levels, canary, passes):
        benchmarks = {}
        for name, level in levels.items():
            rounds = list(level * (1 + 0.01 * rng.standard_normal(40)))
            sampling = {"pass_rounds": [10] * 4, "passes": 4} if passes else {}
            benchmarks[name] = {"timer": "cpu", "rounds_ms": rounds, "sampling": sampling}
        return {"schema": 1, "canary_ms": [canary, canary], "benchmarks": benchmarks}

    levels = {f"b{k}": 1.0 + k for k in range(4)}
    base = [run({n: v * drift for n, v in levels.items()}, 10.0, True) for drift in (0.97, 1.0, 1.03, 1.01)]
    for passes, advice in ((True, "more of the suite in the run"), (False, "measuring in passes")):
        verdict = compare_runs([run({"b0": 1.12}, 11.2, passes)], base)["b0"]
        assert verdict.status == "INCONCLUSIVE", verdict.line()
        assert advice in verdict.hint(), verdict.hint()
