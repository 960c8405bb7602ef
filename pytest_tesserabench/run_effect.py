"""The run-effect model of history mode: log time = benchmark effect + run effect + noise.

Drift on a real machine is mostly shared by every benchmark of a run (clocks, load from other
jobs, thermal state). Modelled as independent per benchmark, it looks like large per-benchmark
noise (the gate loses power) and a loaded run looks like a suite-wide regression (false alarms).
So the baseline history is decomposed robustly (Tukey's median polish on the benchmarks x runs
table of run centres) into benchmark effects, one shift per run, and residuals; the gate judges
each benchmark on its residual, and the between-run noise comes from residuals too.

The candidate run's own shift is estimated from the other benchmarks measured so far in this
run (the median of their log ratios to their baseline effects, leaving the judged benchmark out,
so its own regression does not excuse itself); before enough of them are measured, none. With
fewer than MIN_BENCHMARKS benchmarks in the baseline the model is not used (today's rule: drift
per benchmark).

A change that slows every benchmark would vanish into the run effect; the suite-wide shift is
therefore reported on its own and fails the run when it exceeds the threshold and the canary does
not explain it (``suite_shift``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np
from scipy import stats

MIN_BENCHMARKS = 4  # below this the run effect is not separable from the benchmarks' own changes
MIN_OTHERS = 3  # other benchmarks of the candidate run needed to estimate its shift
POLISH_ITERATIONS = 6
MEDIAN_VARIANCE_FACTOR = math.pi / 2


@dataclass(frozen=True)
class BaselineModel:
    effects: dict[str, float]  # benchmark id -> its effect (log ms)
    run_shifts: tuple[float, ...]  # per baseline run (log), median 0
    residual_sd: float  # typical residual between-run sd of one run centre (log)
    canary_centre: float | None  # log ms, the baseline's canary (median over runs)
    # benchmark id -> extra variance (log^2) of a process state its passes caught (gate.pass_state_variances)
    pass_states: dict[str, float] = field(default_factory=dict)

    @property
    def shift_sd(self) -> float:
        """How much whole runs drift between each other in the baseline (log sd)."""
        shifts = np.asarray(self.run_shifts)
        return float(np.std(shifts, ddof=1)) if shifts.size > 1 else 0.0


def median_polish(table: np.ndarray, iterations: int = POLISH_ITERATIONS) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Tukey's median polish of a (..., rows, columns) table with NaN for missing cells:
    (row effects, column effects with median 0, residuals); leading axes are separate tables."""
    residual = np.array(table, dtype=float)
    rows = np.zeros(residual.shape[:-1])
    columns = np.zeros(residual.shape[:-2] + residual.shape[-1:])
    for _ in range(iterations):
        row_median = np.nanmedian(residual, axis=-1)
        rows += row_median
        residual -= row_median[..., :, None]
        column_median = np.nanmedian(residual, axis=-2)
        columns += column_median
        residual -= column_median[..., None, :]
    centre = np.median(columns, axis=-1, keepdims=True)
    return rows + centre, columns - centre, residual


def leave_one_out_median(values: np.ndarray) -> np.ndarray:
    """For each of the last axis's entries, the median of the others (NaN entries ignored)."""
    values = np.asarray(values, dtype=float)
    m = values.shape[-1]
    others = ~np.eye(m, dtype=bool)
    spread = np.where(others, values[..., None, :], np.nan)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a row with nothing left
        return np.nanmedian(spread, axis=-1)


def fit(centres: dict[str, dict[int, float]], runs: int, canary_centres: list[float]) -> BaselineModel | None:
    """The model of a baseline from each benchmark's run centres (log; run index -> centre), or
    None when there are too few benchmarks or runs to separate the run effect."""
    ids = [i for i, by_run in centres.items() if by_run]
    if len(ids) < MIN_BENCHMARKS or runs < 1:
        return None
    table = np.full((len(ids), runs), np.nan)
    for row, bench_id in enumerate(ids):
        for run, centre in centres[bench_id].items():
            table[row, run] = centre
    with np.errstate(all="ignore"):
        effects, shifts, residual = median_polish(table)
    counts = np.sum(~np.isnan(residual), axis=1)
    # Residual variance per benchmark with (runs - 1) degrees of freedom, pooled over the suite
    # (a robust typical value: the median), inflated for the run effect fitted from few columns.
    with np.errstate(all="ignore"):
        per_benchmark = np.nansum(residual**2, axis=1) / np.maximum(counts - 1, 1)
    usable = per_benchmark[counts > 1]
    residual_sd = float(np.sqrt(np.median(usable))) if usable.size else 0.0
    canary = [c for c in canary_centres if c is not None]
    return BaselineModel(
        effects=dict(zip(ids, effects.tolist())),
        run_shifts=tuple(float(s) if not math.isnan(s) else 0.0 for s in shifts),
        residual_sd=residual_sd,
        canary_centre=float(np.median(canary)) if canary else None,
    )


