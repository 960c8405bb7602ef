"""This session's comparison with baseline NAME (``--bench-compare``): which file, the gate's
settings and priors, m of alpha/m, and the verdicts it gives.

Timings are compared only with a baseline recorded on this machine. When there is none but the
baseline was recorded on other machines (say a GPU runner), the deterministic kernel figures are
compared per architecture against the newest of them: record on a GPU, gate anywhere.
"""

from __future__ import annotations

import functools
from pathlib import Path

from pytest_tesserabench.history import baseline as baselines
from pytest_tesserabench.options import Settings
from pytest_tesserabench.record.results import BenchRecord, RunDocument, Verdict, analysed_kernels, kernels_text


class BaselineComparison:
    def __init__(self, baseline: baselines.Baseline, *, same_machine: bool, settings: Settings):
        self.baseline = baseline
        self.same_machine = same_machine
        self.settings = settings
        self.n_compared = 0  # m in alpha/m: baseline benchmarks among this session's tests

    # -- opening ---------------------------------------------------------------------------------
    @classmethod
    def open(cls, settings: Settings, machine_key: str) -> tuple[BaselineComparison | None, str | None]:
        """The comparison for ``--bench-compare`` (None when there is nothing to compare with) and a
        warning to show. BaselineError for a bad file or a name that does not exist."""
        name, root = settings.compare, settings.bench_dir
        known = baselines.baseline_names(root)
        if name not in known and settings.save != name:  # saving NAME for the first time is fine
            listed = ", ".join(known) if known else f"none yet under {root}"
            raise baselines.BaselineError(
                f"--bench-compare={name}: no baseline {name!r} (recorded: {listed}); record one with "
                f"`pytest --bench-save={name}`, or pick a recorded name"
            )
        path = baselines.baseline_path(root, name, machine_key)
        own = baselines.load_baseline(path, machine_key=machine_key)
        if own is not None and own.runs:
            return cls(own, same_machine=True, settings=settings), None
        if own is not None:
            if settings.save == name:  # this run is the history's first
                return None, f"--bench-compare={name}: {path} has no runs yet; nothing is gated"
            raise baselines.BaselineError(
                f"--bench-compare={name}: {path} has no runs to compare with; record one with "
                f"`pytest --bench-save={name}` (or delete the empty file)"
            )
        others = [baselines.load_baseline(p, machine_key=None) for p in baselines.machine_files(root, name)]
        with_kernels = [b for b in others if b and any(r.kernels for run in b.runs for r in run.benchmarks.values())]
        if with_kernels:
            newest = max(with_kernels, key=lambda b: b.runs[-1].started or "")
            device = newest.latest_machine.get("device", newest.machine_key)
            return cls(newest, same_machine=False, settings=settings), (
                f"--bench-compare={name}: no baseline for this machine ({machine_key}); gating the static kernel "
                f"figures against {newest.path} (recorded on {device}); timings are not compared across machines"
            )
        return None, (
            f"--bench-compare={name}: no baseline for this machine ({machine_key}) at {path}; nothing is gated. "
            f"Record one with `pytest --bench-save={name}` on this machine (three runs make a useful history)"
        )

    # -- the rule's inputs -------------------------------------------------------------------------
    @functools.cached_property
    def history(self):
        """The gate's view of the baseline (gate.pipeline.History): its runs and processes, the
        run-effect model and the drift priors, computed once per session."""
        # the gate (numpy, scipy: ~0.8 s) once a baseline is compared: every pytest run imports this module
        from pytest_tesserabench.gate import GateConfig
        from pytest_tesserabench.gate.pipeline import History

        config = GateConfig(
            alpha=self.settings.alpha, threshold=self.settings.threshold, work_threshold=self.settings.work_threshold
        )
        return History.of(self.baseline.runs, config, timings=self.same_machine)

    @property
    def runs(self) -> list[RunDocument]:
        """The runs the gate reads: each saved run and the fresh processes it was measured in too."""
        return self.history.runs

    @property
    def path(self) -> Path | None:
        return self.baseline.path

    def measured_with(self, setting: str) -> list[int]:
        """The values of a Sampling ``setting`` the baseline's runs measured their gated timings
        with (measured_with below)."""
        return measured_with(self.runs, setting)

    def reach(self, processes: int) -> dict[str, float]:
        """Per timed benchmark of the baseline: the smallest slowdown the gate catches against it on
        this machine (gate.pipeline History.detectable), measured in ``processes`` processes; empty
        where the timings come from another machine."""
        return self.history.detectable(processes=processes) if self.same_machine else {}

    def not_this_machine(self, machine_key: str) -> str | None:
        """Why this run's timings cannot be judged against the baseline, where it holds no runs of
        this machine (``machine_key``) and the gate compares another's kernel figures only; None
        where it holds this machine's. Timings of two CPU or GPU models are not comparable, so a
        pool of CI runners of several models gates timings only on the model that saved them."""
        if self.same_machine:
            return None
        device = self.baseline.latest_machine.get("device", self.baseline.machine_key)
        name = self.settings.compare
        return (
            f"baseline {name} holds no runs of this machine ({machine_key}), only of {self.baseline.machine_key} "
            f"({device}): timings are compared only on the kind of machine that saved them. To judge them, save "
            f"{name} on this one (`pytest --bench-save={name}`, three times), or run the job on one kind of "
            f"runner; --bench-ab=REF judges them in one job"
        )

    def describe(self) -> str:
        """'main (PATH, 3 run(s), measured in 9 processes; the timings of 3 benchmark(s), the figures
        of 3 kernel(s) on sm_80, sm_90)': what the gate holds this run against (over all its runs: a
        save of some benchmarks, -k, keeps the others'), kernels and archs named, since on a
        GPU-less runner they are what it judges exactly."""
        records = [r for run in self.baseline.runs for r in run.benchmarks.values()]
        timed = len({r.id for r in records if r.timing_gated})
        kernels = analysed_kernels(records)
        figures = f"the figures of {kernels_text(kernels)}" if kernels else ""
        if not self.same_machine:
            what = f"{figures or 'kernel figures'} only (another machine)"
        else:
            timings = f"the timings of {timed} benchmark(s)" if timed else ""
            what = ", ".join(part for part in (timings, figures) if part) or "nothing it can judge"
        runs, processes = len(self.baseline.runs), len(self.runs)
        measured = f", measured in {processes} processes" if processes > runs else ""
        return f"{self.settings.compare} ({_shown(self.path)}, {runs} run(s){measured}; {what})"

    @functools.cached_property
    def tests(self) -> dict[str, str]:
        """Record id -> the node id of its test, for every benchmark of the baseline."""
        return {i: r.nodeid for run in self.runs for i, r in run.benchmarks.items()}

    def count(self, nodeids: list[str]) -> None:
        """m of the alpha/m correction: the baseline's benchmarks whose tests this session runs."""
        selected = set(nodeids)
        self.n_compared = sum(1 for test in self.tests.values() if test in selected)

    # -- verdicts ----------------------------------------------------------------------------------
    def judge(
        self,
        records: list[BenchRecord],
        thresholds: dict[str, float],
        measured: dict[str, float],
        canary: float | None,
        *,
        measure_again=None,
        processes_again: int = 2,
        machine: dict | None = None,
    ) -> dict[str, Verdict]:
        """Verdicts for one test's records against the baseline (gate.pipeline.judge_test).
        ``measured``: the log centres of every benchmark this process measured so far (this test's
        included), from which the run's shared shift is estimated; ``canary``: this run's log
        canary; ``measure_again``: measures records again in ``processes_again`` fresh processes
        (processes/fresh.py)."""
        from pytest_tesserabench.gate.pipeline import judge_test

        history = self.history
        return judge_test(
            history,
            records,
            m=max(self.n_compared, len(records)),
            thresholds=thresholds,
            shifts={r.id: history.shift(r.id, measured, canary) for r in records},
            measure_again=measure_again,
            processes_again=processes_again,
            machine=machine or {},
        )

    def missing(self, records: dict[str, BenchRecord], ran: set[str]) -> dict[str, Verdict]:
        """MISSING verdicts: baseline benchmarks whose test ran without measuring them."""
        return {
            record_id: Verdict(
                id=record_id, status="MISSING", notes=("in the baseline; its test ran without measuring it",)
            )
            for record_id, test in self.tests.items()
            if record_id not in records and test in ran
        }

    def suite_shift(self, records, canary: float | None):
        """The whole run's shift (gate.model.SuiteShift) from this run's ``records``, or None when
        the model does not apply."""
        return self.history.suite_shift(records, canary)

    def not_run(self, ran: set[str]) -> int:
        """Baseline benchmarks whose tests did not run at all (deselected, or deleted)."""
        return sum(1 for test in self.tests.values() if test not in ran)


