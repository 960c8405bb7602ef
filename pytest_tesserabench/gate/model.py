"""The run-effect model of history mode: log time = benchmark effect + run effect + noise.

Drift on a real machine is mostly shared by the benchmarks of a run (clocks, load from other jobs,
thermal state). Modelled as independent per benchmark, it looks like large per-benchmark noise (the
gate loses power) and a loaded run looks like a suite-wide regression (false alarms). So the
baseline history is decomposed robustly (Tukey's median polish on the benchmarks x runs table of
run centres; each fresh process of a save is a run of its own) into benchmark effects, one shift
per run, and residuals; the gate judges each benchmark less its run's shift, and its between-run
noise comes from the residuals.

The candidate run's own shift is estimated from the other benchmarks measured in it (Shift). It is
a correction, not a measurement: benchmarks do not slow alike, so it carries its own uncertainty.

A change that slows every benchmark would vanish into the run effect; the suite-wide shift is
therefore reported on its own and fails the run when it exceeds the threshold and the canary does
not explain it (``suite_shift``). The canary too takes the machine's shift its own way, so it
explains a shift only to within how unalike the benchmarks took it.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
from scipy import stats

from pytest_tesserabench.gate.centres import MEDIAN_VARIANCE_FACTOR, log_centre, pass_centres, robust_sd

POLISH_ITERATIONS = 6


@dataclass(frozen=True)
class BaselineModel:
    effects: dict[str, float]  # benchmark id -> its effect (log ms)
    run_shifts: tuple[float, ...]  # per baseline run (log), median 0
    residual_sd: float  # typical residual between-run sd of one run centre (log)
    canary_centre: float | None  # log ms, the baseline's canary (median over runs)

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
    # A row or column with no cell (a run whose every process was left out as far) has no median:
    # nothing is removed from it, and its effect is NaN, never a NaN spread over every other.
    empty = np.all(np.isnan(residual), axis=-2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # numpy's "All-NaN slice": the case above
        for _ in range(iterations):
            row_median = np.nan_to_num(np.nanmedian(residual, axis=-1))
            rows += row_median
            residual -= row_median[..., :, None]
            column_median = np.nan_to_num(np.nanmedian(residual, axis=-2))
            columns += column_median
            residual -= column_median[..., None, :]
        columns = np.where(empty, np.nan, columns)
        centre = np.nanmedian(columns, axis=-1, keepdims=True)
    return rows + centre, columns - centre, residual


def run_centres(runs: list) -> dict[str, dict[int, float]]:
    """Benchmark id -> {run index: log centre} over the runs that measured it."""
    centres: dict[str, dict[int, float]] = {}
    for index, run in enumerate(runs):
        for bench_id, record in run.benchmarks.items():
            centre = log_centre(record)
            if centre is not None:
                centres.setdefault(bench_id, {})[index] = centre
    return centres


def fit(
    centres: dict[str, dict[int, float]], runs: int, canary_centres: list[float], *, min_benchmarks: int = 4
) -> BaselineModel | None:
    """The model of a baseline from each benchmark's run centres (log; run index -> centre), or
    None when there are too few benchmarks or runs to separate the run effect."""
    ids = [i for i, by_run in centres.items() if by_run]
    if len(ids) < min_benchmarks or runs < 1:
        return None
    table = np.full((len(ids), runs), np.nan)
    for row, bench_id in enumerate(ids):
        for run, centre in centres[bench_id].items():
            table[row, run] = centre
    with np.errstate(all="ignore"):
        effects, shifts, residual = median_polish(table)
    counts = np.sum(~np.isnan(residual), axis=1)
    # Residual variance per benchmark with (runs - 1) degrees of freedom, pooled over the suite
    # (a robust typical value: the median).
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


def fit_baseline(baseline_runs: list, *, min_benchmarks: int = 4) -> BaselineModel | None:
    """The model of a baseline's runs (each process a run), or None (fit's conditions)."""
    canaries = [math.log(c) for c in (canary_centre([run]) for run in baseline_runs) if c]
    return fit(run_centres(baseline_runs), len(baseline_runs), canaries, min_benchmarks=min_benchmarks)


@dataclass(frozen=True)
class Shift:
    """This run's shared shift, as removed from one benchmark's centre."""

    value: float  # log
    variance: float  # log^2: its uncertainty for this benchmark (the estimate's, and how unalike benchmarks take it)
    source: str  # "5 other benchmarks of this run", "none yet ..."
    unalike: float = 0.0  # log sd: how much more the other benchmarks scatter around it than their noise explains
    df: float = math.inf  # degrees of freedom of ``variance``
    canary_moved: float = 0.0  # log: before enough others were measured, the canary's move since the baseline


def candidate_shift(
    model: BaselineModel,
    measured: dict[str, float],
    exclude: str,
    canary_centre: float | None = None,
    *,
    min_others: int = 3,
    prior_runs: int = 4,
) -> Shift:
    """This run's shared shift for judging ``exclude``: the median of the other benchmarks' moves
    (log centres measured so far, less their baseline effects), so a benchmark's own regression
    does not excuse itself.

    Its variance is what the correction can be trusted to: the median's own error, plus how
    unalike the benchmarks took the shift. Benchmarks do not slow alike under load (one may take
    half a +60% shift, another all of it), so the scatter of the others around their median, less
    what the baseline's residual noise explains, is each benchmark's uncertainty about its share.
    It is also how far this run's conditions moved each benchmark on its own, which back-to-back
    saves do not show (a later run can move unchanged benchmarks several percent each its own
    way, with no shared shift at all). Both are moderated as
    the rule moderates drift: pooled with the baseline's residual noise worth ``prior_runs`` runs,
    on as many degrees of freedom as those and the others less one. The median's error is of the
    others' core (a robust scale); how unalike they took the shift is their standard deviation,
    every other benchmark in it: a robust scale, or the one furthest out left aside, would call the
    benchmarks that took more of it outliers, and they are the very thing to measure (leaving the
    furthest of eight out reads the variance 1.7 times too small where benchmarks take the shift
    unalike, and the run then fails or passes unchanged ones for their share of the load). A
    neighbour's own regression widens it too: under a shared shift a benchmark's share of it and
    its own change cannot be told apart.
    Before ``min_others`` are measured: no shift, uncertain by the baseline's own run shifts and
    the canary's move since the baseline (``canary_centre``: this run's, log)."""
    others = np.array([c - model.effects[i] for i, c in measured.items() if i != exclude and i in model.effects])
    if others.size >= min_others:
        value = float(np.median(others))
        df = prior_runs + others.size - 1.0
        noise = max(model.residual_sd**2, 1e-8)

        def moderated(variance: float) -> float:  # pooled with the residual noise worth prior_runs runs
            return (prior_runs * noise + (others.size - 1) * variance) / df

        error = MEDIAN_VARIANCE_FACTOR * moderated(float(robust_sd(others)) ** 2) / others.size
        spread = moderated(float(np.var(others, ddof=1)))  # how unalike they took it
        shared = max(abs(value) - 2 * math.sqrt(error), 0.0)  # as much of it as surely is a shift
        unalike = min(math.sqrt(max(spread - noise, 0.0)), shared)
        return Shift(value, error + unalike**2, f"{others.size} other benchmarks of this run", unalike, df)
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
    threshold: float  # log: the slowdown the rule fails a run for

    def line(self) -> str:
        """The summary's line, "FAILED: " first when it fails the run: what the whole suite moved,
        what the machine (the canary) moved, then the verdict and its evidence."""
        machine = "no canary" if self.canary is None else f"the machine (canary) {_pct(self.canary)}"
        head = f"suite-wide shift {_pct(self.shift)} over {self.benchmarks} benchmarks, {machine}"
        every = " in every pass" if self.passes > 1 else ""
        unexplained = self.everywhere - max(self.canary or 0.0, 0.0)
        evidence = f"[{_pct(self.ci[0])}, {_pct(self.ci[1])}], p={self.p_value:.2g}"
        # (what three quarters of the benchmarks showed, not the median shift the head names)
        beyond = f"three quarters of the benchmarks {_pct(unexplained)} or more{every} beyond the machine {evidence}"
        if self.failed:
            return (
                f"FAILED: {head}: every benchmark got slower together and the machine does not explain it "
                f"(three quarters of them at least {_pct(self.everywhere)}{every}; {_pct(unexplained)} beyond the "
                f"machine {evidence})"
            )
        if self.ci[1] >= self.threshold:  # a suite-wide slowdown at the threshold is inside the interval
            return f"{head}: this run cannot tell whether the whole suite got {_pct(self.threshold)} slower ({beyond})"
        return f"{head}: not a slowdown of the whole suite ({beyond})"


def _pct(log_value: float) -> str:
    return f"{math.expm1(log_value) * 100:+.1f}%"


def local_canary_shift(records, baseline_runs: list) -> float | None:
    """How much slower (log) the machine was while this run's benchmarks were measured than while
    the baseline's were, by the canary timed right before each benchmark (median over the run,
    then over the baseline's runs); None where either side has none (older baselines). A canary
    at the start or end of a run can catch another speed state of a machine that steps between
    speeds than the benchmarks did; only the canaries beside the benchmarks describe the machine
    they ran on."""

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
    local = local_canary_shift(candidate_runs[-1].benchmarks.values(), baseline_runs) if candidate_runs else None
    if local is not None:
        return math.exp(local)
    cand, base = canary_centre(candidate_runs), canary_centre(baseline_runs)
    return None if cand is None or base is None else cand / base


def canary_centre(runs: list) -> float | None:
    """The median over runs of each run's median canary (ms, start and end), or None."""
    centres = [
        float(np.median([c for c in run.canary_ms if c > 0])) for run in runs if any(c > 0 for c in run.canary_ms)
    ]
    return float(np.median(centres)) if centres else None


