"""What describes a run as a whole: the machine, the commit, when it started, and the canary."""

from __future__ import annotations

import datetime as _dt
import functools
from pathlib import Path

from pytest_tesserabench.results import BenchRecord, RunDocument


class RunContext:
    def __init__(self, rootdir: Path):
        self.rootdir = rootdir
        self.started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.canary_ms: list[float] = []
        self.distributed: dict | None = None  # world size, backend... of a torchrun run

    @functools.cached_property
    def machine_info(self) -> dict:
        from pytest_tesserabench import machine

        return {**machine.machine_info(), **(self.distributed or {})}

    @functools.cached_property
    def machine_key(self) -> str:
        from pytest_tesserabench import machine

        return machine.machine_key(self.machine_info)

    @functools.cached_property
    def commit(self) -> dict:
        """sha, branch and dirty flag of the checkout (asked once: --bench-json and --bench-save share it)."""
        from pytest_tesserabench.baseline import git_commit_info

        return git_commit_info(self.rootdir)

    def time_canary(self, lock) -> None:
        """Time the canary workload once more, under ``lock`` like any measurement."""
        from pytest_tesserabench.canary import measure_canary

        with lock():
            self.canary_ms.extend(measure_canary())

    def log_canary(self) -> float | None:
        """This run's canary (log of its median), or None before it was timed."""
        import math
        import statistics

        positive = [c for c in self.canary_ms if c > 0]
        return math.log(statistics.median(positive)) if positive else None

    def document(self, records: dict[str, BenchRecord], *, with_commit: bool = True) -> RunDocument:
        """The run as a document, from values: the records given, this run's description."""
        return RunDocument(
            benchmarks=dict(records),
            machine=self.machine_info,
            commit=self.commit if with_commit else {},
            started=self.started,
            canary_ms=list(self.canary_ms),
            measured_order=list(records),  # (records come in the order their measurements ended)
        )
