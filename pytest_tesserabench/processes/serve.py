"""A served process of ``--bench-ab``: this pytest runs in one side's tree (REF's worktree or the
working tree), collects the same test files, tells the lead which tests it has, and then runs one
test at a time on request. Inside a test, each ``bench()`` call makes its first call and says it
has reached the call; it warms up when the lead says so (one process at a time), then measures
blocks of rounds when asked, until the lead says done (or skip, or end: the lead's test is over).
When the test ends, its outcome and records go back.

A served process measures without the device lock: the lead holds it while it interleaves.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
from multiprocessing.connection import Client

import pytest

from pytest_tesserabench.crash import crash_line
from pytest_tesserabench.machine.cpu_turns import start_on_cpu
from pytest_tesserabench.measure import canary, sampling
from pytest_tesserabench.measure.time_limit import paused
from pytest_tesserabench.processes.lead_bound import die_with_lead
from pytest_tesserabench.processes.served import AUTHKEY_ENV, REFERENCE_ONLY_ENV


def release_device_memory() -> None:
    """Give the GPU memory torch's caching allocator still holds for this test back to the device.
    A served process waits between tests while the other processes (the session's, the other
    side's) run theirs: memory it keeps cached is memory they cannot have, and a suite's largest
    test would need it two or three times over."""
    torch = sys.modules.get("torch")  # (never imported here for this: a CPU-only suite needs no torch)
    cuda = getattr(torch, "cuda", None)
    if cuda is not None and cuda.is_available() and cuda.is_initialized():
        cuda.empty_cache()


def _skip_reason(report: pytest.TestReport) -> str | None:
    longrepr = report.longrepr  # (path, line, "Skipped: why") for a skip
    return str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else None


class ServedTest:
    def __init__(self) -> None:
        self.ended = False  # the candidate's test is over: no more calls are measured
        self.unpaired: list[str | None] = []
        self.reports: list[pytest.TestReport] = []


class ServeLoop:
    NAME = "tesserabench-ab-serve"

    def __init__(self, address: str, bench_key):
        die_with_lead()  # before collection, which may take long: a killed lead leaves nothing running
        # Ctrl-C reaches every process of the terminal's foreground group: the lead stops this one
        # (a closed connection, then SIGTERM). Ending its own session here would only cost: every
        # served process at once running the summaries of every plugin, seconds on a small machine.
        with contextlib.suppress(ValueError):  # (not the main thread)
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        self.address = address
        self.bench_key = bench_key
        self.connection = None
        self.collect_errors: list[str] = []
        # Test files the working tree deleted, collected here only to list their tests MISSING:
        # one that no longer collects at REF says nothing (it cannot be compared either way).
        self.reference_only = tuple(filter(None, os.environ.get(REFERENCE_ONLY_ENV, "").split(os.pathsep)))
        self.test: ServedTest | None = None

    # -- pytest ------------------------------------------------------------------------------------
    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        if report.failed and report.nodeid.split("::", 1)[0] not in self.reference_only:
            self.collect_errors.append(f"{report.nodeid or 'collection'}: {crash_line(report)}")

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if self.test is not None:
            self.test.reports.append(report)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> bool:
        address = "\0" + self.address[1:] if self.address.startswith("@") else self.address  # (served.py)
        self.connection = Client(address, family="AF_UNIX", authkey=bytes.fromhex(os.environ[AUTHKEY_ENV]))
        error = "; ".join(self.collect_errors[:3]) or None
        benchmarks = [item.nodeid for item in session.items if "bench" in getattr(item, "fixturenames", ())]
        self.connection.send(
            {
                "op": "collected",
                "nodeids": [item.nodeid for item in session.items],
                "benchmarks": benchmarks,
                "error": error,
            }
        )
        items = {item.nodeid: item for item in session.items}
        if error is not None:
            self.connection.close()
            return True  # the session ends as pytest ends it: its output tells the lead why
        while True:
            message = self._receive()
            if message["op"] == "run":
                self._run(items.get(message["nodeid"]))

    def _run(self, item) -> None:
        if item is None:
            self._send({"op": "test_done", "outcome": "absent"})
            return
        self.test = test = ServedTest()
        # nextitem=None: every fixture is torn down after the test, so any test can come next.
        item.ihook.pytest_runtest_protocol(item=item, nextitem=None)
        self.test = None
        release_device_memory()
        failed = [r for r in test.reports if r.failed]
        skipped = [r for r in test.reports if r.skipped]
        error = crash_line(failed[0]) if failed else _skip_reason(skipped[0]) if skipped else None
        fixture = item.stash.get(self.bench_key, None)
        records = [record.to_json(samples=False) for record in fixture.records.values()] if fixture else []
        self._send(
            {
                "op": "test_done",
                "outcome": "failed" if failed else "skipped" if skipped else "passed",
                "error": error,
                "records": records,
                "unpaired": test.unpaired,
            }
        )

    # -- the lead -----------------------------------------------------------------------------------
    def _receive(self) -> dict:
        """The lead's next message. A lead that said quit, or closed, wants nothing more from this
        process, mid-test or not (Ctrl-C: its session is over): it ends here."""
        try:
            message = self.connection.recv()
        except (EOFError, OSError):
            _exit_now()
        if message["op"] == "quit":
            _exit_now()
        return message

    def _send(self, message: dict) -> None:
        try:
            self.connection.send(message)
        except OSError:  # the lead closed (see _receive)
            _exit_now()

    # -- the measurer ------------------------------------------------------------------------------
    def measure(self, timer, budget: sampling.Budget, *, name: str | None, threshold: float, on_round=None, ranks=None):
        __tracebackhide__ = True  # a user's error shows in their code, not in the plugin's frames
        measurement = sampling.Measurement(timer=timer.name)
        test = self.test
        if test is None:  # not a test the lead asked for (cannot happen in serve mode)
            return measurement, None
        if not test.ended and self.connection.poll(0):  # the lead's test ended meanwhile
            test.ended = self._receive()["op"] == "end"
        if test.ended:
            test.unpaired.append(name)
            return measurement, None
        self._send({"op": "reached", "name": name, "timer": timer.name})
        previous = os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None
        plan = None
        try:
            while True:
                with paused():  # (waiting for the lead is not this call running: --bench-timeout)
                    message = self._receive()
                op = message["op"]
                if op in ("warm", "block"):
                    _pin(message.get("cpu"))  # the lead's CPU: every process measured on one
                if op == "block" and message.get("turn") is not None:
                    start_on_cpu(message["turn"], timer.name)  # a fresh process's blocks, as the session's passes
                if op == "warm":
                    share = message.get("share", 1.0)
                    shared = dataclasses.replace(budget, max_time=budget.max_time * share)
                    like = message.get("like")
                    plan = (
                        sampling.warm_up_like(timer, shared, sampling.Plan(**like))
                        if like
                        else sampling.warm_up(timer, shared)
                    )
                    measurement = sampling.start_measurement(timer, plan)
                    self._send({"op": "plan", "plan": dataclasses.asdict(plan)})
                    continue
                if op == "block":
                    first, waited = len(measurement.samples_ms), measurement.run_queue_wait_s
                    rounds = [sampling.take_round(timer, plan, measurement) for _ in range(message["rounds"])]
                    samples = measurement.samples_ms[first:]
                    waited = measurement.run_queue_wait_s - waited
                    answer = {"op": "rounds", "rounds_ms": rounds, "samples_ms": samples, "run_queue_wait_s": waited}
                    if message.get("memory") and timer.name == "cpu":
                        answer["memory_canary"] = canary.measure_memory_canary()
                    self._send(answer)
                    continue
                if op in ("skip", "end"):
                    test.unpaired.append(name)
                    test.ended = op == "end"
                break  # done, skip or end
        finally:
            if previous is not None:
                os.sched_setaffinity(0, previous)
        return measurement, None


def _pin(cpu: int | None) -> None:
    if cpu is not None and hasattr(os, "sched_setaffinity"):
        try:
            os.sched_setaffinity(0, {cpu})
        except OSError:
            pass  # not allowed here: measured where the scheduler puts it


def _exit_now() -> None:
    """End the process without ending its session. Every test's records and outcome went to the
    lead as it ended, and every fixture was torn down after its test, so nothing is left to do; what
    the end of a session would do can only cost (other plugins' terminal summaries, seconds per
    process while every served process ends at once) or harm (the project's --junitxml or cache
    written by a process that is not the user's session)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