def suite_shift(
    model: BaselineModel,
    measured: dict[str, float],
    canary_centre: float | None,
    *,
    threshold: float,
    alpha: float,
    canary_shift: float | None = None,
    pass_measured: list[dict[str, float]] | None = None,
    min_benchmarks: int = 4,
) -> SuiteShift | None:
    """The whole run's shift against the baseline; ``failed`` when it exceeds the threshold,
    significantly, beyond what the canary explains.

    What is judged is the shift a change of the code makes: shown by three quarters of the
    benchmarks (the lower quartile of their log ratios, so two regressed benchmarks of six and a
    noisy one do not make a suite-wide slowdown) in every pass (the lowest pass: a slow stretch of
    the machine covers some passes, a slower code all; ``pass_measured``, each pass's log
    centres): the median of all passes fails an unchanged suite whenever a slow stretch of the
    machine covers half of them. The canary only excuses: a canary that ran faster than the
    baseline's does not turn an unchanged suite into a slower one (its speed says how the machine
    moved, not that the code did)."""
    values = [c - model.effects[i] for i, c in measured.items() if i in model.effects]
    if len(values) < min_benchmarks:
        return None
    shift = float(np.median(values))
    by_pass = [[c - model.effects[i] for i, c in p.items() if i in model.effects] for p in pass_measured or []]
    by_pass = [p for p in by_pass if len(p) >= min_benchmarks] or [values]
    everywhere = min(float(np.percentile(p, 25)) for p in by_pass)
    canary = canary_shift  # the canaries before the benchmarks, when both sides have them
    if canary is None and canary_centre is not None and model.canary_centre is not None:
        canary = canary_centre - model.canary_centre  # else the run's start and end
    unexplained = everywhere - max(canary or 0.0, 0.0)
    # The canary is one more program taking the machine's shift its own way: it speaks for the
    # benchmarks only to within how unalike they took it in this run (their robust spread). Trusted
    # closer than that, a loaded machine's shift that the canary took less than most benchmarks
    # reads as a slowdown of the whole suite.
    canary_error = max(0.005, float(robust_sd(np.asarray(values)))) if canary is not None else 0.0
    sd = math.sqrt(
        model.shift_sd**2 + MEDIAN_VARIANCE_FACTOR * max(model.residual_sd, 1e-4) ** 2 / len(values)
        + canary_error**2
    )  # fmt: skip
    df = max(len(model.run_shifts) - 1, 1)
    p_value = float(stats.t.sf(unexplained / sd, df))
    q = float(stats.t.ppf(0.975, df))
    slower = min(everywhere, unexplained)  # the suite itself, and beyond what the machine explains
    failed = p_value < alpha and unexplained - q * sd > 0 and slower >= math.log1p(threshold)
    ci = (unexplained - q * sd, unexplained + q * sd)
    return SuiteShift(shift, canary, ci, p_value, len(values), failed, everywhere, len(by_pass), math.log1p(threshold))