@dataclass(frozen=True)
class Shift:
    value: float  # log
    variance: float  # its uncertainty (log^2)
    source: str  # "5 other benchmarks of this run", "none yet ..."
    canary_moved: float = 0.0  # log: the canary's move since the baseline, when it widened the shift


def candidate_shift(
    model: BaselineModel, measured: dict[str, float], exclude: str, canary_centre: float | None = None
) -> Shift:
    """This run's shared shift for judging ``exclude``: from the other benchmarks measured so far
    (log centres); before enough are measured, no shift, with an uncertainty as large as the
    canary's move since the baseline (``canary_centre``: this run's log canary).

    The canary widens, it does not correct: on a virtual machine whose vCPUs step between two
    speeds every few seconds, the canary timed at the start of the run caught the other step as
    often as not (a +50% "shift" removed from benchmarks that ran at full speed, seen on the CI
    VM), while leaving the first benchmarks uncorrected turned a machine that moved since the
    baseline into false alarms. Uncertain by the canary's move, they are INCONCLUSIVE instead."""
    others = [c - model.effects[i] for i, c in measured.items() if i != exclude and i in model.effects]
    if len(others) >= MIN_OTHERS:
        spread = max(model.residual_sd, 1e-4)
        variance = MEDIAN_VARIANCE_FACTOR * spread**2 / len(others)
        return Shift(float(np.median(others)), variance, f"{len(others)} other benchmarks of this run")
    moved = 0.0
    if canary_centre is not None and model.canary_centre is not None:
        moved = canary_centre - model.canary_centre
    source = "none yet (too few other benchmarks measured)"
    if moved:
        source += f"; the canary at the start of this run moved {math.expm1(moved):+.1%} since the baseline's"
    return Shift(0.0, model.shift_sd**2 + moved**2, source, canary_moved=moved)


@dataclass(frozen=True)
class SuiteShift:
    shift: float  # log: median over benchmarks of (candidate centre - effect)
    canary: float | None  # log: the canary's own shift
    ci: tuple[float, float]  # log, of the unexplained part (everywhere - canary)
    p_value: float  # one-sided, "slower than the canary explains"
    benchmarks: int
    failed: bool
    everywhere: float  # log: what three quarters of the benchmarks showed in every pass
    passes: int

    def line(self) -> str:
        """The summary's line, "FAILED: " first when it fails the run: what the whole suite moved,
        what the machine (the canary) moved, then the verdict and its evidence."""
        machine = "no canary" if self.canary is None else f"the machine (canary) {_pct(self.canary)}"
        head = f"suite-wide shift {_pct(self.shift)} over {self.benchmarks} benchmarks, {machine}"
        every = " in every pass" if self.passes > 1 else ""
        unexplained = self.everywhere - max(self.canary or 0.0, 0.0)
        beyond = (
            f"{_pct(unexplained)} beyond the machine [{_pct(self.ci[0])}, {_pct(self.ci[1])}], p={self.p_value:.2g}"
        )
        if self.failed:
            return (
                f"FAILED: {head}: every benchmark got slower together and the machine does not explain it "
                f"(three quarters of them at least {_pct(self.everywhere)}{every}; {beyond})"
            )
        return f"{head}: not a slowdown of the whole suite ({beyond})"


def _pct(log_value: float) -> str:
    return f"{math.expm1(log_value) * 100:+.1f}%"


def local_canary_shift(records, baseline_runs: list) -> float | None:
    """How much slower (log) the machine was while this run's benchmarks were measured than while
    the baseline's were, by the canary timed right before each benchmark (median over the run,
    then over the baseline's runs); None where either side has none (baselines saved before
    2026-11-22). On the CI VM the start and end canaries caught the other speed state than the
    benchmarks in whole runs (every benchmark +37%, the start canary +0%, the canaries before the
    benchmarks +31%): only these describe the machine the benchmarks ran on."""

    def centre(recs) -> float | None:
        values = [math.log(r.canary_ms) for r in recs if r.canary_ms]
        return float(np.median(values)) if values else None

    here = centre(records)
    theirs = [c for c in (centre(run.benchmarks.values()) for run in baseline_runs) if c is not None]
    if here is None or not theirs:
        return None
    return here - float(np.median(theirs))


