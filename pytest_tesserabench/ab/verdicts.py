"""Verdicts of an A/B comparison, per record: the paired decision made while measuring, with the
kernel figures of both sides compared as the gate does (same machine, same Triton: gated)."""

from __future__ import annotations

import math
import statistics
from dataclasses import replace

from pytest_tesserabench.gate.kernels import SEVERITY_RANK, compare_kernels
from pytest_tesserabench.gate.paired import PairedDecision, paired_verdict
from pytest_tesserabench.gate.pipeline import untimed_verdict
from pytest_tesserabench.record.results import BenchRecord, Verdict


def ab_verdicts(
    records: list[BenchRecord], threshold: float, *, machine: dict, work_threshold: float | None = None
) -> dict[str, Verdict]:
    verdicts = {}
    for record in records:
        ab = record.ab
        if ab is None:
            continue
        reference = ab.reference or {}
        kernels = compare_kernels(record.kernels, reference.get("kernels"), work_threshold=work_threshold)
        decision = ab.decision
        where = f"{ab.ref} ({str(ab.sha)[:10]})"
        interpreted = "interpreter" in (record.timer, reference.get("timer"))
        if (
            interpreted
            and ab.reference is not None
            and (decision is not None or reference.get("timer") == record.timer)
        ):
            # CPU time of Python emulating a GPU says nothing about the kernel (lead.py times it
            # here alone): the kernel figures of both sides only (timers that differ: NEW below)
            verdict = untimed_verdict(record.id, kernels, "timed in the Triton interpreter")
            if ab.reference_outcome not in (None, "passed"):
                why = f": {ab.reference_error}" if ab.reference_error else ""
                verdict = replace(verdict, notes=(*verdict.notes, f"the test {ab.reference_outcome} at {where}{why}"))
            verdicts[record.id] = verdict
            continue
        if decision is None:
            notes = (f"not compared with {where}: {ab.unpaired or 'not measured there'}", *kernels.notes)
            verdicts[record.id] = Verdict(id=record.id, status="NEW", notes=notes)
            continue
        reference_rounds = ab.reference_rounds_ms
        notes = list(kernels.notes)
        if ab.settle_s:
            more = f"{ab.settle_s:.1f} s of extra A/B pairs"
            notes.append(f"measured {more}" + (", and still undecided" if decision.status == "INCONCLUSIVE" else ""))
        if ab.reference_outcome not in (None, "passed"):
            why = f": {ab.reference_error}" if ab.reference_error else ""
            notes.append(f"the test {ab.reference_outcome} at {where}{why}")
        paired = PairedDecision(
            status=decision.status,
            decided=decision.decided,
            ratio=decision.ratio,
            ci=decision.ci,
            p_value=decision.p_value,
            threshold=decision.threshold,
            pairs=decision.pairs,
            alpha_per_look=0.0,
            processes=decision.processes,
        )
        candidate_ms, reference_ms = _centres(record, reference_rounds, ab.processes)
        verdict = paired_verdict(
            record.id,
            paired,
            candidate_ms=candidate_ms,
            reference_ms=reference_ms,
            alpha_per_test=ab.alpha_per_test,
            notes=tuple(notes),
        )
        if kernels.regressions:
            severity = max(verdict.severity, kernels.severity, key=lambda s: SEVERITY_RANK[s])
            verdict = replace(verdict, status="REGRESSED", severity=severity, reasons=kernels.reasons)
        verdicts[record.id] = verdict
    return verdicts


def _centres(record: BenchRecord, reference_rounds, processes) -> tuple[float, float | None]:
    """Each side's time as the change is estimated: the geometric mean over the served processes
    of each one's median round (pair k's blocks came from process pair ``processes[k]``, one round
    each). The median of all rounds pooled can sit in another process's mode on each side (a
    process's bias is steady, some run several percent apart), and read a change the pairs do
    not. Pooled medians where the rounds do not line up with the pairs."""
    candidate_rounds = record.rounds_ms
    if processes and len(candidate_rounds) == len(reference_rounds) == len(processes):

        def centre(rounds) -> float:
            by_process: dict[int, list[float]] = {}
            for process, ms in zip(processes, rounds, strict=True):
                by_process.setdefault(process, []).append(ms)
            return math.exp(statistics.fmean(math.log(statistics.median(v)) for v in by_process.values()))

        return centre(candidate_rounds), centre(reference_rounds)
    return record.median_ms, statistics.median(reference_rounds) if reference_rounds else None
