"""``BenchSession``: the one object that owns a pytest session's benchmarking state.

It lives on ``config.stash`` and composes the parts, each with one concern:
``RunContext`` (machine, commit, canary), ``Instruments`` (what measuring uses),
``BaselineComparison`` (the baseline and the gate), and the records the session collected (on the
xdist controller: the records its workers sent back). It judges a test's records and writes the
run's files; the hooks in plugin.py only call it.

Every pytest session makes one, with or without --bench, so the modules only measuring and
judging need (the gate, baselines, reports: numpy and scipy behind them) are imported inside the
methods that use them; tests/plugin/test_xdist.py checks that a plain run imports nothing heavy.
"""

from __future__ import annotations

from pathlib import Path

from pytest_tesserabench.context import RunContext
from pytest_tesserabench.history import baseline
from pytest_tesserabench.history.comparison import BaselineComparison
from pytest_tesserabench.measure.instruments import Instruments
from pytest_tesserabench.options import Settings
from pytest_tesserabench.record import files
from pytest_tesserabench.record.results import BenchRecord, RunDocument, Verdict


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
        self.not_compared: str | None = None  # why a --bench-compare run has nothing to compare with here
        self.ab = None  # ab.lead.ABLead with --bench-ab (in the process that runs tests)
        self.reference = None  # ab.worktree.Reference with --bench-ab (every process)
        self.sigterm = None  # with --bench-ab or fresh processes: SIGTERM's handler before the lead took it as Ctrl-C
        self.measurer = None  # how bench() measures: sampling.LocalMeasurer, or a side of A/B
        self.passes = None  # passes.Passes when this run measures in interleaved passes
        self.passes_not_possible: str | None = None  # why not, when they were asked for
        self.records: dict[str, BenchRecord] = {}  # id -> record, in completion order
        self.ran: set[str] = set()  # node ids of tests that reported (controller), for MISSING
        self.ab_missing: dict[str, Verdict] = {}  # calls the reference made and the candidate did not
        self.ab_missing_records: dict[str, BenchRecord] = {}  # their stand-ins, for the reports' groups
        self.measured: dict[str, float] = {}  # id -> log centre, of what this process measured
        self.suite = None  # gate.model.SuiteShift of the whole run (controller, at the end)
        self.status = None  # report.progress.StatusLine while measuring on a terminal
        self.process_pool = None  # processes.fresh.ProcessPool: a save's fresh processes, or --bench-confirm's
        self._save_draws: dict[str, int] | None = None  # baseline.process_draws of the --bench-save baseline
        self.save_target = None  # the --bench-save baseline as it was before this run (None: none yet)
        self._saved: tuple = (None, None)  # (path, gate.pipeline.History) of the baseline this run saved

    # -- before measuring --------------------------------------------------------------------------
    def open_baselines(self) -> str | None:
        """Check the --bench-save file and open the --bench-compare baseline, before measuring.

        Raises BaselineError for a bad file or name (named in the message); returns a warning when
        there is nothing to compare with on this machine.
        """
        settings, key = self.settings, self.context.machine_key
        if settings.save:
            # A corrupt or foreign file must stop the run now, not after minutes of measuring.
            path = baseline.baseline_path(settings.bench_dir, settings.save, key)
            self.save_target = baseline.load_baseline(path, machine_key=key)
        if not settings.compare:
            return None
        self.comparison, warning = BaselineComparison.open(settings, key)
        if self.comparison is None and settings.save != settings.compare:  # (not a history's first save)
            self.not_compared = warning
        return warning

    def timings_elsewhere(self) -> str | None:
        """Why this run's timings are not judged, where the --bench-compare baseline holds only
        another machine's runs (its kernel figures are); None otherwise."""
        comparison = self.comparison
        return comparison.not_this_machine(self.context.machine_key) if comparison is not None else None

    @property
    def comparing(self) -> bool:
        return self.comparison is not None or self.settings.ab is not None

    # -- judging -----------------------------------------------------------------------------------
    def judge(
        self, records: list[BenchRecord], threshold: float, measure_again=None, processes_again: int = 2
    ) -> dict[str, Verdict]:
        """Verdicts for one test's records: IMPOSSIBLE where the throughput beats the device's
        roofline, else the gate's against the baseline (gate.pipeline; ``measure_again`` measures
        a benchmark again in fresh processes) or, with --bench-ab, against the reference."""
        verdicts: dict[str, Verdict] = {}
        if self.settings.ab is not None:
            from pytest_tesserabench.ab.verdicts import ab_verdicts

            verdicts = ab_verdicts(
                records, threshold, machine=self.context.machine_info, work_threshold=self.settings.work_threshold
            )
        elif self.comparison is not None:
            from pytest_tesserabench.gate.pipeline import add_measured

            for record in records:
                add_measured(self.comparison.history, self.measured, record)
            verdicts = self.comparison.judge(
                records,
                {r.id: threshold for r in records},
                self.measured,
                self.context.log_canary(),
                measure_again=measure_again,
                processes_again=processes_again,
                machine=self.context.machine_info,
            )
        for record in records:
            reason = self.instruments.impossible(
                timer=record.timer,
                flops=record.flops,
                nbytes=record.bytes,
                median_ms=record.median_ms,
                storage=record.dtype,
            )
            if reason:
                verdicts[record.id] = Verdict(
                    id=record.id, status="IMPOSSIBLE", severity="severe", reasons=(reason,), stage="roofline"
                )
        return verdicts

    def suite_shift(self):
        """The run's suite-wide shift against the baseline (controller: every record), or None."""
        if self.comparison is None:
            return None
        return self.comparison.suite_shift(self.records.values(), self.context.log_canary())

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

    def report_data(self, notes: list[str] | None = None):
        """What the HTML and markdown reports draw: this run, its verdicts, the baseline's history,
        and ``notes``, what the run says about itself (report.terminal.run_notes)."""
        from pytest_tesserabench.report.data import ReportData

        comparison = self.comparison
        return ReportData(
            run=self.document(),
            verdicts=self.all_verdicts(),
            history=list(comparison.baseline.runs) if comparison is not None and comparison.same_machine else [],
            baseline=f"baseline {comparison.describe()}" if comparison is not None else None,
            notes=list(notes or []),
        )

    # -- files -------------------------------------------------------------------------------------
    def write_json(self) -> None:
        text = self.document().to_text(samples=True)
        if files.open_descriptor(self.settings.json_path) in (1, 2):
            text = "\n" + text  # on a line of its own: pytest's progress line is not ended yet
        files.write_atomic(self.settings.json_path, text)

    def save_baseline(self) -> tuple[Path, int, list]:
        """Append the passed tests' records to the --bench-save baseline; (path, records saved,
        the saved benchmarks far from what measured them elsewhere: baseline.Outlying)."""
        key = self.context.machine_key
        path = baseline.baseline_path(self.settings.bench_dir, self.settings.save, key)
        passed = {i: r for i, r in self.records.items() if r.outcome == "passed"}
        if not passed:
            return path, 0, []
        run = self.document(passed)
        earlier = baseline.load_runs(path) if path.is_file() else []
        settings = self.settings
        try:
            path = baseline.save_run(
                settings.bench_dir,
                settings.save,
                key,
                run,
                history=settings.history,
                lock_timeout=settings.lock_timeout,
                say=self.instruments.say,
            )
        except baseline.BaselineLocked as exc:
            from pytest_tesserabench.history import unsaved

            kept = unsaved.keep(run, settings.save, self.instruments.cache_dir)
            command = unsaved.save_command(settings.save, kept, settings.bench_dir, settings.history)
            raise baseline.BaselineLocked(
                f"{exc}. The run's {len(passed)} benchmark(s) are kept in {kept}; save them once the lock is free: "
                f"{command}"
            ) from None
        return path, len(passed), baseline.outlying(run, earlier)

    def process_draws(self) -> dict[str, int]:
        """The process draws the --bench-save baseline holds of each benchmark, this save's own
        process included (baseline.process_draws). A baseline that cannot be read counts as empty
        (the save itself says what is wrong with it)."""
        if self._save_draws is None:
            path = baseline.baseline_path(self.settings.bench_dir, self.settings.save, self.context.machine_key)
            try:
                runs = baseline.load_runs(path) if path.is_file() else []
            except baseline.BaselineError:
                runs = []
            self._save_draws = baseline.process_draws(runs, self.settings.history)
        return self._save_draws

    def lacks_process_draws(self, bench_id: str) -> bool:
        """Whether the --bench-save baseline still lacks process draws of ``bench_id``
        (baseline.SAVE_DRAWS): then the save measures it in fresh processes too."""
        return self.process_draws().get(bench_id, 1) < baseline.SAVE_DRAWS

    def undetectable(self, path: Path) -> tuple[dict[str, float], int]:
        """(the benchmarks of the saved baseline at ``path`` that the gate cannot judge at the
        threshold on this machine: id -> the smallest slowdown it catches (gate.pipeline
        History.detectable), for those whose is above --bench-threshold; the baseline's timed
        benchmarks)."""
        history = self._saved_history(path)
        if history is None:
            return {}, 0
        detectable = history.detectable(processes=1 + self.settings.confirm)
        return {i: d for i, d in detectable.items() if d > history.config.threshold}, len(detectable)

    def left_out(self, path: Path) -> dict[str, tuple[list[float], float]]:
        """The benchmarks some of whose processes the baseline just saved at ``path`` leaves out,
        far from its others and slower by at least the threshold (gate.pipeline
        History.left_out_times): id -> (their times, ms; the median of the processes kept). A
        compare that reads one there fails it; one left out nearer (a tight benchmark's ordinary
        2%) or faster fails nothing, and a warning about it would only teach users to ignore the line."""
        history = self._saved_history(path)
        return history.left_out_times(slower_by=history.config.threshold) if history is not None else {}

    def _saved_history(self, path: Path):
        """The gate's view (gate.pipeline.History) of the baseline saved at ``path``, built once."""
        from pytest_tesserabench.gate import GateConfig
        from pytest_tesserabench.gate.pipeline import History

        if self._saved[0] != path:
            saved = baseline.load_baseline(path, machine_key=self.context.machine_key)
            config = GateConfig(alpha=self.settings.alpha, threshold=self.settings.threshold)
            self._saved = (path, History.of(saved.runs, config) if saved is not None and saved.runs else None)
        return self._saved[1]
