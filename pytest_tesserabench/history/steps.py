"""Steps in a benchmark's history: where its saved runs moved to another level, and by how much.

A comparison of one run with a baseline misses a creep of small steps, each under the threshold.
The saved runs of a baseline are a time series per benchmark; a step is a change point in the log
of their medians.

- **Segmentation**: PELT (``ruptures``, an optional extra: ``pip install pytest-tesserabench[history]``)
  with a squared-error cost on log medians and a BIC-like penalty ``PENALTY_BIC * sigma^2 * log(n)``.
  PELT finds the exact optimum of that penalised cost; it is ruptures' reference method, with
  binary wheels. (E-divisive, as MongoDB and Otava run it, needs a compiled package and a
  permutation test per step, a lot for the 10-20 runs a baseline keeps.)
- **Noise**: each run's variance is its own interval's (half-width in log units / 1.96) plus the
  drift between runs: what successive differences show (their median absolute value x 1.4826 /
  sqrt 2; a step moves one difference only, so it barely moves this) beyond a typical run's own.
  A run measured noisily weighs less.
- **Each step is tested**: the level of the segment after it against the one before (each the
  mean log median weighted by the inverse of each run's variance), a z test Bonferroni-corrected
  for the n - 1 places a step could be. The weakest step whose p is not below ``alpha`` is merged
  away and the rest tested again on the merged segments, until every step left passes; its
  confidence is 1 - p, its size the ratio of the two segments' medians. A level needs
  ``MIN_RUNS`` runs on its side of the midpoint between the levels, so one run far off never
  makes a step (the latest run alone looks the same as an outlier until the next run).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

PENALTY_BIC = 2.0
MIN_RUNS = 2  # runs a level needs before a step to it is reported
MAD_TO_SD = 1.4826
Z95 = 1.959964


class MissingLibrary(RuntimeError):
    """ruptures is not installed; the message says how to install it."""


@dataclass(frozen=True)
class Step:
    index: int  # the first run after the step (0-based, in saved order)
    before_ms: float  # the median of the runs of the segment before it
    after_ms: float  # ... and after it
    p_value: float

    @property
    def ratio(self) -> float:
        return self.after_ms / self.before_ms

    @property
    def confidence(self) -> float:
        return 1.0 - self.p_value


def ruptures_library():
    """ruptures, or MissingLibrary saying how to install it."""
    try:
        import ruptures  # the optional `history` extra (~0.8 s)
    except ImportError:
        raise MissingLibrary(
            "finding steps needs ruptures: pip install 'pytest-tesserabench[history]' (or pip install ruptures)"
        ) from None
    return ruptures


def _drift(log_medians: Sequence[float]) -> float:
    """The between-run sd of a log median, from successive differences (robust to a step)."""
    diffs = [b - a for a, b in zip(log_medians, log_medians[1:])]
    return MAD_TO_SD * statistics.median(abs(d) for d in diffs) / math.sqrt(2) if diffs else 0.0


def variances(log_medians: Sequence[float], half_widths: Sequence[float | None] = ()) -> list[float]:
    """Each run's variance around its level: the between-run drift plus its own interval's
    (a run without one gets the median of the others')."""
    own = [w / Z95 if w is not None and w > 0 else None for w in half_widths] or [None] * len(log_medians)
    own += [None] * (len(log_medians) - len(own))
    known = [o for o in own if o is not None]
    fill = statistics.median(known) if known else 0.0
    # successive differences hold a typical run's own noise too: the drift between runs is the rest
    between = max(_drift(log_medians) ** 2 - fill**2, 0.0)
    return [max(between + (o if o is not None else fill) ** 2, 1e-12) for o in own]


def find_steps(
    medians_ms: Sequence[float], half_widths: Sequence[float | None] = (), *, alpha: float = 0.01
) -> list[Step]:
    """The steps in a series of run medians (oldest first); ``half_widths`` the runs' own 95%
    interval half-widths in log units (None where unknown). A level needs two runs: a step at the
    latest run alone is not told from an outlier until the next run."""
    n = len(medians_ms)
    if n < 2 * MIN_RUNS or any(not (m > 0 and math.isfinite(m)) for m in medians_ms):
        return []
    # numpy and scipy (~0.8 s): `tesserabench history` of a short history, and a --bench run's
    # terminal report that imports this module, need neither
    import numpy as np
    from scipy import stats

    logs = [math.log(m) for m in medians_ms]
    var = variances(logs, half_widths)
    signal = np.asarray(logs, dtype=float).reshape(-1, 1)
    algo = ruptures_library().Pelt(model="l2", min_size=MIN_RUNS, jump=1).fit(signal)
    bounds = [0, *algo.predict(pen=PENALTY_BIC * statistics.median(var) * math.log(n))]  # the last is n

    def tested(k: int) -> tuple[float, float]:
        """(p, diff) of the step at bounds[k] between its two neighbouring segments."""
        left, right = range(bounds[k - 1], bounds[k]), range(bounds[k], bounds[k + 1])
        (mean_left, var_left), (mean_right, var_right) = _level(logs, var, left), _level(logs, var, right)
        diff = mean_right - mean_left
        spread = math.sqrt(var_left + var_right)
        # the step was chosen among the n - 1 places it could have been: Bonferroni over them
        p = min(1.0, float(2 * stats.norm.sf(abs(diff) / spread)) * (n - 1))
        return (p if _levels_hold(logs, left, right, (mean_left + mean_right) / 2, diff) else 1.0), diff

    # Backward elimination: the weakest step that fails is merged into its neighbours, and the
    # others are tested again on the merged segments (a noisy run that PELT set apart rejoins).
    while len(bounds) > 2:
        results = {k: tested(k) for k in range(1, len(bounds) - 1)}
        weakest = max(results, key=lambda k: results[k][0])
        if results[weakest][0] < alpha:
            break
        del bounds[weakest]
    steps = []
    for k in range(1, len(bounds) - 1):
        p, _ = tested(k)
        before = statistics.median(medians_ms[bounds[k - 1] : bounds[k]])
        after = statistics.median(medians_ms[bounds[k] : bounds[k + 1]])
        steps.append(Step(index=bounds[k], before_ms=before, after_ms=after, p_value=p))
    return steps


def _level(logs: Sequence[float], var: Sequence[float], runs: range) -> tuple[float, float]:
    """A segment's level and its variance: each run weighted by the inverse of its own variance."""
    weights = [1.0 / var[i] for i in runs]
    total = sum(weights)
    return sum(w * logs[i] for w, i in zip(weights, runs)) / total, 1.0 / total


def _levels_hold(logs: Sequence[float], left: range, right: range, middle: float, diff: float) -> bool:
    """At least MIN_RUNS runs on each side of the step sit on their side of the midpoint between
    the two levels: one run far off (an outlier) does not make a level, however far it is."""
    up = diff > 0
    after = sum(1 for i in right if (logs[i] > middle) == up)
    before = sum(1 for i in left if (logs[i] < middle) == up)
    return after >= MIN_RUNS and before >= MIN_RUNS


def creep(
    medians_ms: Sequence[float],
    steps: Sequence[Step],
    threshold: float,
    *,
    half_widths: Sequence[float | None] = (),
    alpha: float = 0.01,
    ends: int = 3,
) -> float | None:
    """The slowdown from the earliest runs to the latest (the levels of ``ends`` runs each, as
    find_steps weighs them) when it exceeds ``threshold``, is significant at ``alpha``, holds for
    MIN_RUNS runs at each end, and no single step is that large: a creep of steps each too small
    to fail. None otherwise."""
    if len(medians_ms) < 2 * ends or any(step.ratio - 1.0 > threshold for step in steps):
        return None
    from scipy import stats  # as in find_steps

    logs = [math.log(m) for m in medians_ms]
    var = variances(logs, half_widths)
    (early, var_early), (late, var_late) = (
        _level(logs, var, range(ends)),
        _level(logs, var, range(len(logs) - ends, len(logs))),
    )
    change = math.expm1(late - early)
    p = float(2 * stats.norm.sf(abs(late - early) / math.sqrt(var_early + var_late)))
    # as for a step: one run far off (a busy moment, measured tightly) does not make a level
    held = _levels_hold(logs, range(ends), range(len(logs) - ends, len(logs)), (early + late) / 2, late - early)
    return change if change > threshold and p < alpha and held else None
