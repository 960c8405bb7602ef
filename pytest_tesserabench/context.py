"""What describes a run as a whole: the machine, the commit, when it started, and the canary."""

from __future__ import annotations

import datetime as _dt
import functools
import math
import statistics
import subprocess
from pathlib import Path

from pytest_tesserabench.machine import device as machine
from pytest_tesserabench.record.results import BenchRecord, RunDocument


class RunContext:
    def __init__(self, rootdir: Path):
        self.rootdir = rootdir
        self.started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        self.canary_ms: list[float] = []
        self.distributed: dict | None = None  # world size, backend... of a torchrun run

    @functools.cached_property
    def machine_info(self) -> dict:
        return {**machine.machine_info(), **(self.distributed or {})}

    @functools.cached_property
    def machine_key(self) -> str:
        return machine.machine_key(self.machine_info)

    @functools.cached_property
    def commit(self) -> dict:
        """sha, branch and dirty flag of the checkout (asked once: --bench-json and --bench-save share it)."""
        return git_commit_info(self.rootdir)

    def time_canary(self, lock) -> None:
        """Time the canary workload once more, under ``lock`` like any measurement."""
        # the canary and its timer (4 modules, ~3-5 ms; numpy once it runs): not in a pytest run without --bench
        from pytest_tesserabench.measure.canary import measure_canary

        with lock():
            self.canary_ms.extend(measure_canary())

    def log_canary(self) -> float | None:
        """This run's canary (log of its median), or None before it was timed."""

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


def git_commit_info(cwd: Path) -> dict:
    """{"sha", "branch", "dirty"} of the git checkout at ``cwd``; None values without git."""

    def git(*args: str) -> str | None:
        try:
            result = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError):
            return None
        return result.stdout.strip() if result.returncode == 0 else None

    sha = git("rev-parse", "HEAD")
    if sha is None:
        return {"sha": None, "branch": None, "dirty": None}
    branch = git("rev-parse", "--abbrev-ref", "HEAD")
    status = git("status", "--porcelain", "--untracked-files=no")
    return {
        "sha": sha,
        "branch": None if branch in (None, "HEAD") else branch,
        "dirty": None if status is None else bool(status),
    }