def machine_ratio(candidate_runs: list, baseline_runs: list) -> float | None:
    """The summary's "canary:" figure, how fast the machine was against the baseline's: by the
    canaries timed before each benchmark where both sides have them (the suite-wide shift's
    canary, so the two lines agree), else by those at the start and end of the runs."""
    from pytest_tesserabench import gate

    local = local_canary_shift(candidate_runs[-1].benchmarks.values(), baseline_runs) if candidate_runs else None
    return math.exp(local) if local is not None else gate.canary_ratio(candidate_runs, baseline_runs)


def suite_shift(
    model: BaselineModel,
    measured: dict[str, float],
    canary_centre: float | None,
    *,
    threshold: float,
    alpha: float,
    canary_shift: float | None = None,
    pass_measured: list[dict[str, float]] | None = None,
) -> SuiteShift | None:
    """The whole run's shift against the baseline; ``failed`` when it exceeds the threshold,
    significantly, beyond what the canary explains.

    What is judged is the shift a change of the code makes: shown by three quarters of the
    benchmarks (the lower quartile of their log ratios, so two regressed benchmarks of six and a
    noisy one do not make a suite-wide slowdown) in every pass (the lowest pass: a slow stretch of
    the machine covers some passes, a slower code all; ``pass_measured``, each pass's log
    centres). On the CI VM three of sixteen unchanged runs failed on the median of all passes: a
    slow stretch over two passes of four, and +5.9% from two regressed benchmarks and a noisy one.
    The canary only excuses: a canary that ran faster than the baseline's does not turn an
    unchanged suite into a slower one (a new user's unchanged suite, -0.2% against a canary -18.8%,
    failed as "+22.9% unexplained" before)."""
    values = [c - model.effects[i] for i, c in measured.items() if i in model.effects]
    if len(values) < MIN_BENCHMARKS:
        return None
    shift = float(np.median(values))
    by_pass = [[c - model.effects[i] for i, c in p.items() if i in model.effects] for p in pass_measured or []]
    by_pass = [p for p in by_pass if len(p) >= MIN_BENCHMARKS] or [values]
    everywhere = min(float(np.percentile(p, 25)) for p in by_pass)
    canary = canary_shift  # the canaries before the benchmarks, when both sides have them
    if canary is None and canary_centre is not None and model.canary_centre is not None:
        canary = canary_centre - model.canary_centre  # else the run's start and end
    unexplained = everywhere - max(canary or 0.0, 0.0)
    sd = math.sqrt(
        model.shift_sd**2 + MEDIAN_VARIANCE_FACTOR * max(model.residual_sd, 1e-4) ** 2 / len(values)
        + (0.005**2 if canary is not None else 0.0)
    )  # fmt: skip
    df = max(len(model.run_shifts) - 1, 1)
    p_value = float(stats.t.sf(unexplained / sd, df))
    q = float(stats.t.ppf(0.975, df))
    slower = min(everywhere, unexplained)  # the suite itself, and beyond what the machine explains
    failed = p_value < alpha and unexplained - q * sd > 0 and slower >= math.log1p(threshold)
    ci = (unexplained - q * sd, unexplained + q * sd)
    return SuiteShift(shift, canary, ci, p_value, len(values), failed, everywhere, len(by_pass))


def pass_measured(records) -> list[dict[str, float]]:
    """Each pass's log centres of the records measured in the most passes (the others, measured
    once, have no passes to compare), for suite_shift."""
    from pytest_tesserabench import gate

    centres = {r.id: gate.pass_centres(r) for r in records}
    most = max((len(c) for c in centres.values()), default=0)
    if most < 2:
        return []
    return [{i: c[p] for i, c in centres.items() if len(c) == most} for p in range(most)]


def fit_baseline(baseline_runs: list) -> BaselineModel | None:
    """The model of a baseline's runs (their centres, canaries and passes), or None (fit's
    conditions); computed once per comparison, as everything here depends on the baseline alone."""
    from pytest_tesserabench import gate

    canaries = [math.log(c) for c in (gate.canary_centre([run]) for run in baseline_runs) if c]
    model = fit(gate.run_centres(baseline_runs), len(baseline_runs), canaries)
    return None if model is None else replace(model, pass_states=gate.pass_state_variances(baseline_runs))