def pass_measured(records) -> list[dict[str, float]]:
    """Each pass's log centres of the records measured in the most passes (the others, measured
    once, have no passes to compare), for suite_shift."""
    centres = {r.id: pass_centres(r) for r in records}
    most = max((len(c) for c in centres.values()), default=0)
    if most < 2:
        return []
    return [{i: c[p] for i, c in centres.items() if len(c) == most} for p in range(most)]


def records_suite_shift(
    model: BaselineModel,
    records,
    canary_centre_log: float | None,
    baseline_runs: list,
    *,
    threshold: float,
    alpha: float,
    min_benchmarks: int = 4,
    canary_records=None,
) -> SuiteShift | None:
    """suite_shift of a run's records: their centres, their passes and the canaries timed before
    them (the plugin at the end of a run, and `tesserabench compare` on its file).
    ``canary_records``: the records whose canaries read the machine, where more than ``records``
    (a canary reads the machine beside a benchmark left out of the shift as well, and the summary's
    "canary:" line, machine_ratio, reads them all: one figure for the machine, not two)."""
    records = list(records)
    centres = {r.id: c for r, c in ((r, log_centre(r)) for r in records) if c is not None}
    return suite_shift(
        model,
        centres,
        canary_centre_log,
        threshold=threshold,
        alpha=alpha,
        canary_shift=local_canary_shift(records if canary_records is None else list(canary_records), baseline_runs),
        pass_measured=pass_measured(records),
        min_benchmarks=min_benchmarks,
    )
