"""``BenchSession``: the one object that owns a pytest session's benchmarking state.

It lives on ``config.stash``; the hooks in plugin.py and the ``Bench`` fixture talk to it. It
knows the settings, collects the records (on the xdist controller: the records its workers sent
back), and reaches the optional parts — kernel capture and static analysis, telemetry, roofline —
lazily, so that a session that measures nothing imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_tesserabench.options import Settings

# One lock for the whole machine: a CPU benchmark on one worker disturbs a GPU one on another
# (launch latency, memory bandwidth), so measured sections never overlap.
LOCK_NAME = "tesserabench-measure.lock"


@dataclass
class _TelemetryScope:
    calls: int = 0
    result: dict | None = None


class BenchSession:
    def __init__(self, settings: Settings, *, rootdir: Path, cache_dir: Path | None, is_worker: bool):
        self.settings = settings
        self.rootdir = rootdir
        self.cache_dir = cache_dir
        self.is_worker = is_worker
        self.started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.records: dict[str, dict] = {}  # id -> record, in completion order
        self._peaks: Any = None
        self._peaks_resolved = False
        self.canary_ms: list[float] = []
        self.baseline: dict | None = None  # the --bench-compare baseline, validated
        self.baseline_path: Path | None = None
        self.n_compared = 0  # m in alpha/m: baseline benchmarks among this session's tests
        self.run_nodeids: set[str] = set()  # tests that reported (controller), for MISSING

    # -- results -----------------------------------------------------------------------------
    def add_records(self, records: list[dict]) -> None:
        for record in records:
            self.records[record["id"]] = record

    # -- the machine ------------------------------------------------------------------------
    @functools.cached_property
    def machine_info(self) -> dict:
        from pytest_tesserabench import machine

        return machine.machine_info()

    @functools.cached_property
    def commit(self) -> dict:
        """sha, branch and dirty flag of the checkout (asked once: --bench-json and --bench-save share it)."""
        from pytest_tesserabench.baseline import git_commit_info

        return git_commit_info(self.rootdir)

    # -- measuring -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def device_lock(self):
        import tempfile

        from filelock import FileLock

        with FileLock(str(Path(tempfile.gettempdir()) / LOCK_NAME)):
            yield

    @contextlib.contextmanager
    def capture_kernels(self):
        """Record the Triton kernels launched inside the block (empty if triton is not in use)."""
        if "triton" not in sys.modules:
            yield []
            return
        from pytest_tesserabench.inspect import capture_launches

        with capture_launches() as launches:
            yield launches

    @contextlib.contextmanager
    def telemetry(self, timer):
        scope = _TelemetryScope()
        if getattr(timer, "name", "") not in ("cuda_event", "cuda_graph"):
            yield scope
            return
        from pytest_tesserabench.telemetry import Telemetry

        probe = Telemetry()
        probe.start(getattr(timer.device, "index", None) or 0)
        try:
            yield scope
        finally:
            scope.result = probe.stop(scope.calls)
            if scope.result and scope.result.get("warning"):
                warnings.warn(scope.result["warning"], stacklevel=1)

    def analyse_kernels(self, launches: list, *, record_id: str) -> list[dict]:
        """Static analysis of the captured kernels for each target arch; never fails a benchmark."""
        if not launches:
            return []
        from pytest_tesserabench.inspect import analyse_launches, default_archs

        cache = self.cache_dir / "inspect" if self.cache_dir else None
        try:
            return analyse_launches(
                launches, archs=self.settings.arch or default_archs(), cache_dir=cache, dump_dir=self.settings.ir_dump
            )
        except Exception as exc:  # analysis is a report, not a precondition for measuring
            warnings.warn(f"static kernel analysis failed for {record_id}: {type(exc).__name__}: {exc}", stacklevel=1)
            return []

    def roofline(self, record: dict, storage: str | None) -> dict | None:
        """The record's roofline block, where this machine's peaks are known (GPU timers only)."""
        if record["timer"] not in ("cuda_event", "cuda_graph") or not (record["flops"] or record["bytes"]):
            return None
        from pytest_tesserabench import roofline

        if not self._peaks_resolved:
            self._peaks_resolved = True
            if self.settings.peaks == "measure" and self.cache_dir is not None:
                with self.device_lock():
                    self._peaks = roofline.measure_peaks(self.cache_dir)
            else:
                self._peaks = roofline.peaks_for(self.machine_info)
        if self._peaks is None:
            return None
        try:
            return roofline.roofline(
                record["flops"], record["bytes"], record["stats"]["median_ms"], self._peaks, storage=storage or "fp32"
            )
        except roofline.RooflineError:  # e.g. no fp8 peak on this device: no roofline, no failure
            return None

    def time_canary(self) -> None:
        from pytest_tesserabench.canary import measure_canary

        with self.device_lock():
            self.canary_ms.extend(measure_canary())

    # -- baselines and the gate ------------------------------------------------------------
    @property
    def machine_key(self) -> str:
        from pytest_tesserabench import machine

        return machine.machine_key(self.machine_info)

    def check_baselines(self) -> str | None:
        """Load the --bench-compare baseline and check the --bench-save file before measuring.

        Raises BaselineError for a bad file (named in the message). Returns a warning when there
        is no baseline to compare with on this machine.
        """
        from pytest_tesserabench import baseline

        settings = self.settings
        if settings.save:
            # A corrupt or foreign file must stop the run now, not after minutes of measuring.
            path = baseline.baseline_path(settings.bench_dir, settings.save, self.machine_key)
            baseline.load_baseline(path, machine_key=self.machine_key)
        if not settings.compare:
            return None
        self.baseline_path = baseline.baseline_path(settings.bench_dir, settings.compare, self.machine_key)
        self.baseline = baseline.load_baseline(self.baseline_path, machine_key=self.machine_key)
        if self.baseline is None:
            return (
                f"--bench-compare={settings.compare}: no baseline for this machine ({self.machine_key}) "
                f"at {self.baseline_path}; nothing is gated. Record one with "
                f"`pytest --bench-save={settings.compare}` on this machine (three runs make a useful history)"
            )
        return None

    def count_compared(self, nodeids: list[str]) -> None:
        """m of the alpha/m correction: the baseline's benchmarks whose tests this session runs."""
        if self.baseline is None:
            return
        selected = set(nodeids)
        self.n_compared = sum(1 for test in _baseline_tests(self.baseline).values() if test in selected)

    @functools.cached_property
    def gate_config(self):
        from pytest_tesserabench import gate

        return gate.GateConfig(
            alpha=self.settings.alpha,
            threshold=self.settings.threshold,
            normalize_by_canary=self.settings.canary_normalize,
        )

    @functools.cached_property
    def baseline_priors(self) -> dict[str, float]:
        """The gate's per-benchmark drift priors: a function of the baseline alone, so computed
        once per session rather than once per test."""
        from pytest_tesserabench import gate

        return gate.baseline_priors(self.baseline["runs"], self.gate_config.between_run_floor)

    def judge(self, records: list[dict], threshold: float) -> dict:
        """Verdicts for one test's records against the baseline (id -> Verdict)."""
        from pytest_tesserabench import gate

        candidate = {"canary_ms": self.canary_ms, "benchmarks": {r["id"]: r for r in records}}
        verdicts = gate.compare_runs(
            [candidate],
            self.baseline["runs"],
            self.gate_config,
            n_compared=max(self.n_compared, len(records)),
            thresholds={r["id"]: threshold for r in records},
            priors=self.baseline_priors,
        )
        return {i: v for i, v in verdicts.items() if i in candidate["benchmarks"]}

    def comparison_verdicts(self) -> dict:
        """All verdicts of the session (controller): those made per test, plus MISSING ones."""
        from pytest_tesserabench.gate import Verdict

        verdicts = {}
        for record_id, record in self.records.items():
            if record.get("verdict"):
                data = dict(record["verdict"])
                data["ci"] = tuple(data["ci"]) if data.get("ci") else None
                data["reasons"], data["notes"] = tuple(data.get("reasons", ())), tuple(data.get("notes", ()))
                verdicts[record_id] = Verdict(**data)
        for record_id, test in _baseline_tests(self.baseline).items() if self.baseline else ():
            if record_id not in self.records and test in self.run_nodeids:
                verdicts[record_id] = Verdict(
                    id=record_id, status="MISSING", notes=("in the baseline; its test ran without measuring it",)
                )
        return verdicts

    def not_run_count(self) -> int:
        """Baseline benchmarks whose tests did not run at all (deselected, or deleted)."""
        if self.baseline is None:
            return 0
        return sum(1 for test in _baseline_tests(self.baseline).values() if test not in self.run_nodeids)

    def save_baseline(self) -> tuple[Path, int]:
        """Append the passed tests' records to the --bench-save baseline; (path, records saved)."""
        from pytest_tesserabench import baseline
        from pytest_tesserabench.report.json_report import finite

        passed = {i: r for i, r in self.records.items() if r.get("outcome") == "passed"}
        if not passed:
            return baseline.baseline_path(self.settings.bench_dir, self.settings.save, self.machine_key), 0
        run = finite(self.run_document(with_samples=False, records=passed))
        for record in run["benchmarks"].values():
            record.pop("verdict", None)  # a verdict belongs to a comparison, not to the history
        path = baseline.save_run(
            self.settings.bench_dir, self.settings.save, self.machine_key, run, history=self.settings.history
        )
        return path, len(passed)

    # -- the run as a file -------------------------------------------------------------------
    def run_document(self, *, with_samples: bool, records: dict[str, dict] | None = None) -> dict:
        """The run in the schema of DESIGN section 6."""
        from pytest_tesserabench.report.json_report import run_document

        return run_document(self, with_samples=with_samples, records=records)


def _baseline_tests(baseline: dict) -> dict[str, str]:
    """Record id -> the node id of its test, for every benchmark of a baseline."""
    return {
        record_id: record.get("nodeid") or record_id
        for run in baseline["runs"]
        for record_id, record in run.get("benchmarks", {}).items()
    }
