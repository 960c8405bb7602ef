"""``BenchSession``: the one object that owns a pytest session's benchmarking state.

It lives on ``config.stash`` and composes the parts, each with one concern:
``RunContext`` (machine, commit, canary), ``Instruments`` (what measuring uses),
``BaselineComparison`` (the baseline and the gate), and the records the session collected (on the
xdist controller: the records its workers sent back). It judges a test's records and writes the
run's files; the hooks in plugin.py only call it.
"""

from __future__ import annotations

from pathlib import Path

from pytest_tesserabench.comparison import BaselineComparison
from pytest_tesserabench.context import RunContext
from pytest_tesserabench.instruments import Instruments
from pytest_tesserabench.options import Settings
from pytest_tesserabench.results import BenchRecord, RunDocument, Verdict


class BenchSession:
    def __init__(
        self, settings: Settings, *, rootdir: Path, cache_dir: Path | None, is_worker: bool, gpu: str | None = None
    ):
        self.settings = settings
        self.is_worker = is_worker  # an xdist worker or a torchrun rank other than 0: reports nothing
        self.context = RunContext(rootdir)
        self.instruments = Instruments(
            settings, cache_dir=cache_dir, machine_info=lambda: self.context.machine_info, gpu=gpu
        )
        self.comparison: BaselineComparison | None = None
        self.ab = None  # ab.lead.ABLead with --bench-ab (in the process that runs tests)
        self.reference = None  # ab.worktree.Reference with --bench-ab (every process)
        self.sigterm = None  # with --bench-ab: SIGTERM's handler before the lead took it as Ctrl-C
        self.measurer = None  # how bench() measures: sampling.LocalMeasurer, or a side of A/B
        self.passes = None  # passes.Passes when this run measures in interleaved passes
        self.passes_not_possible: str | None = None  # why not, when they were asked for
        self.records: dict[str, BenchRecord] = {}  # id -> record, in completion order
        self.ran: set[str] = set()  # node ids of tests that reported (controller), for MISSING
        self.ab_missing: dict[str, Verdict] = {}  # calls the reference made and the candidate did not
        self.ab_missing_records: dict[str, BenchRecord] = {}  # their stand-ins, for the reports' groups
        self.measured: dict[str, float] = {}  # id -> log centre, of what this process measured
        self.suite = None  # run_effect.SuiteShift of the whole run (controller, at the end)
        self.status = None  # report.progress.StatusLine while measuring on a terminal

    # -- before measuring --------------------------------------------------------------------------
    def open_baselines(self) -> str | None:
        """Check the --bench-save file and open the --bench-compare baseline, before measuring.

        Raises BaselineError for a bad file or name (named in the message); returns a warning when
        there is nothing to compare with on this machine.
        """
        from pytest_tesserabench import baseline

        settings, key = self.settings, self.context.machine_key
        if settings.save:
            # A corrupt or foreign file must stop the run now, not after minutes of measuring.
            baseline.load_baseline(baseline.baseline_path(settings.bench_dir, settings.save, key), machine_key=key)
        if not settings.compare:
            return None
        self.comparison, warning = BaselineComparison.open(settings, key)
        return warning

    @property
    def comparing(self) -> bool:
        return self.comparison is not None or self.settings.ab is not None

    # -- judging -----------------------------------------------------------------------------------
    def judge(self, records: list[BenchRecord], threshold: float) -> dict[str, Verdict]:
        """Verdicts for one test's records: IMPOSSIBLE where the throughput beats the device's
        roofline, else the gate's against the baseline or, with --bench-ab, the reference."""
        verdicts: dict[str, Verdict] = {}
        if self.settings.ab is not None:
            from pytest_tesserabench.ab.verdicts import ab_verdicts

            verdicts = ab_verdicts(records, threshold, machine=self.context.machine_info)
        elif self.comparison is not None:
            from pytest_tesserabench.gate import log_centre

            for record in records:
                centre = log_centre(record)
                if centre is not None:
                    self.measured[record.id] = centre
            candidate = self.context.document({r.id: r for r in records}, with_commit=False)
            verdicts = self.comparison.judge(
                candidate, {r.id: threshold for r in records}, self.measured, self.context.log_canary()
            )
        verdicts = self._machine_moved(records, verdicts, threshold)
        verdicts = self._cpu_shared(records, verdicts)
        verdicts = self._passes_differ(records, verdicts)
        for record in records:
            reason = self.instruments.impossible(
                timer=record.timer,
                flops=record.flops,
                nbytes=record.bytes,
                median_ms=record.median_ms,
                storage=record.dtype,
            )
            if reason:
                verdicts[record.id] = Verdict(id=record.id, status="IMPOSSIBLE", severity="severe", reasons=(reason,))
        return verdicts

    def suite_shift(self):
        """The run's suite-wide shift against the baseline (controller: every record), or None."""
        if self.comparison is None:
            return None
        from pytest_tesserabench.gate import log_centre

        centres = {i: c for i, c in ((i, log_centre(r)) for i, r in self.records.items()) if c is not None}
        return self.comparison.suite_shift(centres, self.context.log_canary())

    def machine_drift(self, record: BenchRecord) -> float | None:
        """How much slower (log) the machine was right before ``record`` than at the start of the
        run, by the canary; None without both canaries."""
        import math
        import statistics

        start = self.context.canary_ms[: self._start_samples()]
        if not record.canary_ms or not start or statistics.median(start) <= 0:
            return None  # (a clock the test patched reads zero: no canary then)
        return math.log(record.canary_ms / statistics.median(start))

    def _start_samples(self) -> int:
        from pytest_tesserabench import canary

        return canary.CANARY_SAMPLES

    def drift_allowance(self, threshold: float) -> float:
        """Machine drift (log) beyond what the canary's own noise explains: half the threshold, or
        four standard errors of a few canary samples, whichever is larger."""
        import math

        import numpy as np

        start = np.log(np.asarray(self.context.canary_ms[: self._start_samples()] or [1.0]))
        noise = float(np.std(start, ddof=1)) if start.size > 1 else 0.0
        from pytest_tesserabench import canary

        return max(math.log1p(threshold) / 2, 4 * noise / math.sqrt(canary.LOCAL_SAMPLES))

    def _machine_moved(self, records, verdicts: dict[str, Verdict], threshold: float) -> dict[str, Verdict]:
        """Never a REGRESSED of a benchmark the machine itself explains: when the canary right
        before it was slower than at the start by more than its noise allows, and the slowdown
        less that drift is below the threshold, the verdict is INCONCLUSIVE and says why."""
        import math
        from dataclasses import replace

        allowance = self.drift_allowance(threshold)
        for record in records:
            verdict = verdicts.get(record.id)
            drift = self.machine_drift(record)
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
                        hint_text="re-run on a quieter machine: the machine's speed changed during the run",
                    )
                    continue
            verdicts[record.id] = replace(verdict, notes=(*verdict.notes, note))
        return verdicts

    def _cpu_shared(self, records, verdicts: dict[str, Verdict]) -> dict[str, Verdict]:
        """History mode: never a REGRESSED of a benchmark timed on a CPU that other processes
        shared. The run-queue wait is left out of the samples, but those processes still share
        caches, memory bandwidth and a core's SMT sibling, which slows some code far more than
        other code: not a shift the run-effect model removes (on the CI VM under two busy
        processes, one unchanged 0.3 ms workload read +14% while the rest moved -2%). A baseline
        recorded under load does not make it comparable: the load changes from run to run (a new
        user's trial, baseline and candidates all timed beside another job's test suite, still
        failed unchanged tests). A/B measures both sides under the same load and keeps its
        verdicts."""
        from dataclasses import replace

        from pytest_tesserabench import run_queue

        if self.comparison is None:
            return verdicts
        for record in records:
            verdict = verdicts.get(record.id)
            waited, timed = record.cpu_wait()
            shared = waited / timed if timed > 0 else 0.0  # as the summary's "the CPU was shared" line
            if verdict is None or verdict.status != "REGRESSED" or verdict.reasons or shared < run_queue.SHARED:
                continue
            note = (
                f"the CPU was shared while it was measured (the timing thread waited {shared:.0%} of the time "
                "for it): not a regression of its own"
            )
            verdicts[record.id] = replace(
                verdict,
                status="INCONCLUSIVE",
                severity=None,
                notes=(*verdict.notes, note),
                hint_text="re-run on a machine no other job shares, or compare in the same job with --bench-ab=REF",
            )
        return verdicts

    def _passes_differ(self, records, verdicts: dict[str, Verdict]) -> dict[str, Verdict]:
        """A note where this run measured in another number of passes than the baseline's runs
        (say the baseline saved without -n, compared under -n): the centres are then taken
        differently, and the fix is to record and compare alike."""
        from dataclasses import replace

        if self.comparison is None:
            return verdicts
        for record in records:
            verdict = verdicts.get(record.id)
            if verdict is None or record.sampling is None:
                continue
            theirs = sorted(
                {
                    run.benchmarks[record.id].sampling.passes
                    for run in self.comparison.runs
                    if record.id in run.benchmarks and run.benchmarks[record.id].sampling is not None
                }
            )
            if theirs and theirs != [record.sampling.passes]:
                note = (
                    f"measured in {record.sampling.passes} pass(es), the baseline's runs in "
                    f"{' or '.join(map(str, theirs))}: record and compare with the same --bench-passes"
                )
                verdicts[record.id] = replace(verdict, notes=(*verdict.notes, note))
        return verdicts

    def all_verdicts(self) -> dict[str, Verdict]:
        """Every verdict of the session (controller): those given per test, plus MISSING ones."""
        verdicts = {i: r.verdict for i, r in self.records.items() if r.verdict is not None}
        if self.comparison is not None:
            verdicts.update(self.comparison.missing(self.records, self.ran))
        verdicts.update({i: v for i, v in self.ab_missing.items() if i not in self.records})
        return verdicts

    # -- collecting ----------------------------------------------------------------------------------
    def add(self, records: list[BenchRecord]) -> None:
        for record in records:
            self.records[record.id] = record

    def document(self, records: dict[str, BenchRecord] | None = None) -> RunDocument:
        return self.context.document(self.records if records is None else records)

    def report_data(self):
        """What the HTML and markdown reports draw: this run, its verdicts, the baseline's history."""
        from pytest_tesserabench.report.data import ReportData

        comparison = self.comparison
        return ReportData(
            run=self.document(),
            verdicts=self.all_verdicts(),
            history=list(comparison.runs) if comparison is not None and comparison.same_machine else [],
            baseline=f"baseline {comparison.describe()}" if comparison is not None else None,
        )

    # -- files -------------------------------------------------------------------------------------
    def write_json(self) -> None:
        from pytest_tesserabench import files

        files.write_atomic(self.settings.json_path, self.document().to_text(samples=True))

    def save_baseline(self) -> tuple[Path, int]:
        """Append the passed tests' records to the --bench-save baseline; (path, records saved)."""
        from pytest_tesserabench import baseline

        key = self.context.machine_key
        passed = {i: r for i, r in self.records.items() if r.outcome == "passed"}
        if not passed:
            return baseline.baseline_path(self.settings.bench_dir, self.settings.save, key), 0
        path = baseline.save_run(
            self.settings.bench_dir, self.settings.save, key, self.document(passed), history=self.settings.history
        )
        return path, len(passed)
