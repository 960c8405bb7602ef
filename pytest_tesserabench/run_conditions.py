"""What the run's own conditions say about its verdicts against a baseline.

The rule (gate.py, run_effect.py) judges timings; three facts about how they were taken can
overrule or qualify it: the machine slowed under a benchmark (the canary timed right before it,
overrules), a CPU other processes shared while it was timed (a note), and a baseline measured in
another number of passes (overrules). The plugin applies them as it judges each test, and
`tesserabench compare` / `report` apply them to a run read from a file, so a run is judged alike
either way.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

import numpy as np

from pytest_tesserabench import canary, neighbours, run_queue
from pytest_tesserabench.results import BenchRecord, RunDocument, Verdict


def review(
    records: list[BenchRecord],
    verdicts: dict[str, Verdict],
    *,
    start_canary_ms: list[float],
    threshold: float,
    baseline_runs: list[RunDocument] | None,
    more: list[list[BenchRecord]] = (),
) -> dict[str, Verdict]:
    """The verdicts once the run's conditions are taken into account. ``start_canary_ms``: the
    canary samples timed at the start of the run; ``baseline_runs``: None in A/B mode (its pairs
    cancel what the machine does, and its reference ran on the same CPU); ``more``: the same
    benchmarks measured in fresh processes (--bench-confirm), each with the canary before it."""
    verdicts = machine_moved(records, verdicts, start_canary_ms, threshold, more)
    if baseline_runs is None:
        return verdicts
    verdicts = cpu_shared(records, verdicts)
    return passes_differ(records, verdicts, baseline_runs)


def start_samples(canary_ms: list[float]) -> list[float]:
    """The samples timed at the start of a run, of all a run document keeps (start and end)."""
    return list(canary_ms[: canary.CANARY_SAMPLES])


def machine_drift(record: BenchRecord, start_canary_ms: list[float]) -> float | None:
    """How much slower (log) the machine was right before ``record`` than at the start of the
    run, by the canary; None without both canaries."""
    if not record.canary_ms or not start_canary_ms or statistics.median(start_canary_ms) <= 0:
        return None  # (a clock the test patched reads zero: no canary then)
    return math.log(record.canary_ms / statistics.median(start_canary_ms))


def drift_allowance(start_canary_ms: list[float], threshold: float) -> float:
    """Machine drift (log) beyond what the canary's own noise explains: half the threshold, or
    four standard errors of a few canary samples, whichever is larger."""
    start = np.log(np.asarray(start_canary_ms or [1.0]))
    noise = float(np.std(start, ddof=1)) if start.size > 1 else 0.0
    return max(math.log1p(threshold) / 2, 4 * noise / math.sqrt(canary.LOCAL_SAMPLES))


MACHINE_MOVED_HINT = "re-run on a quieter machine: the machine's speed changed during the run"


def machine_moved(
    records: list[BenchRecord],
    verdicts: dict[str, Verdict],
    start_canary_ms: list[float],
    threshold: float,
    more: list[list[BenchRecord]] = (),
) -> dict[str, Verdict]:
    """Never a REGRESSED of a benchmark the machine itself explains: when the canary right
    before it was slower than at the start by more than its noise allows, and the slowdown
    less that drift is below the threshold, the verdict is INCONCLUSIVE and says why. Measured
    in fresh processes too (``more``), the machine explains it only when it was slow before every
    one of the measurements (the least drift among them): the canary times a moment, and on the
    CI VM it steps between 1.6 and 2.2 ms from one moment to the next with nothing else running,
    so a slow moment before some of them explains nothing (gate_real run U: a +20% slowdown read
    +21.2% here and +21.6%, +21.7% in two fresh processes, held back by the median of the three
    canaries, which read slow before the two fresh ones)."""
    verdicts = dict(verdicts)
    allowance = drift_allowance(start_canary_ms, threshold)
    again = {r.id: [] for r in records}
    for run in more:
        for fresh in run:
            again.setdefault(fresh.id, []).append(fresh)
    for record in records:
        verdict = verdicts.get(record.id)
        drifts = [machine_drift(r, start_canary_ms) for r in [record, *again.get(record.id, [])]]
        drifts = [d for d in drifts if d is not None]
        drift = min(drifts) if drifts else None
        if verdict is None or drift is None or drift <= allowance or record.ab is not None:
            # (A/B pairs cancel what the machine does.) A machine that got faster cannot turn
            # an unchanged benchmark into a regression, and a CPU that was still clocking up
            # when the start canary ran reads as one on nearly every benchmark: not said.
            continue
        note = f"the machine was {math.expm1(drift) * 100:+.0f}% slower than at the start of the run (canary)"
        if verdict.status == "REGRESSED" and not verdict.reasons and verdict.ratio is not None:
            explained = verdict.ratio / math.exp(drift)
            if explained < 1 + (verdict.threshold or threshold):
                verdicts[record.id] = replace(
                    verdict,
                    status="INCONCLUSIVE",
                    severity=None,
                    notes=(*verdict.notes, note + ": not a regression of its own"),
                    hint_text=MACHINE_MOVED_HINT,
                )
                continue
        verdicts[record.id] = replace(verdict, notes=(*verdict.notes, note))
    return verdicts


def cpu_shared(records: list[BenchRecord], verdicts: dict[str, Verdict]) -> dict[str, Verdict]:
    """History mode: a note on a REGRESSED benchmark timed on a CPU other processes shared,
    whether they took its CPU (the run-queue wait, left out of the samples) or ran beside it
    (``neighbours``), with the way to confirm it. The verdict stands: a run is centred on its
    lowest pass, the one the load touched least, and on the CI VM that kept unchanged benchmarks
    unchanged under every load tried (3 false alarms in 648 comparisons, 1 to 4 busy processes
    computing or streaming memory, against quiet baselines; docs/gate.md). Under the mean of the
    passes this rule held such regressions back, which cost history mode every detection there.
    A/B measures both sides under the same load."""
    verdicts = dict(verdicts)
    for record in records:
        verdict = verdicts.get(record.id)
        if verdict is None or verdict.status != "REGRESSED" or verdict.reasons:
            continue
        how = sharing(record)
        if how is not None:
            note = f"timed on a CPU other processes shared ({how}): confirm it in one job with --bench-ab=REF"
            verdicts[record.id] = replace(verdict, notes=(*verdict.notes, note))
    return verdicts


def sharing(record: BenchRecord) -> str | None:
    """How other processes shared the CPU while ``record`` was timed, in words; None when they
    did not notably (the thresholds are run_queue.SHARED and neighbours.SHARED_CPUS)."""
    waited, timed = record.cpu_wait()
    if timed > 0 and waited / timed >= run_queue.SHARED:  # as the summary's "the CPU was shared" line
        return f"the timing thread waited {waited / timed:.0%} of the time for it"
    others = record.others_cpus()
    if others >= neighbours.SHARED_CPUS:
        return f"other processes kept {others:.1f} CPUs busy beside it"
    return None


def passes_differ(
    records: list[BenchRecord], verdicts: dict[str, Verdict], baseline_runs: list[RunDocument]
) -> dict[str, Verdict]:
    """No timing verdict where this run measured in another number of passes than the
    baseline's runs (say the baseline saved without -n, compared under -n): a run in passes is
    centred on its lowest pass, one pass on the median of all its rounds, so the two sides are
    centred differently (a new user's trial: three unchanged benchmarks +34% to +44% under -n 2
    against a four-pass baseline), and measuring inside an xdist worker is itself another
    condition. A verdict of the kernel figures (reasons) stands."""
    verdicts = dict(verdicts)
    for record in records:
        verdict = verdicts.get(record.id)
        if verdict is None or record.sampling is None or verdict.reasons:
            continue
        theirs = sorted(
            {
                run.benchmarks[record.id].sampling.passes
                for run in baseline_runs
                if record.id in run.benchmarks and run.benchmarks[record.id].sampling is not None
            }
        )
        if not theirs or theirs == [record.sampling.passes]:
            continue
        note = (
            f"measured in {record.sampling.passes} pass(es), the baseline's runs in "
            f"{' or '.join(map(str, theirs))}: the two are centred differently"
        )
        timed = verdict.status in ("REGRESSED", "IMPROVED", "UNCHANGED", "INCONCLUSIVE")
        verdicts[record.id] = replace(
            verdict,
            status="INCONCLUSIVE" if timed else verdict.status,
            severity=None if timed else verdict.severity,
            notes=(*verdict.notes, note),
            hint_text=SAME_PASSES if timed else verdict.hint_text,  # the cause, whatever else the rule saw
        )
    return verdicts


SAME_PASSES = (
    "record the baseline and compare with the same --bench-passes (a run under -n makes one pass: "
    "save the baseline under -n too, or compare without it)"
)
