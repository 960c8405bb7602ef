"""The paired rule of A/B mode (``--bench-ab``): log ratios of neighbouring candidate and
reference blocks.

Drift shared by the two sides cancels within a pair, so no between-run model is needed. What a
pair cannot cancel is the process: two processes running identical code differ by a steady bias
(memory layout, allocator state: a percent or two for most code, up to ten for some),
so with several processes per side the unit of analysis is the process pair (process_decision);
with one per side, the pair (paired_decision). The stopping rule looks at the data repeatedly; to
keep the false-alarm rate the rule promises, only the looks in GateConfig.paired_looks
(process_looks: pairs per process pair) count, and alpha is split over them (Bonferroni across
interim looks: conservative, simple, and exact in its guarantee).

Stopping early as UNCHANGED is a promise of another kind: that a slowdown of the threshold was
ruled out, at the confidence of the interval printed (95%: a slowdown of exactly the threshold
reads UNCHANGED at most 2.5% of the time at the last look). The interim looks share that budget
(Bonferroni again: each at 2.5% / looks), so all of them together and the last add up to at most
5%. Held to the false-alarm level instead (alpha / m / looks), an unchanged benchmark could
almost never stop early: every one would spend its whole budget and more.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from pytest_tesserabench.gate.config import GateConfig
from pytest_tesserabench.gate.kernels import severity_of
from pytest_tesserabench.record.results import Verdict
from pytest_tesserabench.record.stats import median_ci

PAIRED_LOOKS = GateConfig().paired_looks
PROCESS_LOOKS = GateConfig().process_looks


@dataclass(frozen=True)
class PairedDecision:
    status: str  # REGRESSED / IMPROVED / UNCHANGED, or INCONCLUSIVE when not decided
    decided: bool  # the rule reached a decision (no more pairs would change it)
    ratio: float
    ci: tuple[float, float]
    p_value: float
    threshold: float
    pairs: int
    alpha_per_look: float
    processes: int = 1  # process pairs the pairs came from


def paired_decision(log_ratios, *, threshold: float, alpha: float, final: bool, confidence: float = 0.95):
    """The three-valued rule on paired log ratios (candidate / reference), at ``alpha`` for this
    benchmark (alpha / m). None between looks (not a look at which the rule may decide);
    ``final``: the budget is spent, so an undecided result is INCONCLUSIVE (if the estimate
    reaches the threshold) or UNCHANGED.

    The estimate is the median of the pairs, its interval the distribution-free order-statistic
    one, its p-value the sign test's: a pair that straddles a change of the machine's speed (on a
    virtual machine a vCPU's speed steps by tens of percent when the host's sibling core gets busy)
    is an outlier that a mean and a t test would let dominate, and such steps are common enough on
    shared runners to break a 20%-trimmed mean too. The sign test needs no assumption about how the
    pairs scatter; it costs some power, which more pairs buy back.
    """
    d = np.asarray(log_ratios, dtype=float)
    n = d.size
    if n < PAIRED_LOOKS[0] or (n not in PAIRED_LOOKS and not final):
        return None
    level = alpha / len(PAIRED_LOOKS)
    early = early_confidence(confidence, len(PAIRED_LOOKS))
    centre = float(np.median(d))
    theta = math.log1p(threshold)
    above, below = int(np.count_nonzero(d > 0)), int(np.count_nonzero(d < 0))
    p_slower = float(stats.binom.sf(above - 1, above + below, 0.5)) if above + below else 1.0
    p_faster = float(stats.binom.sf(below - 1, above + below, 0.5)) if above + below else 1.0
    low, high = median_interval(d, confidence)
    strict = median_interval(d, early)
    status, decided = _three_valued(centre, (low, high), strict, (p_slower, p_faster), level, theta, final)
    ratio, ci = math.exp(centre), (math.exp(low), math.exp(high))
    return PairedDecision(status, decided, ratio, ci, p_slower, threshold, n, level)


def _three_valued(centre, interval, strict, p_values, level, theta, final) -> tuple[str, bool]:
    """(status, decided): a slowdown or speed-up significant at ``level`` whose 95% ``interval``
    reaches the threshold ``theta`` (log); UNCHANGED when the ``strict`` interval (early_confidence)
    lies within it; else undecided. When ``final`` (the budget is spent), an undecided benchmark is
    UNCHANGED only if its 95% interval rules out a slowdown past the threshold, as in history mode:
    an interval of [0.15x, 4x] is not "unchanged", it is "could not tell" (INCONCLUSIVE)."""
    (low, high), (strict_low, strict_high), (p_slower, p_faster) = interval, strict, p_values
    if p_slower < level and high >= theta:
        return "REGRESSED", True
    if p_faster < level and low <= -theta:
        return "IMPROVED", True
    if strict_high < theta and strict_low > -theta:
        return "UNCHANGED", True  # confidently smaller than the threshold either way
    if final:
        return ("INCONCLUSIVE" if high >= theta else "UNCHANGED"), False
    return "INCONCLUSIVE", False


def process_decision(log_ratios, processes, *, threshold: float, alpha: float, final: bool, confidence=0.95):
    """The three-valued rule when the pairs come from several process pairs (``processes[i]``: the
    process pair of pair i). Each process pair's pairs are summarised by their median (robust to
    a pair that straddles a step of the machine's speed); those medians carry the process bias
    as well as the noise of the pairs, so the estimate is their mean and its interval Student's t
    with (process pairs - 1) degrees of freedom: the classic analysis of cluster summaries. More
    pairs narrow each median; only more processes average out the process bias, and the interval
    says so honestly. Looks when every process pair has the same number of pairs, at PROCESS_LOOKS.
    """
    groups: dict[int, list[float]] = {}
    for d, process in zip(log_ratios, processes, strict=True):
        groups.setdefault(process, []).append(d)
    counts = {len(v) for v in groups.values()}
    per_process = min(counts) if counts else 0
    if len(groups) < 2 or per_process < PROCESS_LOOKS[0]:
        return None
    if not final and (len(counts) != 1 or per_process not in PROCESS_LOOKS):
        return None
    medians = np.array([np.median(v) for v in groups.values()])
    k = medians.size
    level = alpha / len(PROCESS_LOOKS)
    centre = float(medians.mean())
    se = max(float(medians.std(ddof=1)) / math.sqrt(k), 1e-12)
    t = stats.t(df=k - 1)
    p_slower, p_faster = float(t.sf(centre / se)), float(t.cdf(centre / se))
    early = early_confidence(confidence, len(PROCESS_LOOKS))
    half, strict_half = (float(t.ppf(0.5 + c / 2)) * se for c in (confidence, early))
    interval, strict = (centre - half, centre + half), (centre - strict_half, centre + strict_half)
    theta = math.log1p(threshold)
    status, decided = _three_valued(centre, interval, strict, (p_slower, p_faster), level, theta, final)
    ci = (math.exp(interval[0]), math.exp(interval[1]))
    return PairedDecision(status, decided, math.exp(centre), ci, p_slower, threshold, len(log_ratios), level, k)


def early_confidence(confidence: float, looks: int) -> float:
    """The confidence of the interval that stops a benchmark early as UNCHANGED: the printed
    interval's error split over the looks (the module's docstring)."""
    return 1 - (1 - confidence) / looks


def median_interval(values, confidence: float) -> tuple[float, float]:
    """The order-statistic interval of the median at ``confidence`` (as stats.median_ci), the
    full range when there are too few values for it."""
    return median_ci(values, confidence)


def paired_verdict(bench_id: str, decision: PairedDecision, *, candidate_ms: float, reference_ms: float,
                   alpha_per_test: float, notes: tuple[str, ...] = ()) -> Verdict:  # fmt: skip
    """The gate's verdict for an A/B benchmark (its one line reads as any other)."""
    hint = None
    if decision.status == "INCONCLUSIVE":
        if decision.processes > 1:
            hint = (
                f"{decision.pairs} A/B pairs from {decision.processes} process pairs were not enough on this "
                "machine; more processes (--bench-ab-processes: they average out each process's bias) or more "
                "time (--bench-max-time, --bench-settle-time) would settle it"
            )
        else:
            hint = (
                f"{decision.pairs} A/B pairs were not enough on this machine; a quieter machine, or more time "
                "(--bench-max-time, --bench-settle-time), would settle it"
            )
    return Verdict(
        id=bench_id,
        status=decision.status,
        stage="paired",
        baseline_ms=reference_ms,
        candidate_ms=candidate_ms,
        ratio=decision.ratio,
        ci=decision.ci,
        p_value=decision.p_value,
        severity=severity_of(decision.ratio) if decision.status == "REGRESSED" else None,
        notes=notes,
        threshold=decision.threshold,
        history=decision.pairs,
        alpha_per_test=alpha_per_test,
        hint_text=hint,
    )