def measured_with(runs: list[RunDocument], setting: str) -> list[int]:
    """The values of a Sampling ``setting`` (passes, threads: gate.conditions.MEASURED_OTHERWISE)
    ``runs`` measured their gated timings with, sorted (a record timed in the interpreter is
    measured once whatever the passes, and never gated: it says nothing)."""
    return sorted(
        {
            getattr(r.sampling, setting)
            for run in runs
            for r in run.benchmarks.values()
            if r.sampling is not None and r.timing_gated
        }
    )


def measured_otherwise(runs: list[RunDocument], ours: dict[str, int]) -> list[tuple[str, str]]:
    """(what differs, the fix) for each Sampling setting this run measures otherwise than ``runs``
    (``ours``: setting -> this run's value), known before anything is measured: across them every
    timing verdict would be INCONCLUSIVE (gate.conditions.passes_differ)."""
    from pytest_tesserabench.gate import conditions

    found = []
    for setting, note, hint in conditions.MEASURED_OTHERWISE:
        theirs = measured_with(runs, setting)
        if theirs and theirs != [ours[setting]]:
            found.append((note(ours[setting], theirs), hint))
    return found


def _shown(path: Path | None) -> str:
    """``path`` relative to the current folder where it lies inside it (baselines/main/KEY.json, as
    a CI summary or a report shared with others should say it), else as it is."""
    if path is None:
        return "no file"
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)
