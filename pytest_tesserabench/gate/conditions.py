"""What the run's own conditions say about its verdicts against a baseline (history mode).

The rule judges timings; three facts about how they were taken qualify it, and may only soften a
verdict, never make one: a baseline measured otherwise (in another number of passes, the two
sides then centred differently, or under another --bench-threads: the verdict becomes
INCONCLUSIVE), a multi-threaded benchmark whose threads other processes crowded out
(INCONCLUSIVE: its time then measures the scheduler), and a CPU other processes shared while a
regression was timed (a note, with the way to confirm it). A/B mode needs
none: its pairs cancel what the machine does, and both sides ran on the same CPU.
"""

from __future__ import annotations

from dataclasses import replace

from pytest_tesserabench.gate.config import GateConfig
from pytest_tesserabench.machine import neighbours, run_queue
from pytest_tesserabench.record.results import BenchRecord, RunDocument, Verdict

STAGE = "conditions"


def review(
    records: list[BenchRecord],
    verdicts: dict[str, Verdict],
    baseline_runs: list[RunDocument],
    config: GateConfig | None = None,
):
    """The verdicts once the run's conditions are taken into account."""
    config = config or GateConfig()
    verdicts = crowded(records, cpu_shared(records, verdicts), baseline_runs, config)
    verdicts = pool_slow(records, verdicts, baseline_runs, config)
    return passes_differ(records, verdicts, baseline_runs)


def pool_moved(record: BenchRecord, baseline_runs: list[RunDocument], config: GateConfig) -> tuple[float, str] | None:
    """How much slower (ratio) the thread pool ran at its fastest in this run than in the slowest
    of the baseline's runs, after the passes of a multi-threaded benchmark, and which pool:
    torch's, or BLAS's in a process without torch (measure/canary.py); like with like only (their
    calls differ 8x in time). None where either side did not time it. Against the slowest, not
    the median: a canary of a few dozen short calls drifts between runs on its own, by more than
    a threshold of a few percent, and a move within the range the baseline's runs read is no slow
    moment of the machine."""
    if record.sampling is None or not multi_threaded(record.id, baseline_runs, config):
        return None
    saved = [run.benchmarks.get(record.id) for run in baseline_runs]
    for field, pool in (("pool_canary_ms", "torch's thread pool"), ("blas_canary_ms", "numpy's BLAS threads")):
        mine = getattr(record.sampling, field)
        theirs = [min(getattr(r.sampling, field)) for r in saved if r and r.sampling and getattr(r.sampling, field)]
        if mine and theirs:
            return min(mine) / max(theirs), pool
    return None


def pool_slow(
    records: list[BenchRecord], verdicts: dict[str, Verdict], baseline_runs: list[RunDocument], config: GateConfig
) -> dict[str, Verdict]:
    """No slowdown decided for a multi-threaded benchmark while the machine was slow for parallel
    work: the pool canary (torch's or BLAS's), timed after each of its passes, read the pool
    slower at its fastest than the slowest of the baseline's runs (pool_moved), by the threshold
    or by as much as the benchmark's slowdown surely is (the lower end of its interval), whichever
    is less. A benchmark that waits at every
    barrier for its slowest thread reads a shared machine's slow moments for parallel work (a vCPU
    the host holds) as a slowdown, for minutes at a time, its fresh processes too; a
    single-threaded canary and the other, single-threaded benchmarks do not see them, and the
    pool's own call does. Each parallel benchmark reads such a moment at a strength of its own
    (how much of its time it waits at barriers), so past the threshold the pool's move is no
    bound on what the moment did to it. A slower code
    leaves the pool canary where it was: its verdict stands."""
    verdicts = dict(verdicts)
    for record in records:
        verdict = verdicts.get(record.id)
        if verdict is None or verdict.status != "REGRESSED" or verdict.reasons or verdict.ci is None:
            continue
        read = pool_moved(record, baseline_runs, config)
        if read is None or read[0] < min(verdict.ci[0], 1 + (verdict.threshold or config.threshold)):
            continue
        moved, pool = read
        note = (
            f"{pool} ran {(moved - 1) * 100:+.1f}% slower than in any run of the baseline, at its fastest "
            "in this run (the pool canary): the machine was slow for parallel work"
        )
        verdicts[record.id] = _undecided(verdict, note, POOL_SLOW)
    return verdicts


def _undecided(verdict: Verdict, note: str, hint: str) -> Verdict:
    """``verdict`` made INCONCLUSIVE by a condition of the run: its note, and the fix as its hint."""
    return replace(
        verdict, status="INCONCLUSIVE", stage=STAGE, severity=None, notes=(*verdict.notes, note), hint_text=hint
    )


def most_cpus(bench_id: str, baseline_runs: list[RunDocument]) -> float | None:
    """The CPUs the benchmark's code keeps busy given them: the most its process kept busy in any
    run of the baseline, or None where no run measured it. Not the median: how many threads a
    benchmark runs is its code's doing, while a run saved beside busy processes reads the load (a
    two-thread conv2d saved under load read 1.99, 1.40 and 1.08 CPUs; a single-threaded benchmark
    read at most 1.0 in every kept baseline)."""
    usual = [run.benchmarks[bench_id].own_cpus() for run in baseline_runs if bench_id in run.benchmarks]
    usual = [cpus for cpus in usual if cpus > 0]
    return max(usual) if usual else None


def multi_threaded(bench_id: str, baseline_runs: list[RunDocument], config: GateConfig) -> bool:
    """Whether the benchmark kept ``1 + crowded_cpus`` CPUs or more busy in the baseline."""
    had = most_cpus(bench_id, baseline_runs)
    return had is not None and had >= 1 + config.crowded_cpus


