"""The lead's handle on a served process: a pytest run in one side's tree (REF's worktree, or the
working tree) that collects the same test files and runs one test at a time on request, warming up
and measuring blocks of rounds when asked (``serve.py`` is its other end). Both sides are served
processes born the same way, so neither side is "the process that ran the session". Messages are
plain dicts over an authenticated Unix socket (``multiprocessing.connection``)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import secrets
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from multiprocessing.connection import Listener
from pathlib import Path

from pytest_tesserabench.machine import threads
from pytest_tesserabench.measure.sampling import Plan
from pytest_tesserabench.measure.time_limit import ab_waits_s
from pytest_tesserabench.processes import leftovers
from pytest_tesserabench.processes.lead_bound import lead_environment


class ProcessError(Exception):
    """A served process cannot start, died, or answered out of turn; the message names the culprit
    and the fix."""


AUTHKEY_ENV = "TESSERABENCH_AB_AUTHKEY"
CACHE_ENV = "TESSERABENCH_AB_CACHE"
REFERENCE_ONLY_ENV = "TESSERABENCH_AB_REFERENCE_ONLY"  # files collected only to list them MISSING
PAD_ENV, PAD_MAX = "TESSERABENCH_AB_PAD", 4096  # bytes: a page, every stack alignment
THREAD_POOLS = threads.POOLS
START_TIMEOUT_S = 600  # collection of the side's tests (imports, conftest)
TEST_TIMEOUT_S = 1800  # a test's set-up and first calls (compilation) in a served process
BLOCK_TIMEOUT_S = 600
QUIT_PATIENCE_S = 2  # for processes asked to quit to end their sessions (between tests they do at once)
QUIT_GRACE_S = 30  # then SIGTERM to those still in a test, and this long from the start before SIGKILL


@dataclass
class Reached:
    """The served test reached a ``bench()`` call (first call made) and waits to warm up."""

    name: str | None
    timer: str


@dataclass
class Block:
    rounds_ms: list[float]
    samples_ms: list[float]
    run_queue_wait_s: float = 0.0  # left out of the samples (see run_queue)
    memory_canary: float | None = None  # the memory canary right after it, where asked for


@dataclass
class TestDone:
    """The served test finished: its outcome, its records, the calls never paired."""

    outcome: str  # passed / failed / skipped / absent (no such test at REF)
    error: str | None = None
    records: list[dict] = field(default_factory=list)
    unpaired: list[str | None] = field(default_factory=list)


def served_environment(pinned: bool) -> dict[str, str]:
    """The environment every served process (and A/B's zygote) starts with: this one's, the lead's
    pid to end with it (lead_bound.py), and one-thread pools where it measures pinned."""
    env = dict(os.environ)
    env.update(lead_environment())
    # Pinned to one CPU while measuring, a BLAS or OpenMP pool sized to the machine spins its
    # threads against each other on that CPU: numpy's matmul measured 0.33 ms alone and up to
    # 27 ms in a served process. One thread is what a pinned process can run (unless the user
    # sized the pools). Unpinned (--bench-confirm), the pools stay as in the session that asked.
    if pinned:
        for pool in THREAD_POOLS:
            env.setdefault(pool, "1")
    return env


def measurement_args(settings) -> list[str]:
    """The session's measurement options, for a served process to measure as it would."""
    args = [
        f"--bench-max-time={settings.max_time}",
        f"--bench-min-rounds={settings.min_rounds}",
        f"--bench-warmup={settings.warmup}",
        # (a served process's waits for the lead are not counted, time_limit.paused; its blocks of the
        # settling are, which its own budget does not hold: time_limit.ab_waits_s)
        f"--bench-timeout={settings.timeout + ab_waits_s(settings) if settings.timeout else 0}",
        f"--bench-timer={settings.timer}",
        f"--bench-interpret={settings.interpret}",
    ]
    if settings.arch:
        args.append(f"--bench-arch={','.join(settings.arch)}")
    if settings.threads is not None:
        args.append(f"--bench-threads={settings.threads}")
    return args


class ServedProcess:
    def __init__(
        self,
        tree: Path,
        *,
        where: str,
        cwd: Path,
        test_files: list[str],
        pytest_args: list[str],
        cache_dir: Path | None,
        reference_only_files: list[str] = (),
        option: str = "--bench-ab",
        pinned: bool = True,
    ):
        self.tree = tree  # the side's code: first on the path after the plugin
        self.where = where  # e.g. "the reference side (main at 1a2b3c4d5e)", for messages
        self.cwd = cwd
        self.test_files = test_files
        self.reference_only_files = list(reference_only_files)  # deleted in the working tree
        self.pytest_args = pytest_args
        self.cache_dir = cache_dir
        self.option = option  # whose process it is, for messages: --bench-ab or --bench-confirm
        self.pinned = pinned  # measured pinned to one CPU (A/B); else where the scheduler puts it
        self.process: subprocess.Popen | None = None
        self.connection = None
        self._listener = None
        self._asked_to_quit = False  # told to end its session: worth waiting for
        self._ended: TestDone | None = None  # how its test ended while a measurement waited for it
        self.nodeids: set[str] = set()
        self.benchmarks: list[str] = []
        _sweep_once()
        self._folder = leftovers.make_folder()
        self.log_path = self._folder / "served.log"

    # -- life cycle --------------------------------------------------------------------------------
    def launch(self, zygote=None) -> None:
        """The process started (collecting); ``connect`` waits for it. Separate, so that several
        processes collect at once. Forked by ``zygote`` (zygote.py) where given, else a Python of
        its own."""
        authkey = os.urandom(16)
        address = self._socket_address()
        self._listener = Listener(address, family="AF_UNIX", authkey=authkey)
        env = served_environment(self.pinned)
        env[AUTHKEY_ENV] = authkey.hex()
        if self.cache_dir is not None:
            env[CACHE_ENV] = str(self.cache_dir)
        env[REFERENCE_ONLY_ENV] = os.pathsep.join(self.reference_only_files)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [*self._python_path(), env.get("PYTHONPATH")]))
        # The environment's size moves the initial stack, and with it the alignment of everything
        # the process puts there: a steady bias of several percent (Mytkowicz et al., "Producing
        # wrong data without doing anything obviously wrong!", ASPLOS 2009). The two sides' paths
        # differ in length, so their sizes would differ systematically; a random pad per process
        # makes it one more per-process draw, which the rule over process pairs averages. (A forked
        # process keeps its zygote's stack, the same on both sides.)
        env[PAD_ENV] = "x" * secrets.randbelow(PAD_MAX + 1)
        serve = f"--bench-ab-serve={address.replace(chr(0), '@', 1)}"
        args = ["-q", "-p", "no:randomly", "--bench", serve]
        if importlib.util.find_spec("xdist") is not None:
            args += ["-n", "0"]  # one process, whatever addopts say
        args += [*self.pytest_args, *self.test_files, *self.reference_only_files]
        if zygote is not None:
            try:
                self.process = zygote.fork(args, env, self.cwd, self.log_path)
                return
            except OSError as exc:
                raise ProcessError(f"{self.option}: {self.where} could not be forked: {exc}") from None
        log = open(self.log_path, "wb")  # noqa: SIM115 - the child writes to it until it exits
        command = [sys.executable, "-m", "pytest", *args]
        self.process = subprocess.Popen(command, cwd=self.cwd, env=env, stdout=log, stderr=subprocess.STDOUT)

    def _socket_address(self) -> str:
        """Where the process calls back. On Linux a name in the abstract namespace: no file to
        leave behind, and no limit of ~104 bytes on the path, which a long TMPDIR (a CI runner's,
        pytest's own under xdist) exceeds. The authkey keeps other local processes out. (Its
        leading NUL travels on the command line as '@', as ss(8) shows such names.)"""
        if sys.platform.startswith("linux"):
            return f"\0tesserabench-ab-{os.getpid()}-{secrets.token_hex(8)}"
        return str(self._folder / "socket")

    def connect(self) -> None:
        listener = self._listener
        accepted: list = []
        thread = threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True)
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while thread.is_alive():
            thread.join(0.2)
            if self.process.poll() is not None and not accepted:
                raise ProcessError(f"{self.option}: {self.where} stopped before it started: {self.tail()}")
            if time.monotonic() > deadline:
                self.close()
                raise ProcessError(f"{self.option}: {self.where} did not start in {START_TIMEOUT_S} s")
        listener.close()
        self._listener = None
        self.connection = accepted[0]
        hello = self._receive(START_TIMEOUT_S)
        if hello.get("error"):
            self.close()
            raise ProcessError(f"{self.option}: the tests do not collect in {self.where}: {hello['error']}")
        self.nodeids = set(hello.get("nodeids", ()))
        self.benchmarks = list(hello.get("benchmarks", ()))  # the tests here that use the bench fixture

    def _python_path(self) -> list[str]:
        # The plugin is the instrument: this one on both sides, even where REF has its own copy.
        # The code under test is the side's own: its tree (and src/ layout) comes next.
        package = Path(__file__).resolve().parents[1]
        shim = self._folder / "plugin"
        shim.mkdir(exist_ok=True)
        link = shim / package.name
        if not link.exists():
            link.symlink_to(package, target_is_directory=True)
        paths = [str(shim), str(self.tree)]
        if (self.tree / "src").is_dir():
            paths.append(str(self.tree / "src"))
        return paths

    def ask_to_quit(self) -> None:
        """Tell the process to end its session; ``close`` waits for it. Separate, so that several
        processes end at once instead of one after another."""
        if self.connection is not None:
            try:
                self.connection.send({"op": "quit"})
            except OSError:
                pass
            self.connection.close()
            self.connection = None
            self._asked_to_quit = True

    def wait_until(self, deadline: float) -> None:
        """Waits for the process to end, until ``deadline`` (time.monotonic()) at most."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=max(deadline - time.monotonic(), 0.0))

    def terminate(self) -> None:
        """SIGTERM, if it still runs (its folder is this process's to remove, in ``close``)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(OSError):
                self.process.terminate()

    def close(self, deadline: float | None = None) -> None:
        """Ends the process: asked to quit, waited for until ``deadline`` (time.monotonic(); by
        default QUIT_GRACE_S from now), then killed."""
        self.ask_to_quit()
        connected = self._asked_to_quit
        if self._listener is not None:
            self._listener.close()
            self._listener = None
        if deadline is None:
            deadline = time.monotonic() + QUIT_GRACE_S
        if self.process is not None and self.process.poll() is None:
            try:
                # unconnected: nothing tells it to quit
                self.process.wait(timeout=max(deadline - time.monotonic(), 0.0) if connected else 0)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        shutil.rmtree(self._folder, ignore_errors=True)

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
            raise ProcessError(f"{self.option}: lost {self.where}: {exc}; its output:\n{self.tail()}") from None

    def _receive(self, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if self.connection.poll(0.2):
                    return self.connection.recv()
            except (EOFError, OSError):
                # The connection closed: the process is exiting (it may not be reaped yet).
                raise ProcessError(
                    f"{self.option}: {self.where} {self._exited()}; its output:\n{self.tail()}"
                ) from None
            if self.process.poll() is not None:
                raise ProcessError(f"{self.option}: {self.where} {self._exited()}; its output:\n{self.tail()}")
            if time.monotonic() >= deadline:
                raise ProcessError(f"{self.option}: {self.where} did not answer in {timeout:.0f} s")

    def _exited(self) -> str:
        """How the process ended: its exit status, or its signal (a crash)."""
        try:
            code = self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            return "closed its connection and did not exit"
        return f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"

    def run_test(self, nodeid: str) -> bool:
        """Start the same test in this process; False when its tree has no such test."""
        if nodeid not in self.nodeids:
            return False
        self._ended = None
        self._send({"op": "run", "nodeid": nodeid})
        return True

    def next_call(self) -> Reached | TestDone:
        message = self._receive(TEST_TIMEOUT_S)
        if message["op"] == "reached":
            return Reached(name=message["name"], timer=message["timer"])
        return TestDone(**{k: v for k, v in message.items() if k != "op"})

    def warm_up(self, cpu: int | None, *, share: float = 1.0, like: Plan | None = None) -> Plan:
        """Warm up the reached call on ``cpu`` (one process at a time: warm-up calibrates the round
        length, which processes warming up together on one device would get wrong), sizing rounds
        for ``share`` of its ``--bench-max-time`` (a pass's share: fresh.pass_share); ``like``: a
        plan another process of this side made, taken after a short warm-up (sampling.warm_up_like)."""
        self._send({"op": "warm", "cpu": cpu, "share": share, "like": asdict(like) if like else None})
        return Plan(**self._measuring_answer(TEST_TIMEOUT_S)["plan"])

    def block(self, rounds: int, cpu: int | None = None, *, turn: int | None = None, memory: bool = False) -> Block:
        """That many rounds measured: pinned to ``cpu`` (A/B), or started on the ``turn``-th CPU
        (a fresh process's block k, as the session's pass k: machine/cpu_turns.py); ``memory``:
        the memory canary timed right after it (a CPU benchmark's, as after a session's pass)."""
        self._send({"op": "block", "rounds": rounds, "cpu": cpu, "turn": turn, "memory": memory})
        answer = self._measuring_answer(BLOCK_TIMEOUT_S)
        return Block(
            list(answer["rounds_ms"]),
            list(answer["samples_ms"]),
            float(answer.get("run_queue_wait_s", 0.0)),
            answer.get("memory_canary"),
        )

    def _measuring_answer(self, timeout: float) -> dict:
        """The answer to a warm-up or a block; ProcessError when the served test ended instead (the
        call raised, or ran past --bench-timeout there): kept for end_test, which must not wait
        for a test that is over."""
        message = self._receive(timeout)
        if message.get("op") == "test_done":
            self._ended = TestDone(**{k: v for k, v in message.items() if k != "op"})
            raise ProcessError(
                f"{self.option}: the test {self._ended.outcome} in {self.where} while measured there: "
                f"{self._ended.error}"
            )
        return message

    def done(self) -> None:
        """This bench() call is measured: the served test goes on."""
        self._send({"op": "done"})

    def skip(self) -> None:
        """The served call has no counterpart: let it go unmeasured."""
        self._send({"op": "skip"})

    def end_test(self) -> TestDone:
        """The lead's test is over: the served test finishes, unmeasured from here (a call waiting
        returns on "end"; later calls see the test ended and do not ask)."""
        if self._ended is not None:
            return self._ended
        self._send({"op": "end"})
        while True:
            message = self.next_call()
            if isinstance(message, TestDone):
                return message


_swept = False


def _sweep_once() -> None:
    """The folders of served processes whose lead was killed, removed once per lead (leftovers.py)."""
    global _swept
    if not _swept:
        _swept = True
        leftovers.sweep()


def close_all(processes, *, interrupted: bool = False) -> None:
    """Every process asked to quit first; one still running QUIT_PATIENCE_S later is inside a test
    it will not leave (a lead stopped by SIGTERM mid-test: CI kills the lead moments later), so it
    gets SIGTERM; then each is waited for until one shared deadline, and killed. They end side by
    side: stuck processes cost seconds in all, not a grace each. ``interrupted`` (Ctrl-C, or a
    SIGTERM taken as one): the lead wants nothing more from them, so SIGTERM at once."""
    for process in processes:
        process.ask_to_quit()
    start = time.monotonic()
    for process in processes:
        process.wait_until(start + (0.0 if interrupted else QUIT_PATIENCE_S))
    for process in processes:
        process.terminate()
    for process in processes:
        process.close(start + QUIT_GRACE_S)
