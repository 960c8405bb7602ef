"""What a measurement uses besides its timer: the device lock, kernel capture, telemetry, static
analysis and the roofline. The session owns one ``Instruments``; ``Bench`` uses it.

Each part is reached lazily, so a session that measures nothing imports nothing heavy.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import sys
import tempfile
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pytest_tesserabench.machine.ranks import SOLO
from pytest_tesserabench.machine.worker_gpus import lock_name
from pytest_tesserabench.options import Settings
from pytest_tesserabench.record import held_lock
from pytest_tesserabench.record.results import GPU_TIMERS

# pytest imports this module in every run, --bench or not: each instrument's module loads at its first use.
# At the top, filelock (~10 ms), the static analysis (~22 ms), the canary, roofline, profiling,
# telemetry and kernel capture (~1.5-5 ms each) would add ~50 ms to a plain pytest run.

# One lock for the whole machine: a CPU benchmark on one worker disturbs a GPU one on another
# (launch latency, memory bandwidth), so measured sections never overlap. An xdist worker given a
# GPU of its own (worker_gpus) locks only that GPU. Lock files are created world-writable so that
# several users of one machine share them.


@dataclass
class TelemetryScope:
    calls: int = 0
    result: dict | None = None


class Instruments:
    def __init__(
        self, settings: Settings, *, cache_dir: Path | None, machine_info: Callable[[], dict], gpu: str | None = None
    ):
        self.settings = settings
        self.cache_dir = cache_dir
        self._machine_info = machine_info
        self._lock_path = Path(tempfile.gettempdir()) / lock_name(gpu)
        self.ranks = SOLO  # the torch.distributed ranks measuring together (distributed.world)
        self._peaks_resolved = False
        self._peaks: Any = None  # what efficiency is measured against (table, measured or declared)
        self._roof: Any = None  # what is physically possible (table or declared, never measured)
        # The reference side of --bench-ab measures while the candidate holds the lock for both.
        self.lock_free = settings.ab_serve is not None
        # Where a line for the user goes while a test runs (pytest captures its output); the
        # session points it at the terminal.
        self.say: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True)

    # -- the lock ------------------------------------------------------------------------------
    @contextlib.contextmanager
    def device_lock(self):
        if self.lock_free:
            yield
            return
        from filelock import FileLock

        try:
            lock = FileLock(str(self._lock_path), mode=0o666)
            self._acquire(lock)
        except PermissionError:
            # Another user's lock file that this user may not open: fall back to a per-user lock
            # rather than fail every benchmark.
            shared = self._lock_path
            self._lock_path = shared.with_name(f"{shared.stem}-{os.getuid()}{shared.suffix}")
            warnings.warn(
                f"tesserabench: the shared measurement lock {shared} is not writable by this user; measuring "
                f"under {self._lock_path} instead, so another user's benchmarks may overlap with these "
                f"(make the file writable for all: chmod 666 {shared})",
                stacklevel=3,
            )
            lock = FileLock(str(self._lock_path), mode=0o666)
            self._acquire(lock)
        try:
            yield
        finally:
            held_lock.release(lock)

    def _acquire(self, lock) -> None:
        # A hung benchmark elsewhere must not make this run wait forever in silence: the wait is
        # bounded and names the holder (record/held_lock.py).
        held_lock.acquire(
            lock,
            timeout=self.settings.lock_timeout,
            say=self.say,
            what="the measurement lock",
            option="--bench-lock-timeout",
        )

    @contextlib.contextmanager
    def measurement_lock(self):
        """What a measurement holds: the device lock; under torchrun each machine's local rank 0
        takes it for the ranks of its machine (one job), and all ranks wait until every machine's
        is held (each round then starts on a barrier)."""
        ranks = self.ranks
        if ranks.size == 1:
            with self.device_lock():
                yield
            return
        with self.device_lock() if ranks.local_rank == 0 else contextlib.nullcontext():
            ranks.gather()
            yield

    def local_canary(self) -> float | None:
        """The canary's median (ms) over a few samples, taken right before a measurement when the
        run is compared (history or A/B) or saved (a baseline's runs give the comparison its
        reference): how fast the machine is at this moment. None otherwise."""
        settings = self.settings
        if not (settings.compare or settings.ab or settings.save) or settings.ab_serve:
            return None

        from pytest_tesserabench.measure import canary

        return statistics.median(canary.measure_canary(samples=canary.LOCAL_SAMPLES))

    # -- kernels -------------------------------------------------------------------------------
    @contextlib.contextmanager
    def capture_kernels(self):
        """Record the Triton kernels launched inside the block (empty if triton is not in use)."""
        if "triton" not in sys.modules:
            yield []
            return
        from pytest_tesserabench.inspect import capture_launches

        with capture_launches() as launches:
            yield launches

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

    def ncu_counters(self, nodeid: str, *, rootdir: Path, cwd: Path) -> dict:
        """Hardware counters of a test's kernels: the test re-run alone under Nsight Compute."""
        from pytest_tesserabench.machine import profiling

        return profiling.run_ncu(nodeid, ["--bench", f"--rootdir={rootdir}"], cwd=cwd)

    # -- telemetry -----------------------------------------------------------------------------
    @contextlib.contextmanager
    def telemetry(self, timer):
        scope = TelemetryScope()
        if getattr(timer, "name", "") not in GPU_TIMERS:
            yield scope
            return
        from pytest_tesserabench.machine.telemetry import Telemetry

        probe = Telemetry()
        probe.start(getattr(timer.device, "index", None) or 0)
        try:
            yield scope
        finally:
            scope.result = probe.stop(scope.calls)
            if scope.result and scope.result.get("warning"):
                warnings.warn(scope.result["warning"], stacklevel=1)

    # -- the roofline --------------------------------------------------------------------------
    def check_peaks(self) -> None:
        """Load a declared peaks file now (RooflineError names its problem) rather than mid-run."""
        if isinstance(self.settings.peaks, Path):
            self._resolve_peaks()

    def _resolve_peaks(self) -> None:
        if self._peaks_resolved:
            return
        from pytest_tesserabench.machine import roofline

        source = self.settings.peaks
        if isinstance(source, Path):
            self._peaks = self._roof = roofline.load_declared_peaks(source)
        else:
            self._roof = roofline.peaks_for(self._machine_info())
            self._peaks = self._roof
            if source == "measure" and self.cache_dir is not None:
                with self.device_lock():
                    self._peaks = roofline.measure_peaks(self.cache_dir) or self._roof
        self._peaks_resolved = True

    def _applies(self, timer: str) -> bool:
        """Datasheet peaks describe GPUs; declared ones whatever device ran (never the interpreter,
        whose speed says nothing about a device)."""
        if timer == "interpreter":
            return False
        return timer in GPU_TIMERS or isinstance(self.settings.peaks, Path)

    def roofline(self, *, timer: str, flops, nbytes, median_ms: float, storage: str | None) -> dict | None:
        """The record's roofline block, where this machine's peaks are known."""
        if not self._applies(timer) or not (flops or nbytes):
            return None
        from pytest_tesserabench.machine import roofline

        self._resolve_peaks()
        if self._peaks is None:
            return None
        try:
            return roofline.roofline(flops, nbytes, median_ms, self._peaks, storage=storage or "fp32")
        except roofline.RooflineError:  # e.g. no fp8 peak on this device: no roofline, no failure
            return None

    def impossible(self, *, timer: str, flops, nbytes, median_ms: float | None, storage: str | None) -> str | None:
        """Why a measurement cannot be true on this device (faster than its roofline), or None."""
        if not median_ms or not self._applies(timer) or not (flops or nbytes):
            return None
        from pytest_tesserabench.machine import roofline

        self._resolve_peaks()
        if self._roof is None:
            return None
        return roofline.impossible_reason(
            flops=flops,
            bytes=nbytes,
            time_ms=median_ms,
            peaks=self._roof,
            storage=storage or "fp32",
            cache_bytes=self._roof.cache_bytes if self._roof.declared else self._machine_info().get("l2_bytes"),
        )
