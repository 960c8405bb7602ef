"""A/B's served processes forked from one process that imported the heavy libraries once.

Each served process is a pytest of its own, and most of its start is importing what every one of
them imports (torch alone is about 1.7 s of CPU): sixteen served processes on a 2-CPU runner spent
17-28 s starting, up to a third of an A/B run. The zygote, started once per lead with the served
processes' environment, imports those libraries (``PRELOAD``, where collecting the tests imported
them and neither tree has a module of that name), then forks a served process per request; the
child sets its environment, folder, path and output, and runs pytest as ``python -m pytest`` would.

What forking changes for the measurement: every served process shares the zygote's memory layout
(its libraries' addresses, its stack's alignment, its hash seed), on both sides alike, so that part
of a process's bias cancels in each pair instead of averaging over the processes; what a process
does after the fork (collecting its tree's tests, running them) is its own, as before. History
mode's fresh processes are not forked: each must be an independent draw of a process's bias
against runs on other days, and forked ones share the zygote's part of it.

Only a single-threaded process may fork (a lock another thread held stays held in the child): a
zygote that has more than one thread after its imports (a BLAS pool the user sized above one)
says so and the lead starts its processes the usual way; so it does where fork is not available,
and with ``TESSERABENCH_NO_FORK=1``.

This file runs as a script (the zygote) and is imported by the lead (``Zygote``); the script side
imports nothing of the package, so nothing of the plugin is imported before the child's pytest.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import runpy
import signal
import socket
import subprocess
import sys
import sysconfig
import time
from multiprocessing.connection import Connection
from pathlib import Path

# The libraries worth importing once: big, imported by kernel test suites, safe to fork after
# import (none starts a thread or touches a GPU when imported with one-thread pools).
PRELOAD = ("numpy", "scipy", "scipy.stats", "torch", "triton", "triton.language")
NO_FORK_ENV = "TESSERABENCH_NO_FORK"
START_TIMEOUT_S = 120
POLL_S = 0.02
REAP_S = 0.05  # how often the zygote reaps its children while it waits for a request
UNKNOWN_EXIT = 255  # a child whose zygote died before telling how it ended


def installation_folders() -> list[Path]:
    """Where this interpreter's installed packages live (a project's own .venv may lie inside its
    tree: what is installed there is the same for both sides, not the project's code)."""
    folders = {sys.prefix, sys.exec_prefix, *(sysconfig.get_paths()[key] for key in ("purelib", "platlib"))}
    return [Path(folder).resolve() for folder in folders]


def preload_for(
    imported: dict, trees: list[Path], relative: Path = Path(), installed: list[Path] | None = None
) -> list[str]:
    """The PRELOAD modules this session imported (``imported``: name -> module, as sys.modules)
    that neither side's code shadows: a module of that name in a folder a served process imports
    from (its working folder ``tree / relative``, its tree, the tree's src/), or one this session
    imported from inside a tree (an ini ``pythonpath``, a conftest's sys.path), unless from an
    installation folder there (``installed``, by default installation_folders(): a .venv in the
    project). A served process would import its own, and a preloaded one would measure the wrong
    code on both sides."""
    roots = [root for tree in trees for root in (tree / relative, tree, tree / "src")]
    installed = installation_folders() if installed is None else [folder.resolve() for folder in installed]

    def inside(path: Path, tree: Path) -> bool:
        return path == tree or tree in path.parents

    def shadowed(name: str) -> bool:
        top = name.split(".")[0]
        if any((root / top).exists() or (root / f"{top}.py").exists() for root in roots):
            return True
        origin = getattr(imported.get(top), "__file__", None)
        if origin is None:
            return False
        path = Path(origin).resolve()
        return any(inside(path, tree.resolve()) for tree in trees) and not any(inside(path, f) for f in installed)

    return [name for name in PRELOAD if name in imported and not shadowed(name)]


def imported_now() -> dict:
    """The PRELOAD modules imported so far (all ``preload_for`` reads of sys.modules)."""
    return {name: sys.modules[name] for name in PRELOAD if name in sys.modules}


class ForkedChild:
    """A forked served process, as ``subprocess.Popen`` is to a spawned one (the subset used): the
    zygote reaps it and writes its exit status beside its log."""

    def __init__(self, pid: int, status_path: Path, args: list[str], zygote: subprocess.Popen):
        self.pid = pid
        self.args = args
        self.returncode: int | None = None
        self._status_path = status_path
        self._zygote = zygote

    def poll(self) -> int | None:
        if self.returncode is None:
            zygote_alive = self._zygote.poll() is None  # (before the file: it writes, then may end)
            try:
                self.returncode = int(self._status_path.read_text())
            except (OSError, ValueError):
                if not zygote_alive and not _exists(self.pid):  # nobody left to say how it ended
                    self.returncode = UNKNOWN_EXIT
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout)
            time.sleep(POLL_S)
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signum)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


