"""The decision rule of history mode, vectorised over benchmarks (the simulations call exactly this).

For one benchmark, in log time, with the baseline's processes j = 1..n (every process of every
save, each less its run's shared shift) and the candidate's processes k = 1..c (this run's
process, and the fresh ones that measured it again, each less this run's shift):

* ``D = median_k C_k - median_j B_j``: the change (the ratio is exp(D));
* within-run noise ``w``: round-to-round variance (a normal-consistent MAD), pooled over every
  process; a centre of r rounds carries ``f(r) w / r`` of it (f: a median's variance factor);
* between-run noise ``s^2``: the spread of the baseline's centres less their within-run part,
  *moderated* (empirical Bayes, as limma's moderated t): pooled with a prior worth ``prior_runs``
  runs whose value is the median drift of the suite's other benchmarks, never below
  ``between_run_floor`` squared;
* ``Var(D) = f(c)/c (s^2 + within of a candidate centre) + f(n)/n (s^2 + within of a baseline
  centre) + later_run_drift x the suite's typical drift + the shift's variance``, Student's t on
  ``prior_runs + n - 1`` degrees of freedom. (A later run drifts on its own in ways back-to-back
  saves cannot show: the candidate is given the suite's typical drift once more.)

Verdicts, at ``alpha / m`` and the user's threshold theta (never raised for a noisy benchmark):

* REGRESSED: one-sided p (slower) < alpha / m and the interval reaches ``1 + theta``;
* IMPROVED mirrors it;
* UNCHANGED: the interval rules out a slowdown of theta;
* INCONCLUSIVE otherwise: not significant, yet theta is not ruled out; and a change the
  candidate's processes disagree on by more than its own size (their typical distance from their
  median more than half the change; for two, their gap more than the change; or, for a slowdown,
  one of them read less than half of it): one process's state is not a slowdown of the
  code (stage ``processes``). A code change moves every process; a state that two of three
  processes share, and the baseline's never drew, moves only them. One odd process of three that
  reads the change larger moves neither.
  Fresh processes that measured a benchmark again, one after another, share that moment (a
  neighbour busy then moves them all, and the run's shift, estimated at this process's passes,
  does not know it): they count as one reading against this process's, and as interference only
  slows, fresh processes that read it slower than this process by more than the change the two
  readings make together confirm nothing either.

The run's shared shift is a correction, not a measurement: its variance (model.Shift) is part of
Var(D), and a verdict the removed shift outweighs, whose variance is more how unalike the
benchmarks took the shift than its own measurement, with that at least a quarter of the threshold
(``unalike_share_of_threshold``), is decided neither way (INCONCLUSIVE, stage ``shift``: it would
rest on an assumption about this benchmark's share of the shift).

``detectable`` is the smallest slowdown the verdict's variance lets the rule catch with
probability ``power``: ``exp((t(1 - alpha/m) + t(power)) sd) - 1``.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
from scipy import stats

from pytest_tesserabench.gate.centres import median_factor
from pytest_tesserabench.gate.config import GateConfig
from pytest_tesserabench.gate.kernels import SEVERITY_RANK

# What set a verdict's status (Verdict.stage).
RULE, SHIFT, PROCESSES = "rule", "shift", "processes"


@dataclass(frozen=True)
class NoiseComponents:
    """Per benchmark (arrays of shape (N,)): what the decision needs from the runs."""

    diff: np.ndarray  # D = C - B (log)
    base_centre: np.ndarray  # B (log)
    cand_centre: np.ndarray  # C (log)
    between_est: np.ndarray  # raw between-run variance estimate (>= 0)
    between_df: np.ndarray  # its degrees of freedom
    within_base: np.ndarray  # within-run variance carried by one baseline centre
    within_cand: np.ndarray  # ... by one candidate centre
    n_base: np.ndarray  # baseline centres (processes)
    n_cand: np.ndarray  # candidate centres (processes)
    cand_spread: np.ndarray  # how far the candidate's processes sit from their median (log MAD; 0 for one)
    here_diff: np.ndarray  # the first candidate centre's change (this process's; D where there is one)
    later_diff: np.ndarray  # the median change of the others where they share a later moment (nan: none)
    low_diff: np.ndarray  # the change the candidate process that read it fastest read
    high_diff: np.ndarray  # ... and the one that read it slowest


def noise_components(
    base_centres: np.ndarray,
    base_within: np.ndarray,
    base_rounds: np.ndarray,
    cand_centres: np.ndarray,
    cand_within: np.ndarray,
    cand_rounds: np.ndarray,
    *,
    candidate_spread: bool = True,
    later_together: bool = False,
) -> NoiseComponents:
    """From per-centre summaries of shape (N, n) (baseline) and (N, c) (candidate).
    ``candidate_spread``: the candidate's centres are runs of their own, whose spread joins the
    between-run estimate (the tuner's alternating runs); False where they are processes of one
    run (history mode): their spread says how processes differ within a run, not how runs do.
    ``later_together``: the candidate centres after the first were measured later, one after the
    other (history mode's fresh processes, after this process's passes): a moment they share."""
    bc, bw, bn = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (base_centres, base_within, base_rounds))
    cc, cw, cn = (np.atleast_2d(np.asarray(a, dtype=float)) for a in (cand_centres, cand_within, cand_rounds))
    h_b, h_c = bc.shape[-1], cc.shape[-1]

    weights = np.concatenate([bn - 1, cn - 1], axis=-1).clip(min=0)
    within_vars = np.concatenate([bw, cw], axis=-1)
    total_weight = weights.sum(axis=-1)
    within = np.where(total_weight > 0, (weights * within_vars).sum(axis=-1) / np.maximum(total_weight, 1), 0.0)

    mean_rounds_b, mean_rounds_c = bn.mean(axis=-1), cn.mean(axis=-1)
    within_base = median_factor(mean_rounds_b) * within / mean_rounds_b
    within_cand = median_factor(mean_rounds_c) * within / mean_rounds_c

    base_centre = np.median(bc, axis=-1)
    cand_centre = np.median(cc, axis=-1)
    squares = ((bc - bc.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
    spread_df = max(h_b - 1, 0)
    if candidate_spread:
        squares = squares + ((cc - cc.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
        spread_df += max(h_c - 1, 0)
    df = np.full(base_centre.shape, float(spread_df))
    raw = np.where(df > 0, squares / np.maximum(df, 1), 0.0)
    # The spread of run centres also holds their within-run part; keep only the drift.
    between = np.clip(raw - within_base, 0.0, None)
    return NoiseComponents(
        diff=cand_centre - base_centre,
        base_centre=base_centre,
        cand_centre=cand_centre,
        between_est=between,
        between_df=df,
        within_base=within_base,
        within_cand=within_cand,
        n_base=np.full(base_centre.shape, float(h_b)),
        n_cand=np.full(base_centre.shape, float(h_c)),
        cand_spread=np.median(np.abs(cc - cand_centre[..., None]), axis=-1),
        here_diff=cc[..., 0] - base_centre,
        later_diff=(
            np.median(cc[..., 1:], axis=-1) - base_centre
            if later_together and h_c > 1
            else np.full(base_centre.shape, np.nan)
        ),
        low_diff=cc.min(axis=-1) - base_centre,
        high_diff=cc.max(axis=-1) - base_centre,
    )


def concat_components(parts: Iterable[NoiseComponents]) -> NoiseComponents:
    parts = list(parts)
    return NoiseComponents(
        **{name: np.concatenate([getattr(p, name) for p in parts]) for name in NoiseComponents.__dataclass_fields__}
    )


def suite_prior(between_est: np.ndarray, between_df: np.ndarray, floor: float) -> np.ndarray:
    """Per benchmark: the median between-run variance of the *other* benchmarks with an
    estimate, never below floor**2 (a benchmark never serves as its own prior)."""
    est = np.asarray(between_est, dtype=float)
    has = np.asarray(between_df) > 0
    m = est.shape[-1]
    prior = np.full(est.shape, floor**2)
    if m < 2:
        return prior
    others = ~np.eye(m, dtype=bool)  # (m, m): row j = all but j
    values = np.where(others & has[..., None, :], est[..., None, :], np.nan)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows with no estimate
        med = np.nanmedian(values, axis=-1)
    return np.where(np.isnan(med), prior, np.maximum(prior, med))


@dataclass(frozen=True)
class Decision:
    """Per benchmark arrays of the rule's intermediate and final quantities."""

    diff: np.ndarray
    sd: np.ndarray
    df: np.ndarray
    p_slower: np.ndarray
    p_faster: np.ndarray
    ci_low: np.ndarray  # log
    ci_high: np.ndarray  # log
    theta: np.ndarray  # log(1 + threshold)
    noise: np.ndarray  # sd of one run's centre (log ~ relative)
    detectable: np.ndarray  # relative: the smallest slowdown caught with probability ``power``
    status: np.ndarray  # str: REGRESSED / INCONCLUSIVE / IMPROVED / UNCHANGED
    stage: np.ndarray  # str: what set the status (RULE, SHIFT, PROCESSES)
    mostly_shift: np.ndarray  # bool: the shift's variance is more than the benchmark's own


def decide(
    nc: NoiseComponents,
    prior_var: np.ndarray,
    config: GateConfig,
    m: int,
    *,
    thresholds: np.ndarray | float | None = None,
    shift_var: np.ndarray | float = 0.0,
    shift_df: np.ndarray | float = np.inf,
    unalike_var: np.ndarray | float = 0.0,
    shift: np.ndarray | float = 0.0,
    process_share: float = 1.0,
    base_runs: np.ndarray | None = None,
) -> Decision:
    """The rule (the module's docstring). ``shift_var``: the variance of the run's shared shift
    removed from each benchmark (0 where none was), on ``shift_df`` degrees of freedom (the
    degrees of freedom of Var(D) then follow Welch and Satterthwaite); ``unalike_var``: the part
    of it that is how unalike the benchmarks took the shift (model.Shift.unalike squared);
    ``shift``: the shift removed (log). ``process_share``: the share of the between-run noise
    that differs from process to process within a run (the rest the processes of one run share:
    more of them average only this share out); ``base_runs``: the runs (saves) the baseline's
    centres come from (by default, one per centre)."""
    nu0 = float(config.prior_runs)
    df = nu0 + nc.between_df
    floor2 = config.between_run_floor**2
    between = np.maximum(floor2, (nu0 * prior_var + nc.between_df * nc.between_est) / np.maximum(df, 1e-12))
    df = np.maximum(df, 1.0)  # no history information at all: Cauchy tails, very cautious
    shift_var = np.broadcast_to(np.asarray(shift_var, dtype=float), nc.diff.shape)
    runs = nc.n_base if base_runs is None else np.asarray(base_runs, dtype=float)
    rho = float(np.clip(process_share, 0.0, 1.0))
    each_c, each_b, each_run = (median_factor(n) / n for n in (nc.n_cand, nc.n_base, runs))
    var = (
        each_c * nc.within_cand
        + ((1 - rho) + rho * each_c) * between
        + config.later_run_drift * prior_var  # the candidate's own later drift (GateConfig)
        + each_b * nc.within_base
        + ((1 - rho) * each_run + rho * each_b) * between
        + shift_var
    )
    sd = np.sqrt(var)
    own = var - shift_var
    shift_df = np.broadcast_to(np.asarray(shift_df, dtype=float), nc.diff.shape)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = np.where(shift_var > 0, var**2 / (own**2 / df + shift_var**2 / np.maximum(shift_df, 1.0)), df)
    df = np.maximum(df, 1.0)
    diff = nc.diff
    t = diff / sd
    p_slower = stats.t.sf(t, df)
    p_faster = stats.t.cdf(t, df)
    q = stats.t.ppf(0.5 + config.confidence / 2, df)
    ci_low, ci_high = diff - q * sd, diff + q * sd
    level = config.alpha / max(int(m), 1)
    detectable = np.expm1((stats.t.ppf(1 - level, df) + stats.t.ppf(config.power, df)) * sd)
    theta = np.log1p(config.threshold if thresholds is None else np.asarray(thresholds, dtype=float))
    regressed = (p_slower < level) & (ci_high >= theta)
    improved = (p_faster < level) & (ci_low <= -theta)
    status = np.where(
        regressed, "REGRESSED", np.where(improved, "IMPROVED", np.where(ci_high >= theta, "INCONCLUSIVE", "UNCHANGED"))
    )
    # Processes that disagree by more than the change confirm nothing (a process's state): the
    # typical one further from their median than half the change (two: further apart than it),
    # or, for a slowdown, any one that read less than half of it: nearer no change than the change
    # (the change as the least touched reading has it, the median or this process's: fresh
    # processes caught in a busy moment together read it larger). A code change moves every
    # process; process states are a mixture, not a normal spread, and a state the baseline's few
    # processes never drew can hold two of three candidate processes while the third runs the
    # code at the baseline's speed, give or take its own noise (so "no slower at all" would see
    # that third process only half the time).
    # Fresh processes measured one after another share the moment they were measured at, which
    # the run's shift (estimated at this process's passes) does not know: a neighbour busy then
    # slows them all. So they are one reading of that moment, and this process another; and as
    # interference only slows, a later moment that read it slower than this process did, by more
    # than the change the two read together, confirms nothing. (Read faster, this process is the
    # odd one, and the rest of the rule stands: one odd process of three moves nothing.)
    here, later = nc.here_diff, nc.later_diff
    with np.errstate(invalid="ignore"):
        moments_apart = np.isfinite(later) & (later - here > np.abs(here + later) / 2)
    least = np.minimum(diff, nc.here_diff)  # (the change as the moment least touched read it)
    most = np.maximum(diff, nc.here_diff)
    # Either way: a slowdown this process read is measured again, and fresh processes in a
    # faster state of their own can turn the median process into a speed-up; a process that
    # moved the other way confirms neither.
    one_unmoved = ((diff > 0) & (nc.low_diff <= least / 2)) | ((diff < 0) & (nc.high_diff >= most / 2))
    disagree = (2 * nc.cand_spread > np.abs(diff)) | one_unmoved | moments_apart
    by_processes = ((status == "REGRESSED") | (status == "IMPROVED")) & disagree
    # A correction is only as good as its error: a verdict that the removed shift outweighs, and
    # whose variance is more how unalike the benchmarks took it than its own measurement, rests on
    # an assumption about this benchmark's share of the shift, not on a measurement: decided
    # neither way.
    unalike_var = np.broadcast_to(np.asarray(unalike_var, dtype=float), nc.diff.shape)
    material = unalike_var >= (config.unalike_share_of_threshold * theta) ** 2
    dominated = (unalike_var > own) & material & (np.abs(np.asarray(shift, dtype=float)) > np.abs(diff))
    by_shift = ~by_processes & (status != "INCONCLUSIVE") & dominated
    stage = np.where(by_processes, PROCESSES, np.where(by_shift, SHIFT, RULE))
    status = np.where(by_processes | by_shift, "INCONCLUSIVE", status)
    return Decision(
        diff=diff,
        sd=sd,
        df=df,
        p_slower=p_slower,
        p_faster=p_faster,
        ci_low=ci_low,
        ci_high=ci_high,
        theta=theta,
        noise=np.sqrt(between + nc.within_base),
        detectable=detectable,
        status=status,
        stage=stage,
        mostly_shift=shift_var > own,
    )


def worse(a: str | None, b: str | None) -> str | None:
    return a if SEVERITY_RANK[a] >= SEVERITY_RANK[b] else b


def pct(ratio: float) -> str:
    return f"{(ratio - 1) * 100:+.1f}%"
