"""The A side's handle on the reference process: a pytest run in REF's worktree that collects the
same test files and runs one test at a time on request, measuring blocks of rounds when asked
(``serve.py`` is its other end). Messages are plain dicts over an authenticated Unix socket
(``multiprocessing.connection``)."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Listener
from pathlib import Path

from pytest_tesserabench.ab.worktree import ABError, Reference

AUTHKEY_ENV = "TESSERABENCH_AB_AUTHKEY"
CACHE_ENV = "TESSERABENCH_AB_CACHE"
START_TIMEOUT_S = 600  # collection of the reference's tests (imports, conftest)
TEST_TIMEOUT_S = 1800  # a test's set-up and first calls (compilation) on the reference side
BLOCK_TIMEOUT_S = 600


@dataclass
class Ready:
    """The reference reached a ``bench()`` call, warmed up, and waits for blocks."""

    name: str | None
    timer: str


@dataclass
class TestDone:
    """The reference finished the test: its outcome, its records, the calls never paired."""

    outcome: str  # passed / failed / skipped / absent (no such test at REF)
    error: str | None = None
    records: list[dict] = field(default_factory=list)
    unpaired: list[str | None] = field(default_factory=list)


class ReferenceProcess:
    def __init__(
        self, reference: Reference, *, cwd: Path, test_files: list[str], pytest_args: list[str], cache_dir: Path | None
    ):
        self.reference = reference
        self.cwd = cwd
        self.test_files = test_files
        self.pytest_args = pytest_args
        self.cache_dir = cache_dir
        self.process: subprocess.Popen | None = None
        self.connection = None
        self.nodeids: set[str] = set()
        self._folder = Path(tempfile.mkdtemp(prefix="tesserabench-ab-"))
        self.log_path = self._folder / "reference.log"

    # -- life cycle --------------------------------------------------------------------------------
    def start(self) -> None:
        authkey = os.urandom(16)
        address = str(self._folder / "socket")
        listener = Listener(address, family="AF_UNIX", authkey=authkey)
        env = dict(os.environ)
        env[AUTHKEY_ENV] = authkey.hex()
        if self.cache_dir is not None:
            env[CACHE_ENV] = str(self.cache_dir)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [*self._python_path(), env.get("PYTHONPATH")]))
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "--bench", f"--bench-ab-serve={address}"]
        if importlib.util.find_spec("xdist") is not None:
            command += ["-n", "0"]  # one process on the reference side, whatever addopts say
        command += [*self.pytest_args, *self.test_files]
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child writes to it until it exits
        self.process = subprocess.Popen(command, cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        accepted: list = []
        thread = threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True)
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while thread.is_alive():
            thread.join(0.2)
            if self.process.poll() is not None and not accepted:
                raise ABError(
                    f"--bench-ab: the reference side ({self._where()}) stopped before it started: {self.tail()}"
                )
            if time.monotonic() > deadline:
                self.close()
                raise ABError(f"--bench-ab: the reference side ({self._where()}) did not start in {START_TIMEOUT_S} s")
        listener.close()
        self.connection = accepted[0]
        hello = self._receive(START_TIMEOUT_S)
        if hello.get("error"):
            self.close()
            where = f"--bench-ab={self.reference.ref}: the tests do not collect at {self.reference.sha[:10]}"
            raise ABError(f"{where}: {hello['error']}")
        self.nodeids = set(hello.get("nodeids", ()))

    def _python_path(self) -> list[str]:
        # The plugin is the instrument: this one, even where REF has its own copy. The code under
        # test is REF's: its worktree (and src/ layout) comes next.
        package = Path(__file__).resolve().parents[1]
        shim = self._folder / "plugin"
        shim.mkdir(exist_ok=True)
        link = shim / package.name
        if not link.exists():
            link.symlink_to(package, target_is_directory=True)
        paths = [str(shim), str(self.reference.path)]
        if (self.reference.path / "src").is_dir():
            paths.append(str(self.reference.path / "src"))
        return paths

    def close(self) -> None:
        if self.connection is not None:
            try:
                self.connection.send({"op": "quit"})
            except OSError:
                pass
            self.connection.close()
            self.connection = None
        if self.process is not None and self.process.poll() is None:
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self._folder, ignore_errors=True)

    def _where(self) -> str:
        return f"{self.reference.ref} at {self.reference.sha[:10]}"

    def tail(self, lines: int = 15) -> str:
        try:
            text = self.log_path.read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no output)"
        return "\n".join(text[-lines:]) or "(no output)"

    # -- messages ----------------------------------------------------------------------------------
    def _send(self, message: dict) -> None:
        try:
            self.connection.send(message)
        except OSError as exc:
            raise ABError(
                f"--bench-ab: lost the reference side ({self._where()}): {exc}; its output:\n{self.tail()}"
            ) from None

    def _receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.connection.poll(0.2):
                    return self.connection.recv()
            except (EOFError, OSError):
                pass
            else:
                if self.process.poll() is None and time.monotonic() < deadline:
                    continue
            if self.process.poll() is not None:
                raise ABError(f"--bench-ab: the reference side ({self._where()}) exited; its output:\n{self.tail()}")
            raise ABError(f"--bench-ab: the reference side ({self._where()}) did not answer in {timeout:.0f} s")

    def run_test(self, nodeid: str) -> bool:
        """Start the same test on the reference side; False when REF has no such test."""
        if nodeid not in self.nodeids:
            return False
        self._send({"op": "run", "nodeid": nodeid})
        return True

    def next_call(self) -> Ready | TestDone:
        message = self._receive(TEST_TIMEOUT_S)
        if message["op"] == "ready":
            return Ready(name=message["name"], timer=message["timer"])
        return TestDone(**{k: v for k, v in message.items() if k != "op"})

    def block(self, rounds: int, cpu: int | None = None) -> list[float]:
        self._send({"op": "block", "rounds": rounds, "cpu": cpu})
        return list(self._receive(BLOCK_TIMEOUT_S)["rounds_ms"])

    def done(self) -> None:
        """This bench() call is measured: the reference side goes on with the test."""
        self._send({"op": "done"})

    def skip(self) -> None:
        """The reference's call has no counterpart here: let it go unmeasured."""
        self._send({"op": "skip"})

    def end_test(self) -> TestDone:
        """The candidate's test is over: the reference finishes its own, unmeasured from here (a
        call it is waiting in returns on "end"; later calls see the test ended and do not ask)."""
        self._send({"op": "end"})
        while True:
            message = self.next_call()
            if isinstance(message, TestDone):
                return message