def _exists(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


class Zygote:
    """The lead's handle on its zygote."""

    def __init__(self, process: subprocess.Popen, connection: Connection, preloaded: list[str]):
        self.process = process
        self.connection = connection
        self.preloaded = preloaded

    @classmethod
    def start(cls, env: dict[str, str], preload: list[str], log_path: Path) -> tuple[Zygote | None, str]:
        """The zygote, and what it imported; or None and why served processes start the usual way."""
        if os.environ.get(NO_FORK_ENV, "") not in ("", "0"):
            return None, f"{NO_FORK_ENV} is set"
        if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
            return None, "fork is Linux-only here"
        if not preload:
            return None, "the tests import none of " + ", ".join(PRELOAD) + " from outside the two trees"
        ours, theirs = socket.socketpair()
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [sys.executable, __file__, str(theirs.fileno()), json.dumps(preload)],
                env=env,
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        theirs.close()
        connection = Connection(ours.detach())
        zygote = cls(process, connection, [])
        hello = zygote._answer(START_TIMEOUT_S)
        if hello is None:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            zygote.close()
            return None, "it did not start: " + (" / ".join(tail) or "no output")
        if hello["threads"] > 1:
            zygote.close()
            from pytest_tesserabench.machine.threads import POOLS

            sized = [f"{pool}={env[pool]}" for pool in POOLS if env.get(pool, "1") != "1"]
            pools = ", ".join(sized) or "a thread pool above one"
            return None, f"the process to fork them from had {hello['threads']} threads after its imports: {pools}"
        zygote.preloaded = list(hello["preloaded"])
        return zygote, ""

    def fork(self, args: list[str], env: dict[str, str], cwd: Path, log_path: Path) -> ForkedChild:
        """A served process: ``python -m pytest ARGS`` in ``cwd`` with ``env``, output to ``log_path``."""
        status_path = log_path.with_name(log_path.name + ".exit")
        request = {"op": "fork", "args": args, "env": env, "cwd": str(cwd), "log": str(log_path)}
        request["status"] = str(status_path)
        try:
            self.connection.send(request)
        except OSError as exc:
            raise OSError(f"the zygote is gone: {exc}") from None
        answer = self._answer(START_TIMEOUT_S)
        if answer is None:
            raise OSError("the zygote did not fork")
        return ForkedChild(answer["pid"], status_path, ["pytest", *args], self.process)

    def _answer(self, timeout: float) -> dict | None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if self.connection.poll(0.2):
                    return self.connection.recv()
            except (EOFError, OSError):
                return None
            if self.process.poll() is not None:
                return None
        return None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.connection.send({"op": "quit"})
        self.connection.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


# -- the zygote itself (run as a script) ---------------------------------------------------------
def _die_with_parent() -> None:
    """SIGKILL when the lead dies (PR_SET_PDEATHSIG); its children watch the lead themselves."""
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None).prctl(1, signal.SIGKILL, 0, 0, 0)


def _reap(statuses: dict[int, str]) -> None:
    """Every child that ended, its exit status written where its lead reads it (atomically)."""
    while statuses:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        path = statuses.pop(pid, None)
        if path is not None:
            with contextlib.suppress(OSError):
                with open(path + ".tmp", "w") as out:
                    out.write(str(os.waitstatus_to_exitcode(status)))
                os.replace(path + ".tmp", path)


def _become(request: dict, base_path: list[str]) -> None:
    """In the child: the served process ``python -m pytest`` would have started. Never returns."""
    # SIGINT stays ignored, as in the zygote: Ctrl-C is the lead's to handle (serve.py).
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    extra = [p for p in request["env"].get("PYTHONPATH", "").split(os.pathsep) if p]
    sys.path[:] = [request["cwd"], *extra, *base_path]
    sys.argv = ["pytest", *request["args"]]
    importlib.invalidate_caches()
    runpy.run_module("pytest", run_name="__main__", alter_sys=True)  # raises SystemExit
    raise SystemExit(0)


def main() -> None:
    connection = Connection(int(sys.argv[1]))
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the lead's to handle
    _die_with_parent()
    base_path = sys.path[1:]  # less this file's folder, which `python -m pytest` would not have
    preloaded = []
    for name in json.loads(sys.argv[2]):
        try:
            importlib.import_module(name)
            preloaded.append(name)
        except Exception as exc:  # the child imports it itself, and says what went wrong there
            print(f"zygote: {name} did not import: {exc!r}", flush=True)
    threads = len(os.listdir("/proc/self/task"))
    connection.send({"preloaded": preloaded, "threads": threads})
    if threads > 1:
        return
    statuses: dict[int, str] = {}  # pid -> where its exit status goes
    while True:
        try:
            while not connection.poll(REAP_S):
                _reap(statuses)
            request = connection.recv()
        except (EOFError, OSError):
            return
        if request["op"] != "fork":
            return
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            connection.close()
            _become(request, base_path)
        statuses[pid] = request["status"]
        connection.send({"pid": pid})


if __name__ == "__main__":
    main()
    # Every child is on its own now; tearing down the preloaded libraries (torch's exit handlers)
    # would only make the lead's close wait.
    sys.stdout.flush()
    os._exit(0)