def compare_run(candidate, baseline_runs: list, config) -> dict:
    """A whole run judged as the plugin judged it while measuring (for `tesserabench compare` and
    `report`): the baseline's model, each benchmark's shift from the benchmarks before it in the
    run (the file keeps the order they were measured in; with interleaved passes, from all the
    others), the run's canary for the first ones.
    Without a model (fewer than MIN_BENCHMARKS benchmarks), the plain rule. Either way the run's
    own conditions (run_conditions.review) qualify the verdicts, as they did in the plugin."""
    from pytest_tesserabench import confirm, run_conditions

    baseline_runs = confirm.with_processes(baseline_runs)  # as the plugin reads a baseline
    judge = _run_judge(candidate, baseline_runs, config)

    def judged(more: list) -> dict:
        return run_conditions.review(
            list(candidate.benchmarks.values()),
            judge(more),
            start_canary_ms=run_conditions.start_samples(candidate.canary_ms),
            threshold=config.threshold,
            baseline_runs=baseline_runs,
            more=[list(run.benchmarks.values()) for run in more],
        )

    verdicts = judged([])
    more = confirm.fresh_runs(candidate)  # the fresh processes, where the file kept them
    if more:  # a benchmark about to fail judged on them too, as the plugin did (confirm.revised)
        again = judged(more)
        processes = confirm.Confirmation(processes=[run.benchmarks for run in more])
        suspects = confirm.suspects(list(candidate.benchmarks.values()), verdicts)
        for bench_id in (r.id for r in suspects if r.id in more[0].benchmarks):  # (the first holds them all)
            first, record = verdicts[bench_id], candidate.benchmarks[bench_id]
            ratios = confirm.fresh_ratios(processes, record, first.ratio) if first.ratio else []
            verdict, outcome = confirm.settled(first, again[bench_id], ratios, config.threshold)
            said = f"judged with the {len(more)} fresh process(es) the run file kept (--bench-confirm)"
            verdicts[bench_id] = replace(verdict, notes=(*verdict.notes, said + (f"; {outcome}" if outcome else "")))
    return verdicts


def run_suite_shift(candidate, baseline_runs: list, config) -> SuiteShift | None:
    """The suite-wide shift of a run read from a file, as the plugin reported it at the end of
    the run (every benchmark's centre, the canary of the start and the end)."""
    from pytest_tesserabench import confirm, gate

    baseline_runs = confirm.with_processes(baseline_runs)  # as the plugin reads a baseline
    model = fit_baseline(baseline_runs)
    if model is None:
        return None
    canary = gate.canary_centre([candidate])
    return records_suite_shift(
        model,
        candidate.benchmarks.values(),
        math.log(canary) if canary else None,
        baseline_runs,
        threshold=config.threshold,
        alpha=config.alpha,
    )


def records_suite_shift(
    model: BaselineModel, records, canary_centre: float | None, baseline_runs: list, *, threshold: float, alpha: float
) -> SuiteShift | None:
    """suite_shift of a run's records: their centres, their passes and the canaries timed before
    them (the plugin at the end of a run, and `tesserabench compare` on its file)."""
    from pytest_tesserabench import gate

    records = list(records)
    centres = {r.id: c for r, c in ((r, gate.log_centre(r)) for r in records) if c is not None}
    return suite_shift(
        model,
        centres,
        canary_centre,
        threshold=threshold,
        alpha=alpha,
        canary_shift=local_canary_shift(records, baseline_runs),
        pass_measured=pass_measured(records),
    )


def _run_judge(candidate, baseline_runs: list, config):
    """A function of ``more`` (--bench-confirm's fresh processes as runs, or none) that judges
    the run as the plugin did; the baseline's model, the shifts and the priors are computed once."""
    from pytest_tesserabench import gate, run_conditions

    model = fit_baseline(baseline_runs)
    if model is None:
        return lambda more: gate.compare_runs(
            [candidate, *more], baseline_runs, config, processes_of_one_run=bool(more)
        )
    # While judging, the plugin had the canary of the run's start only (the end's comes after).
    start = [c for c in run_conditions.start_samples(candidate.canary_ms) if c > 0]
    log_canary = math.log(float(np.median(start))) if start else None
    # Measured in interleaved passes, the plugin knew every benchmark's earlier passes before its
    # last pass judged the first one; the file keeps them (sampling.pass_rounds).
    earlier = ((i, gate.earlier_passes_centre(r)) for i, r in candidate.benchmarks.items())
    measured: dict[str, float] = {i: c for i, c in earlier if c is not None}
    shifts = {}
    for bench_id in candidate.measured_order or list(candidate.benchmarks):
        record = candidate.benchmarks[bench_id]
        centre = gate.log_centre(record)
        if centre is not None:
            measured[bench_id] = centre
        shifts[bench_id] = candidate_shift(model, measured, bench_id, log_canary)
    priors = gate.baseline_priors(baseline_runs, config.between_run_floor, model)
    return lambda more: gate.compare_runs(
        [candidate, *more],
        baseline_runs,
        config,
        model=model,
        shifts=shifts,
        priors=priors,
        processes_of_one_run=bool(more),
    )