def crowded_out(record: BenchRecord, baseline_runs: list[RunDocument], config: GateConfig) -> str | None:
    """How a multi-threaded benchmark's threads were crowded out in this run (the verdict's note),
    or None: it kept ``1 + crowded_cpus`` CPUs or more busy in the baseline, got ``crowded_cpus``
    fewer now, while other processes kept half a CPU or more busy. Its move is then the
    scheduler's, not the machine's shared one: no timing decision for it (``crowded``), and no say
    in the run's shift for the others (gate.pipeline)."""
    margin = config.crowded_cpus
    had = most_cpus(record.id, baseline_runs)
    if had is None or record.own_cpus() <= 0:
        return None
    got, others = record.own_cpus(), record.others_cpus()
    if had < 1 + margin or got > had - margin or others < neighbours.SHARED_CPUS:
        return None
    return f"its threads got {got:.1f} CPUs, {had:.1f} in the baseline, while other processes kept {others:.1f} busy"


def crowded(
    records: list[BenchRecord], verdicts: dict[str, Verdict], baseline_runs: list[RunDocument], config: GateConfig
) -> dict[str, Verdict]:
    """No timing decision for a multi-threaded benchmark whose threads other processes crowded
    out: it kept more CPUs busy in the baseline than it got in this run, while other processes
    used them. The run's shared shift cannot stand for what that did: a single-threaded benchmark
    loses the time it waited for a CPU (left out of its samples), but a multi-threaded one waits at
    every barrier for a thread that is not running, so it slows by whatever the scheduler makes of
    it (a two-thread conv2d beside two busy processes on two CPUs: 1.1x to 64x from run to run, the
    single-threaded benchmarks of the same runs within a few percent)."""
    verdicts = dict(verdicts)
    for record in records:
        verdict = verdicts.get(record.id)
        if verdict is None or verdict.reasons or verdict.status not in ("REGRESSED", "IMPROVED"):
            continue
        note = crowded_out(record, baseline_runs, config)
        if note is None:
            continue
        verdicts[record.id] = _undecided(verdict, note, CROWDED)
    return verdicts


def cpu_shared(records: list[BenchRecord], verdicts: dict[str, Verdict]) -> dict[str, Verdict]:
    """History mode: a note on a REGRESSED benchmark timed on a CPU other processes shared,
    whether they took its CPU (the run-queue wait, left out of the samples) or ran beside it
    (``neighbours``), with the way to confirm it. The verdict stands: the run's shared shift and
    its uncertainty already carry what the load did to the suite; holding such regressions back
    cost history mode every detection on a loaded machine. A/B measures both sides under the same
    load."""
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
    """No timing verdict where this run measured otherwise than the baseline's runs:
    * in another number of passes (say the baseline saved without -n, compared under -n): a run in
      passes is centred on its lowest pass, one pass on the median of all its rounds, so the two
      sides are centred differently (unchanged benchmarks under -n read tens of percent slower
      than a four-pass baseline), and measuring inside an xdist worker is itself another condition;
    * under another --bench-threads: a multi-threaded benchmark then runs other code (one thread
      where it had two reads up to twice as slow, whatever its own code did).
    A verdict of the kernel figures (reasons) stands."""
    verdicts = dict(verdicts)
    for record in records:
        verdict = verdicts.get(record.id)
        if verdict is None or record.sampling is None or verdict.reasons or not record.timing_gated:
            continue
        saved = [
            run.benchmarks[record.id].sampling
            for run in baseline_runs
            if record.id in run.benchmarks and run.benchmarks[record.id].sampling is not None
        ]
        notes, hints = [], []
        for setting, note, hint in MEASURED_OTHERWISE:
            mine, theirs = getattr(record.sampling, setting), sorted({getattr(s, setting) for s in saved})
            if theirs and theirs != [mine]:
                notes.append(note(mine, theirs))
                hints.append(hint)
        if not notes:
            continue
        timed = verdict.status in ("REGRESSED", "IMPROVED", "UNCHANGED", "INCONCLUSIVE")
        verdicts[record.id] = replace(
            verdict,
            status="INCONCLUSIVE" if timed else verdict.status,
            stage=STAGE if timed else verdict.stage,
            severity=None if timed else verdict.severity,
            notes=(*verdict.notes, *notes),
            hint_text="; ".join(hints) if timed else verdict.hint_text,  # the cause, whatever else the rule saw
        )
    return verdicts


def _threads(count: int) -> str:
    return f"at {count} (--bench-threads)" if count else "as the process had them"


CROWDED = (
    "a multi-threaded benchmark whose threads other processes crowded out slows by what the scheduler "
    "makes of it, not by its code: compare on a quieter runner, with --bench-threads=1, or in one job "
    "with --bench-ab=REF"
)
POOL_SLOW = (
    "compare again when the machine is steady, time it single-threaded (--bench-threads=1, which "
    "dodges a slow CPU), or compare in one job with --bench-ab=REF"
)
SAME_THREADS = "record the baseline and compare with the same --bench-threads"
SAME_PASSES = (
    "record the baseline and compare with the same --bench-passes (a run under -n makes one pass: "
    "save the baseline under -n too, or compare without it)"
)
# Sampling's settings a run must share with the baseline's runs: (field, the note, the fix)
MEASURED_OTHERWISE = (
    (
        "passes",
        lambda mine, theirs: (
            f"measured in {mine} pass(es), the baseline's runs in "
            f"{' or '.join(map(str, theirs))}: the two are centred differently"
        ),
        SAME_PASSES,
    ),
    (
        "threads",
        lambda mine, theirs: (
            f"measured with thread pools {_threads(mine)}, the baseline's runs {' or '.join(map(_threads, theirs))}"
        ),
        SAME_THREADS,
    ),
)
