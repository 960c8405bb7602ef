"""``BenchSession``: the one object that owns a pytest session's benchmarking state.

It lives on ``config.stash``; the hooks in plugin.py and the ``Bench`` fixture talk to it. It
knows the settings, collects the records (on the xdist controller: the records its workers sent
back), and reaches the optional parts — kernel capture and static analysis, telemetry, roofline —
lazily, so that a session that measures nothing imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import sys
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_tesserabench.options import Settings

# One lock for the whole machine: a CPU benchmark on one worker disturbs a GPU one on another
# (launch latency, memory bandwidth), so measured sections never overlap.
LOCK_PATH = Path(tempfile.gettempdir()) / "tesserabench-measure.lock"


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
        self.outcomes: dict[str, str] = {}  # nodeid -> "passed" | "failed" | "skipped"
        self._machine_info: dict | None = None
        self._peaks: Any = None
        self._peaks_resolved = False

    # -- results -----------------------------------------------------------------------------
    def add_records(self, records: list[dict]) -> None:
        for record in records:
            self.records[record["id"]] = record

    # -- the machine ------------------------------------------------------------------------
    @property
    def machine_info(self) -> dict:
        if self._machine_info is None:
            from pytest_tesserabench import machine

            self._machine_info = machine.machine_info()
        return self._machine_info

    def default_archs(self) -> tuple[str, ...]:
        if self.settings.arch:
            return self.settings.arch
        from pytest_tesserabench import machine

        capability = machine.cuda_capability()
        return ("sm_%d%d" % capability,) if capability else ("sm_90",)

    # -- measuring -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def device_lock(self):
        from filelock import FileLock

        with FileLock(str(LOCK_PATH)):
            yield

    @contextlib.contextmanager
    def capture_kernels(self):
        """Record the Triton kernels launched inside the block (empty if triton is not in use)."""
        if "triton" not in sys.modules:
            yield []
            return
        try:
            from pytest_tesserabench.inspect import capture_launches
        except ImportError:  # static analysis not installed: measuring still works
            yield []
            return
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
        try:
            from pytest_tesserabench.inspect import analyse_launches
        except ImportError:
            return []
        cache = self.cache_dir / "inspect" if self.cache_dir else None
        try:
            return analyse_launches(launches, archs=self.default_archs(), cache_dir=cache,
                                    dump_dir=self.settings.ir_dump)
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
            self._peaks = roofline.peaks_for(self.machine_info)
        if self._peaks is None:
            return None
        try:
            return roofline.roofline(record["flops"], record["bytes"], record["stats"]["median_ms"],
                                     self._peaks, storage=storage or "fp32")
        except roofline.RooflineError:  # e.g. no fp8 peak on this device: no roofline, no failure
            return None

    # -- the run as a file -------------------------------------------------------------------
    def run_document(self, *, with_samples: bool, records: dict[str, dict] | None = None) -> dict:
        """The run in the schema of DESIGN section 6."""
        from pytest_tesserabench.report.json_report import run_document

        return run_document(self, with_samples=with_samples, records=records)
