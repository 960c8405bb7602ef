"""The adversarial battery of issue 34, re-run on the current code: what a hostile user tries
against the plugin and the `tesserabench` command, each case in a throwaway project of its own.

    .venv/bin/python benchmarks/adversarial_battery.py            # every class (about 6-8 minutes)
    .venv/bin/python benchmarks/adversarial_battery.py --only 1,4 # some classes
    .venv/bin/python benchmarks/adversarial_battery.py --keep     # keep the case folders to look at

Classes (issue 34's findings, each since fixed):
  1  a benchmark that never returns: --bench-timeout, the measurement lock's wait, A/B, SIGKILL
  2  --bench-save while another process holds the baseline's lock
  3  leftovers of a killed lead (temp folders, A/B worktrees) swept by the next run
  4  hostile names: terminal escapes, U+202E, `|` and newlines, CSV formulas, matplotlib mathtext
  5  well-formed files with bad values: huge integers, a numeric sha, a `/` in a machine key, size
  6  outputs and run files: /dev/stdout, extra_info, bad stats, /dev/full, newer keys, FIFOs, SIGTERM
  7  `tesserabench show`: --width and invalid baseline names

Prints one line per case, `PASS|FAIL <class>.<case>: what` (a FAIL is followed by indented
lines: the command and what it printed), then a table per class; exits 0 whatever the verdicts
(it reports, it does not gate). Needs no GPU; runs one subprocess at a time, each under a hard
timeout, in $BATTERY_DIR/<case>/ (by default <temp dir>/tesserabench-battery; TMPDIR pointed
inside it, so the machine-wide locks of other sessions are never touched). Every process a case starts is ended by its pid.
"""

# ruff: noqa: E501  (the cases' messages and one-line project files read better unwrapped)
from __future__ import annotations

import argparse
import csv
import hashlib
import io
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

PY = Path(sys.executable)
TB = PY.parent / "tesserabench"
BASE = Path(os.environ.get("BATTERY_DIR", Path(tempfile.gettempdir()) / "tesserabench-battery"))
# Short measurements: the plugin's behaviour is under test, not timing.
FAST = [
    "--bench-max-time=0.05",
    "--bench-warmup=0.01",
    "--bench-min-rounds=3",
    "--bench-passes=1",
    "--bench-save-processes=0",
    "--bench-confirm=0",
]
COMMON = ["-p", "no:randomly", "--color=no"]
TRACEBACK = ("Traceback (most recent call last)", "INTERNALERROR")
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f\u0080-\u009f\u202a-\u202e\u2066-\u2069]")

CLASS_TITLES = {
    1: "a benchmark that never returns",
    2: "save while the baseline is locked",
    3: "leftovers of a killed lead",
    4: "hostile names",
    5: "well-formed files, bad values",
    6: "outputs, run files, signals",
    7: "show: width and names",
}


# ---------------------------------------------------------------------------------------------
# Infrastructure: results, projects, processes


@dataclass
class Result:
    cls: int
    case: str
    ok: bool
    what: str
    evidence: list[str] = field(default_factory=list)


RESULTS: list[Result] = []


def report(cls: int, case: str, ok: bool, what: str, evidence=()) -> None:
    result = Result(cls, case, bool(ok), what, [line for line in evidence if line is not None])
    RESULTS.append(result)
    print(f"{'PASS' if result.ok else 'FAIL'} {cls}.{case}: {what}", flush=True)
    if not result.ok:
        for line in result.evidence:
            for part in str(line).splitlines() or [""]:
                print(f"    | {part[:400]}", flush=True)


@dataclass
class Run:
    argv: list[str]
    rc: int | None
    out: str
    seconds: float
    timed_out: bool

    @property
    def cmd(self) -> str:
        return "$ " + shlex.join(self.argv) + (f"    # rc={self.rc}" if not self.timed_out else "    # TIMED OUT")

    def has_traceback(self) -> bool:
        return any(marker in self.out for marker in TRACEBACK)

    def lines(self, *needles: str, limit: int = 8) -> list[str]:
        """The output lines holding any of ``needles`` (all lines' tail when none given)."""
        lines = self.out.splitlines()
        if not needles:
            return lines[-limit:]
        picked = [line for line in lines if any(n in line for n in needles)]
        return picked[:limit]

    def evidence(self, *needles: str, limit: int = 8) -> list[str]:
        return [
            self.cmd,
            *(ascii_line(line) for line in (self.lines(*needles, limit=limit) or self.lines(limit=limit))),
        ]


def ascii_line(line: str) -> str:
    return line if not RAW_CONTROL.search(line) else ascii(line)


class Project:
    """A throwaway project: its folder, a temp folder of its own (TMPDIR) and an environment."""

    def __init__(self, name: str):
        self.dir = BASE / name
        if self.dir.exists():
            shutil.rmtree(self.dir)
        self.dir.mkdir(parents=True)
        self.tmp = BASE / f"{name}.tmp"  # outside the project: pytest must not collect what lands there
        if self.tmp.exists():
            shutil.rmtree(self.tmp)
        self.tmp.mkdir()
        self.env = {k: v for k, v in os.environ.items() if k not in ("GITHUB_STEP_SUMMARY", "PYTEST_ADDOPTS")}
        self.env.update(TMPDIR=str(self.tmp), COLUMNS="120", PYTHONDONTWRITEBYTECODE="1", OMP_NUM_THREADS="1")
        self.env["PATH"] = f"{PY.parent}{os.pathsep}{self.env.get('PATH', '')}"
        self.started: list[subprocess.Popen] = []

    def write(self, rel: str, text: str) -> Path:
        path = self.dir / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def run(self, argv, timeout: float = 120, env=None, stdout=None, cwd=None) -> Run:
        argv = [str(a) for a in argv]
        began = time.monotonic()
        proc = subprocess.Popen(
            argv,
            cwd=cwd or self.dir,
            env={**self.env, **(env or {})},
            stdin=subprocess.DEVNULL,
            stdout=stdout if stdout is not None else subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        try:
            out, _ = proc.communicate(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            kill_group(proc)
            out, _ = proc.communicate()
            timed_out = True
        text = (out or b"").decode("utf-8", "backslashreplace")
        result = Run(argv, proc.returncode, text, time.monotonic() - began, timed_out)
        with open(
            BASE / f"{self.dir.name}.log", "a", errors="backslashreplace"
        ) as log:  # every command and its output, to look at (--keep)
            log.write(f"{result.cmd}    ({result.seconds:.1f} s)\n{text}\n")
        return result

    def pytest(self, *args, timeout: float = 120, fast: bool = True, env=None, stdout=None) -> Run:
        argv = [PY, "-m", "pytest", *COMMON, *(FAST if fast else []), *args]
        return self.run(argv, timeout=timeout, env=env, stdout=stdout)

    def tb(self, *args, timeout: float = 120, env=None) -> Run:
        return self.run([TB, *args], timeout=timeout, env=env)

    def start(self, argv, log: str, env=None) -> subprocess.Popen:
        """A process left running (its output in ``log``); ended by ``stop_all``."""
        handle = open(self.dir / log, "wb")
        proc = subprocess.Popen(
            [str(a) for a in argv],
            cwd=self.dir,
            env={**self.env, **(env or {})},
            stdin=subprocess.PIPE,
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self.started.append(proc)
        return proc

    def log(self, name: str) -> str:
        try:
            return (self.dir / name).read_text(errors="backslashreplace")
        except OSError:
            return ""

    def stop_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                kill_group(proc)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    pass
        for pid in self.processes():  # what the case's processes left (their TMPDIR is ours)
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass

    def processes(self) -> list[int]:
        """Running processes (not zombies) whose environment has this project's TMPDIR: every
        process a case started, and their children."""
        needle = b"TMPDIR=" + str(self.tmp).encode() + b"\0"
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit() or int(entry.name) == os.getpid():
                continue
            try:
                if needle not in (entry / "environ").read_bytes():
                    continue
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if state != "Z":
                found.append(int(entry.name))
        return found

    def describe(self, pids) -> list[str]:
        lines = []
        for pid in pids:
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                cmd = "?"
            lines.append(f"left running: pid {pid}: {cmd[:200]}")
        return lines

    def git(self, *args) -> str:
        done = subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
            cwd=self.dir,
            capture_output=True,
            text=True,
            timeout=60,
            env=self.env,
        )
        if done.returncode:
            raise RuntimeError(f"git {args}: {done.stderr}")
        return done.stdout

    def git_init(self) -> None:
        self.git("init", "-q", "-b", "main")
        self.write(".gitignore", ".pytest_cache/\n__pycache__/\ntmp/\n*.log\nbaselines/\n*.json\n*.html\n")
        self.commit("base")

    def commit(self, message: str) -> None:
        self.git("add", "-A")
        self.git("commit", "-qm", message)

    def baseline_file(self, name: str = "main") -> Path | None:
        files = sorted((self.dir / "baselines" / name).glob("*.json"))
        return files[0] if files else None


def kill_pid(pid: int, sig=signal.SIGKILL) -> None:
    try:
        os.kill(pid, sig)
    except OSError:
        pass


def kill_group(proc: subprocess.Popen, sig=signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)  # its own session: start_new_session=True
    except OSError:
        pass


def wait_for(condition, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def wait_for_text(project: Project, log: str, text: str, seconds: float) -> bool:
    return wait_for(lambda: text in project.log(log), seconds)


def slot_lock(path: Path, tmp: Path) -> Path:
    """The lock slot of a baseline file (as record/files.py chooses it: 64 fixed files)."""
    digest = hashlib.sha256(os.path.realpath(path).encode()).digest()[:8]
    return tmp / "tesserabench-locks" / f"slot-{int.from_bytes(digest, 'big') % 64:02d}.lock"


# A process that holds a lock (plain flock, as any other program would) until its stdin closes.
FLOCK_HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.read()
"""


def hold_lock(project: Project, lock_file: Path, log: str = "holder.log") -> subprocess.Popen:
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    holder = project.start([PY, "-c", FLOCK_HOLDER, lock_file], log)
    if not wait_for_text(project, log, "held", 30):
        raise RuntimeError("the lock holder did not take the lock")
    return holder


def release(holder: subprocess.Popen) -> None:
    try:
        holder.stdin.close()
        holder.wait(timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        kill_group(holder)


def no_raw_controls(text: str) -> list[str]:
    return [ascii(line)[:200] for line in text.splitlines() if RAW_CONTROL.search(line)]


def table_rows_broken(md: str) -> list[str]:
    """Markdown table rows whose cell count differs from their table's header (a `|` or a newline
    inside a cell breaks the row); unescaped pipes counted."""
    bad, width = [], None
    for line in md.splitlines():
        if line.startswith("|"):
            cells = len(re.findall(r"(?<!\\)\|", line))
            if width is None:
                width = cells
            elif cells != width:
                bad.append(line[:200])
        else:
            width = None
    return bad


FORMULA = ("=", "+", "-", "@", "\t", "\r")


# ---------------------------------------------------------------------------------------------
# Class 1: a benchmark that never returns

HANGS = """
import threading, time

def slow_first():
    time.sleep(100000)

calls = [0]
def hang_later():
    calls[0] += 1
    if calls[0] > 20:
        threading.Event().wait()  # never set
    time.sleep(0.0005)

def bare_except_loop():
    while True:
        try:
            time.sleep(0.2)
        except:  # noqa: E722  (a polling loop's bare except, as real code has)
            pass

def test_first_call_hangs(bench):
    bench(slow_first, name="slow_first_call")

def test_hangs_in_rounds(bench):
    bench(hang_later, name="hang_in_rounds")

def test_fine(bench):
    bench(time.sleep, 0.0005, name="fine")
"""


def _hang_late_project(name: str, call: str) -> Project:
    """A project whose test_hang's call ``call`` hangs after five calls (inside the measurement
    lock), and another project (other/) with one quick benchmark."""
    p = Project(name)
    p.write(
        "test_hang.py",
        "import time\n\ncalls = [0]\ndef f():\n    calls[0] += 1\n    if calls[0] > 5:\n        time.sleep(100000)\n"
        f"    time.sleep(0.0005)\n\ndef test_hang(bench):\n    bench(f, name='{call}')\n",
    )
    p.write("other/test_other.py", "import time\n\ndef test_other(bench):\n    bench(time.sleep, 0.0005)\n")
    p.write("other/pytest.ini", "[pytest]\n")
    return p


def class_1() -> None:
    # 1.first_call / 1.in_rounds: --bench-timeout fails the hung tests, naming the call; the rest measured.
    p = Project("1-timeout")
    p.write("test_hang.py", HANGS)
    try:
        r = p.pytest("--bench", "--bench-timeout=2", "-k", "not bare", timeout=90)
        out = r.out
        report(
            1,
            "first_call_hang",
            not r.timed_out
            and "test_first_call_hangs" in out
            and re.search(r"slow_first_call.*did not return within", out)
            and "FAILED test_hang.py::test_first_call_hangs" in out,
            "a bench() whose first call never returns fails its test after --bench-timeout=2, naming the call",
            r.evidence("did not return", "FAILED", "passed", "failed"),
        )
        report(
            1,
            "hang_in_rounds",
            not r.timed_out
            and re.search(r"hang_in_rounds.*did not return within", out)
            and "FAILED test_hang.py::test_hangs_in_rounds" in out,
            "a call that hangs mid-measurement (Event().wait()) fails its test, naming the call",
            r.evidence("did not return", "FAILED", "passed", "failed"),
        )
        report(
            1,
            "rest_measured",
            not r.timed_out and "1 passed" in out and re.search(r"fine\s+\d", out) is not None and r.seconds < 60,
            f"the test after the hung ones is measured and shown ({r.seconds:.0f} s in all)",
            r.evidence("fine", "passed"),
        )
    finally:
        p.stop_all()

    # 1.bare_except: a polling loop with a bare `except:` swallows the limit's exception.
    p = Project("1-bare-except")
    p.write("test_hang.py", HANGS)
    try:
        hang_test = HANGS.replace(
            "def test_first_call_hangs",
            "def test_bare_except(bench):\n    bench(bare_except_loop, name='bare')\n\ndef test_first_call_hangs",
        )
        p.write("test_hang.py", hang_test)
        r = p.pytest("--bench", "--bench-timeout=2", "-k", "bare_except or fine", timeout=20)
        report(
            1,
            "bare_except_swallows_limit",
            not r.timed_out and "bare" in r.out and "1 passed" in r.out,
            "a hung call inside `while True: try: ... except: pass` still fails its test within the limit",
            [
                *r.evidence("did not return", "FAILED", "passed", "failed"),
                "(the harness killed the run after 20 s; the hung call held the measurement lock the whole time)"
                if r.timed_out
                else None,
            ],
        )
    finally:
        p.stop_all()

    # 1.lock_wait_gives_up: a hung run holds the measurement lock (its limit turned off); another
    # --bench run names the holder and gives up after --bench-lock-timeout, in one line.
    p = _hang_late_project("1-lock-wait", "forever")
    try:
        hung = p.start([PY, "-m", "pytest", *COMMON, *FAST, "--bench", "--bench-timeout=0", "test_hang.py"], "hung.log")
        lock = p.tmp / "tesserabench-measure.lock"
        # the first call (time.sleep(100000)) runs before the lock: wait for a while, then look at the lock
        time.sleep(6)
        r = p.run([PY, "-m", "pytest", *COMMON, *FAST, "--bench", "--bench-lock-timeout=5", "other"], timeout=60)
        named = f"pid {hung.pid}" in r.out
        gave_up = "gave up waiting" in r.out
        report(
            1,
            "lock_wait_names_holder",
            not r.timed_out and named and "since" in r.out and not r.has_traceback(),
            "a run waiting for the measurement lock a hung run holds names the holder (pid, command, since)",
            [
                *r.evidence("waiting", "held", "gave up", "lock", "passed", "failed"),
                f"(hung run's pid {hung.pid}; lock {lock} exists: {lock.exists()})",
                "note: if 'waiting' is absent, the hung run may not hold the lock yet: its first call runs outside the lock",
            ],
        )
        report(
            1,
            "lock_wait_gives_up",
            not r.timed_out and gave_up and r.seconds < 40 and not r.has_traceback(),
            f"... and gives up after --bench-lock-timeout=5 with a message ({r.seconds:.0f} s)",
            r.evidence("gave up", "Interrupted", "error", "Error"),
        )
    finally:
        p.stop_all()

    # 1.lock_wait_then_measures: the hung run has a limit; the waiter measures once it lets go.
    p = _hang_late_project("1-lock-release", "hangs_late")
    try:
        hung = p.start([PY, "-m", "pytest", *COMMON, *FAST, "--bench", "--bench-timeout=8", "test_hang.py"], "hung.log")
        time.sleep(3)
        r = p.run([PY, "-m", "pytest", *COMMON, *FAST, "--bench", "--bench-lock-timeout=60", "other"], timeout=90)
        hung.wait(timeout=60)
        hung_log = p.log("hung.log")
        report(
            1,
            "lock_released_by_limit",
            not r.timed_out and "1 passed" in r.out and "hangs_late" in hung_log and "did not return" in hung_log,
            "a run waiting behind a hung one measures once the hung call's --bench-timeout releases the lock",
            [
                *r.evidence("waiting", "passed", "failed"),
                "hung run: "
                + " / ".join(
                    line_ for line_ in hung_log.splitlines() if "did not return" in line_ or "failed" in line_
                )[:300],
            ],
        )
    finally:
        p.stop_all()

    # 1.ab_*: under --bench-ab, one side's benchmark never returns (the reference's: the change fixed
    # it; the working tree's: the change broke it), or the reference's test module hangs at import.
    ok = "    bench(time.sleep, 0.0005, name='ok')\n"
    fine = (
        "import time\n\ndef work():\n    time.sleep(0.0005)\n\ndef test_w(bench):\n    bench(work, name='side_hangs')\n\ndef test_ok(bench):\n"
        + ok
    )
    hung = fine.replace("time.sleep(0.0005)\n\ndef test_w", "time.sleep(100000)\n\ndef test_w")
    import_hang = "import time\ntime.sleep(100000)\n\n" + fine
    ab = [
        "--bench-ab=HEAD",
        "--bench-ab-processes=1",
        "--bench-max-time=0.1",
        "--bench-warmup=0.01",
        "--bench-settle-time=0.5",
        "--bench-timeout=3",
    ]
    for case, committed, working, limit in (
        ("ab_reference_hangs", hung, fine, 150),
        ("ab_candidate_hangs", fine, hung, 150),
        ("ab_reference_import_hangs", import_hang, fine, 25),
    ):
        p = Project("1-" + case)
        p.write("test_w.py", committed)
        try:
            p.git_init()
            p.write("test_w.py", working)
            r = p.run([PY, "-m", "pytest", *COMMON, *ab], timeout=limit)
            left = p.processes()
            ends = not r.timed_out and not r.has_traceback() and not left
            if case == "ab_reference_hangs":  # the working tree fixed the hang: the test is not compared, and says why
                ok_ = ends and re.search(r"not compared.*side_hangs'?\)?\s+did\s+not\s+return", r.out) is not None
                what = "a reference benchmark that never returns: the run ends, the test says it could not be compared and names the call"
            elif case == "ab_candidate_hangs":
                ok_ = (
                    ends
                    and "FAILED test_w.py::test_w" in r.out
                    and "side_hangs" in r.out
                    and "did not return" in r.out
                    and "1 passed" in r.out
                )
                what = "a working-tree benchmark that never returns fails that test naming the call; the other test is measured"
            else:
                ok_ = ends and r.rc not in (0, None)
                what = "a reference whose test module hangs at import: the run ends with a message within a minute"
            report(
                1,
                case,
                ok_,
                f"--bench-ab: {what} ({r.seconds:.0f} s), no process left",
                [
                    *r.evidence("did not", "side_hangs", "FAILED", "passed", "failed", "Traceback", "Error", "start"),
                    *p.describe(left),
                    f"(the harness killed the run at its {limit} s limit; nothing was printed while it waited)"
                    if r.timed_out
                    else None,
                ],
            )
        finally:
            p.stop_all()

    # 1.sigkill_lead_ab: SIGKILL of the lead while both served processes hang inside the test.
    p = Project("1-sigkill-ab")
    blocker = (
        "import os, time\n\ndef test_w(bench):\n"
        "    if os.environ.get('TESSERABENCH_AB_AUTHKEY'):\n"
        "        open(os.path.join(os.environ['BLOCK'], str(os.getpid())), 'w').close()\n"
        "        while True:\n            time.sleep(1)\n"
        "    bench(time.sleep, 0.0005)\n"
    )
    p.write("test_w.py", blocker)
    try:
        p.git_init()
        block = p.dir / "block"
        block.mkdir()
        lead = p.start(
            [
                PY,
                "-m",
                "pytest",
                *COMMON,
                "--bench-ab=HEAD",
                "--bench-ab-processes=1",
                "--bench-max-time=0.1",
                "--bench-warmup=0.01",
            ],
            "lead.log",
            env={"BLOCK": str(block)},
        )
        reached = wait_for(lambda: len(os.listdir(block)) >= 2 or lead.poll() is not None, 90)
        served = [int(n) for n in os.listdir(block)]
        kill_pid(lead.pid)
        lead.wait(timeout=30)
        wait_for(lambda: not p.processes(), 15)
        left = p.processes()
        report(
            1,
            "sigkill_lead_ab",
            reached and len(served) >= 2 and not left,
            f"SIGKILL of an --bench-ab lead whose served processes are inside a test: none outlives it (served {served})",
            [
                f"$ kill -9 {lead.pid}  (lead: pytest --bench-ab=HEAD --bench-ab-processes=1)",
                *p.describe(left),
                None if reached else "the served processes never reached the test: " + p.log("lead.log")[-600:],
            ],
        )
    finally:
        p.stop_all()

    # 1.sigkill_lead_save_processes: SIGKILL of a --bench-save lead while its fresh processes measure.
    p = Project("1-sigkill-save")
    p.write(
        "test_w.py",
        "import os, time\n\ndef test_w(bench):\n"
        "    if os.environ.get('TESSERABENCH_LEAD_PID'):\n"
        "        open(os.path.join(os.environ['BLOCK'], str(os.getpid())), 'w').close()\n"
        "        while True:\n            time.sleep(1)\n"
        "    bench(time.sleep, 0.0005)\n",
    )
    try:
        block = p.dir / "block"
        block.mkdir()
        args = [a for a in FAST if not a.startswith("--bench-save-processes")]
        lead = p.start(
            [PY, "-m", "pytest", *COMMON, *args, "--bench-save=main", "--bench-save-processes=2"],
            "lead.log",
            env={"BLOCK": str(block)},
        )
        reached = wait_for(lambda: len(os.listdir(block)) >= 1 or lead.poll() is not None, 90)
        kill_pid(lead.pid)
        lead.wait(timeout=30)
        wait_for(lambda: not p.processes(), 15)
        left = p.processes()
        report(
            1,
            "sigkill_lead_save_processes",
            reached and not left,
            "SIGKILL of a --bench-save lead while a fresh process is inside a test: none outlives it",
            [
                f"$ kill -9 {lead.pid}  (lead: pytest --bench-save=main --bench-save-processes=2)",
                *p.describe(left),
                None
                if reached
                else "no fresh process reached the test (is TESSERABENCH_LEAD_PID set there?): "
                + p.log("lead.log")[-600:],
            ],
        )
    finally:
        p.stop_all()


# ---------------------------------------------------------------------------------------------
# Class 2: --bench-save while another process holds the baseline's lock

TWO_TESTS = """
import time

def test_a(bench):
    bench(time.sleep, 0.0005)

def test_b(bench):
    bench(time.sleep, 0.001, name="b")
"""

_KEY: list[str] = []


def machine_key() -> str:
    if not _KEY:
        done = subprocess.run(
            [PY, "-c", "from pytest_tesserabench.machine.device import machine_key; print(machine_key())"],
            capture_output=True,
            text=True,
            timeout=60,
        )
        _KEY.append(done.stdout.strip())
    return _KEY[0]


def saved_ids(path: Path | None) -> list[set]:
    """The benchmark ids of each run of a baseline file."""
    if path is None or not path.exists():
        return []
    return [set(run["benchmarks"]) for run in json.loads(path.read_text())["runs"]]


def save_command(out: str) -> str | None:
    """The `tesserabench save ...` command a locked save printed (backquoted or on a line of its own)."""
    for line in out.splitlines():
        match = re.search(r"`(tesserabench save [^`]+)`", line) or re.search(r"(tesserabench save .+?)\s*$", line)
        if match:
            return match.group(1)
    return None


def class_2() -> None:
    key = machine_key()
    for case, folder, extra in (
        ("locked_save_kept", "2-locked", []),
        ("locked_save_odd_path", "2 locked $HOME 'q' (x)", []),
        ("locked_save_no_cache", "2-locked-nocache", ["-p", "no:cacheprovider"]),
    ):
        p = Project(folder)
        p.write("test_s.py", TWO_TESTS)
        try:
            holder = hold_lock(p, slot_lock(p.dir / "baselines" / "main" / f"{key}.json", p.tmp))
            r = p.pytest("--bench-save=main", "--bench-lock-timeout=3", *extra, timeout=120)
            command = save_command(r.out)
            kept = [*p.dir.glob(".pytest_cache/**/unsaved-runs/*.json"), *p.tmp.glob("**/*unsaved-runs/*.json")]
            named = f"pid {holder.pid}" in r.out
            release(holder)
            later = p.run(["bash", "-c", command], timeout=60) if command else None
            runs = saved_ids(p.baseline_file())
            saved = bool(runs) and {"test_s.py::test_a", "test_s.py::test_b::b"} <= runs[-1]
            report(
                2,
                case,
                not r.timed_out
                and not r.has_traceback()
                and named
                and kept
                and command
                and later
                and later.rc == 0
                and saved
                and r.seconds < 60,
                f"--bench-save=main, lock held{' (' + ' '.join(extra) + ')' if extra else ''}{' in a path with spaces, $ and quotes' if 'odd' in case else ''}: "
                f"names the holder, gives up after 3 s, keeps the run; the printed command saves it later ({r.seconds:.0f} s)",
                [
                    *r.evidence("lock", "held", "tesserabench save", "kept", "unsaved", "passed", "failed", "error"),
                    f"kept run files: {[str(k) for k in kept]}",
                    f"printed command: {command!r}",
                    *(later.evidence() if later else []),
                    f"baseline runs after it: {len(runs)}",
                ],
            )
        finally:
            p.stop_all()

    # 2.save_cli_locked: `tesserabench save` while the lock is held: exit 2 in one line, nothing written.
    p = Project("2-save-cli")
    p.write("test_s.py", TWO_TESTS)
    try:
        first = p.pytest("--bench", "--bench-json=run.json", timeout=120)
        holder = hold_lock(p, slot_lock(p.dir / "baselines" / "main" / f"{key}.json", p.tmp))
        r = p.tb("save", "main", "run.json", "--dir", "baselines", "--lock-timeout", "2", timeout=60)
        release(holder)
        runs_then = saved_ids(p.baseline_file())
        again = p.tb("save", "main", "run.json", "--dir", "baselines", timeout=60)
        report(
            2,
            "save_cli_locked",
            first.rc == 0
            and r.rc == 2
            and not r.has_traceback()
            and f"pid {holder.pid}" in r.out
            and not runs_then
            and again.rc == 0
            and len(saved_ids(p.baseline_file())) == 1,
            "`tesserabench save main run.json --lock-timeout 2` while locked: exit 2 naming the holder, nothing written; saves once free",
            [*r.evidence(), *again.evidence()],
        )
    finally:
        p.stop_all()

    # 2.locked_save_and_compare: --bench-compare=main --bench-save=main, lock held: verdicts still given, run kept.
    p = Project("2-save-compare")
    p.write("test_s.py", TWO_TESTS)
    try:
        first = p.pytest("--bench-save=main", timeout=120)
        holder = hold_lock(p, slot_lock(p.baseline_file() or p.dir / "baselines" / "main" / f"{key}.json", p.tmp))
        r = p.pytest("--bench-compare=main", "--bench-save=main", "--bench-lock-timeout=3", timeout=120)
        release(holder)
        command = save_command(r.out)
        report(
            2,
            "locked_save_and_compare",
            first.rc == 0
            and not r.timed_out
            and not r.has_traceback()
            and command is not None
            and re.search(r"UNCHANGED|INCONCLUSIVE|IMPROVED|REGRESSED", r.out) is not None,
            "--bench-compare=main --bench-save=main with the lock held: the comparison is still shown and the run kept with its save command",
            r.evidence("lock", "tesserabench save", "UNCHANGED", "INCONCLUSIVE", "REGRESSED", "passed", "failed"),
        )
    finally:
        p.stop_all()


# ---------------------------------------------------------------------------------------------
# Class 3: leftovers of a killed lead, swept by the next run

BLOCKER = """
import os, time

def test_w(bench):
    block = os.environ.get("BLOCK")
    if block and os.environ.get("TESSERABENCH_LEAD_PID"):  # a served or fresh process: stay inside the test
        open(os.path.join(block, str(os.getpid())), "w").close()
        while True:
            time.sleep(1)
    bench(time.sleep, 0.0005)
"""
AB = [
    "--bench-ab=HEAD",
    "--bench-ab-processes=1",
    "--bench-max-time=0.1",
    "--bench-warmup=0.01",
    "--bench-settle-time=0.5",
]


def leftovers(p: Project) -> tuple[list[str], list[str]]:
    folders = sorted(x.name for x in p.tmp.glob("tesserabench-ab-*"))
    cache = p.dir / ".pytest_cache" / "d" / "tesserabench"
    trees = sorted(x.name for x in cache.glob("ab-*")) if cache.exists() else []
    return folders, trees


def blocked_lead(p: Project, argv, served: int, log: str = "lead.log") -> tuple[subprocess.Popen, bool]:
    block = p.dir / "block"
    block.mkdir(exist_ok=True)
    lead = p.start(argv, log, env={"BLOCK": str(block)})
    reached = wait_for(lambda: len(os.listdir(block)) >= served or lead.poll() is not None, 120)
    return lead, reached and lead.poll() is None


def class_3() -> None:
    ab_argv = [PY, "-m", "pytest", *COMMON, *AB]
    for case, how in (("sigkill_lead_ab", "lead"), ("sigkill_group_ab", "group"), ("sigterm_lead_ab", "term")):
        p = Project("3-" + case)
        p.write("test_w.py", BLOCKER)
        try:
            p.git_init()
            p.write("test_w.py", BLOCKER + "\n# changed\n")
            lead, reached = blocked_lead(p, ab_argv, 2)
            during = leftovers(p)
            signalled = time.monotonic()
            if how == "lead":
                kill_pid(lead.pid)
            elif how == "group":
                kill_group(lead)
            else:
                kill_pid(lead.pid, signal.SIGTERM)
            try:
                lead.wait(timeout=20)
            except subprocess.TimeoutExpired:
                kill_group(lead)  # the harness's own limit: SIGKILL, as CI does after its grace period
                lead.wait(timeout=30)
                lead.returncode = None
            took = time.monotonic() - signalled
            wait_for(lambda p=p: not p.processes(), 20)
            left_procs = p.processes()
            after_kill = leftovers(p)
            lead_out = p.log("lead.log")
            r = p.run(ab_argv, timeout=150)  # the next run, unblocked
            after_next = leftovers(p)
            worktrees = p.git("worktree", "list")
            if how == "term":  # a SIGTERM is Ctrl-C: the lead closes its served processes and cleans up itself
                ok_ = (
                    reached
                    and lead.returncode is not None
                    and took < 15
                    and not left_procs
                    and after_kill[0] == []
                    and r.rc == 0
                )
                what = f"SIGTERM of an --bench-ab lead whose served processes are inside a test: it ends promptly ({took:.0f} s), cleaning up"
            else:
                ok_ = reached and not left_procs and r.rc == 0 and after_next == ([], []) and "ab-" not in worktrees
                what = f"SIGKILL of the {'lead' if how == 'lead' else 'whole process group'} during --bench-ab: the next --bench-ab run sweeps its temp folders and worktree"
            report(
                3,
                case,
                ok_,
                what,
                [
                    f"while measuring: folders {during[0]}, worktrees {during[1]}",
                    f"after the signal: lead ended after {took:.1f} s (rc {lead.returncode}; None: still running at 20 s, SIGKILLed by the harness), folders {after_kill[0]}, worktrees {after_kill[1]}",
                    *p.describe(left_procs),
                    *r.evidence("passed", "failed", "error"),
                    f"after the next run: folders {after_next[0]}, worktrees {after_next[1]}",
                    "git worktree list: " + worktrees.replace("\n", " / "),
                    "lead's output tail: " + lead_out[-300:].replace("\n", " / "),
                ],
            )
        finally:
            p.stop_all()

    # 3.sigkill_lead_save: SIGKILL of --bench-save with fresh processes; the next such save sweeps, the baseline intact.
    p = Project("3-sigkill-save")
    p.write("test_w.py", BLOCKER)
    args = [a for a in FAST if not a.startswith("--bench-save-processes")]
    argv = [PY, "-m", "pytest", *COMMON, *args, "--bench-save=main", "--bench-save-processes=2"]
    try:
        first = p.run(argv, timeout=150)  # a baseline to keep intact
        lead, reached = blocked_lead(p, argv, 1)
        kill_pid(lead.pid)
        lead.wait(timeout=60)
        wait_for(lambda: not p.processes(), 20)
        left_procs = p.processes()
        after_kill = leftovers(p)
        r = p.run(argv, timeout=150)
        after_next = leftovers(p)
        runs = saved_ids(p.baseline_file())
        report(
            3,
            "sigkill_lead_save",
            first.rc == 0
            and reached
            and not left_procs
            and after_kill[0]
            and r.rc == 0
            and after_next[0] == []
            and len(runs) == 2,
            "SIGKILL of --bench-save --bench-save-processes=2 mid-test: nothing runs on, the next save sweeps its folders, the baseline has 2 runs",
            [
                f"after the kill: folders {after_kill[0]}",
                *p.describe(left_procs),
                *r.evidence("passed", "failed", "error"),
                f"after the next run: folders {after_next[0]}; baseline runs {len(runs)}",
            ],
        )
    finally:
        p.stop_all()

    # 3.live_session_untouched: a sweep by another project's run leaves a live session's folders alone.
    p = Project("3-live")
    p.write("test_w.py", BLOCKER)
    q = Project("3-live-other")
    q.tmp = p.tmp  # the same temp folder, as two projects of one user share /tmp
    q.env["TMPDIR"] = str(p.tmp)
    q.write("test_w.py", BLOCKER)
    try:
        p.git_init()
        p.write("test_w.py", BLOCKER + "\n# changed\n")
        q.git_init()
        q.write("test_w.py", BLOCKER + "\n# changed\n")
        lead, reached = blocked_lead(p, ab_argv, 2)
        mine = leftovers(p)[0]
        r = q.run([*ab_argv, "--bench-lock-timeout=8"], timeout=150)  # the live session holds the measurement lock
        still = [f for f in mine if (p.tmp / f).exists()]
        report(
            3,
            "live_session_untouched",
            reached and mine and still == mine and not r.timed_out and lead.poll() is None,
            "another project's --bench-ab run (same temp folder) sweeps nothing of a live session's",
            [f"live session's folders {mine}, after the other run {still}", *r.evidence("passed", "failed", "error")],
        )
        kill_pid(lead.pid)
    finally:
        p.stop_all()
        q.stop_all()


# ---------------------------------------------------------------------------------------------
# Class 4: hostile names

HOSTILE = r"""
import os, time, pytest

SLOW = float(os.environ.get("SLOW", "1"))
NAMES = [
    "\x1b[31mRED\x1b[0m\x1b]0;title\x07\x1b[2J",
    "evil\u202egnp.exe",
    "a|b\nc|d",
    '=HYPERLINK("http://x","y")',
    "+1+1",
    "-2+3",
    "@SUM(A1)",
    "<script>alert(1)</script>",
]

@pytest.mark.bench(group="grp\x1b[7m|g\u202e")
@pytest.mark.bench_sizes(op=["=1+2", "\x1b[1mB", "p|q\nr"])
def test_h(bench, op):
    bench(time.sleep, 0.0005)
    for i, name in enumerate(NAMES):
        bench(time.sleep, 0.0005 * (SLOW if i < 2 else 1), name=name)  # SLOW: the first two only
"""
HOSTILE_HANG = r"""
import time

def test_hang(bench):
    bench(time.sleep, 100000, name="\x1b[2J\x1b[31mhung\u202e|x\ny")
"""
MATHTEXT = r"""
import time, pytest

@pytest.mark.bench(group=r"grp $\frac{$")
@pytest.mark.bench_sizes(n=[1, 2])
def test_m(bench, n):
    bench(time.sleep, 0.0005 * n)
    bench(time.sleep, 0.0005 * n, name=r"cost $\undefinedmacro{x}$ total")
    bench(time.sleep, 0.0005 * n, name=r"$x^{$ 50% $$ a_b^c")
    bench(time.sleep, 0.0005 * n, name="dollar $ alone")
"""


def csv_injections(path: Path) -> list[str]:
    """Cells that a spreadsheet would read as a formula (text starting with = + - @ tab CR)."""
    bad = []
    try:
        rows = list(csv.reader(io.StringIO(path.read_text())))
    except (OSError, csv.Error) as exc:
        return [f"unreadable: {exc}"]
    for row in rows[1:]:
        for cell in row:
            if cell.startswith(FORMULA):
                try:
                    float(cell)
                except ValueError:
                    bad.append(cell[:80])
    return bad


def md_problems(path: Path) -> list[str]:
    if not path.exists():
        return [f"{path.name} not written"]
    text = path.read_text()
    problems = [f"raw control: {x}" for x in no_raw_controls(text)[:3]]
    problems += [f"broken row: {ascii(x)}" for x in table_rows_broken(text)[:3]]
    if "HYPERLINK" not in text:
        problems.append("the hostile names are missing from it")
    return problems


def class_4() -> None:
    p = Project("4-hostile")
    p.write("test_h.py", HOSTILE)
    p.write("test_hang.py", HOSTILE_HANG)
    gh = p.dir / "gh-summary.md"
    try:
        first = p.pytest(
            "test_h.py",
            "--bench-save=main",
            "--bench-md=s.md",
            "--bench-csv=r.csv",
            "--bench-json=run1.json",
            env={"GITHUB_STEP_SUMMARY": str(gh)},
            timeout=150,
        )
        report(
            4,
            "terminal_summary",
            first.rc == 0 and not no_raw_controls(first.out) and "HYPERLINK" in first.out,
            "escape sequences, U+202E, `|` and newlines in call names, groups and parameters: the terminal summary shows them escaped",
            [first.cmd, *no_raw_controls(first.out)[:5], *first.lines("failed", "error", limit=4)],
        )
        problems = md_problems(p.dir / "s.md")
        report(
            4,
            "markdown_table",
            not problems,
            "--bench-md: every table row keeps its cells; no raw control characters",
            [first.cmd, *problems],
        )
        problems = md_problems(gh)
        report(
            4, "github_step_summary", not problems, "GITHUB_STEP_SUMMARY gets the same, intact", [first.cmd, *problems]
        )
        bad = csv_injections(p.dir / "r.csv") if (p.dir / "r.csv").exists() else ["r.csv not written"]
        report(
            4,
            "csv_formulas",
            not bad,
            "--bench-csv: no text cell starts with = + - @ (formula injection)",
            [first.cmd, *(f"cell: {c!r}" for c in bad[:6])],
        )

        second = p.pytest(
            "test_h.py",
            "--bench-compare=main",
            "--bench-json=run2.json",
            "--bench-html=r2.html",
            env={"SLOW": "4"},
            timeout=150,
        )
        lines = second.out.splitlines()
        failing = [line_ for line_ in lines if "REGRESSED" in line_ or line_.startswith(("FAILED", "E "))]
        warned = [line_ for line_ in lines if "Warning" in line_ or "INCONCLUSIVE" in line_]
        report(
            4,
            "failure_lines",
            second.rc == 1 and "REGRESSED" in second.out and not no_raw_controls("\n".join(failing)),
            "--bench-compare with two hostile calls 4x slower: REGRESSED rows and failure lines show the names escaped",
            [second.cmd, *no_raw_controls("\n".join(failing))[:4], *[ascii_line(line_) for line_ in failing[:3]]],
        )
        report(
            4,
            "warning_lines",
            not no_raw_controls("\n".join(warned)),
            "... and the warnings summary (INCONCLUSIVE and other PytestWarnings) shows them escaped",
            [second.cmd, *no_raw_controls("\n".join(warned))[:4]],
        )
        html = (p.dir / "r2.html").read_text(errors="replace") if (p.dir / "r2.html").exists() else ""
        report(
            4,
            "html_injection",
            bool(html) and "<script>alert(1)" not in html,
            "--bench-html: a call named <script>alert(1)</script> is escaped in the page",
            [second.cmd, f"r2.html written: {bool(html)}; raw <script>alert(1): {'<script>alert(1)' in html}"],
        )
        raw_html = [ascii(m.group(0)) for m in re.finditer(r".{0,40}[\x1b\x07\u202e].{0,20}", html)]
        report(
            4,
            "html_controls",
            bool(html) and not raw_html,
            "--bench-html: no raw escape sequences or U+202E in the page (plot labels included)",
            [second.cmd, f"{len(raw_html)} raw occurrence(s) in r2.html, e.g.:", *raw_html[:3]],
        )
        hang = p.pytest("test_hang.py", "--bench", "--bench-timeout=2", timeout=60)
        report(
            4,
            "timeout_failure_line",
            not hang.timed_out and "did not return" in hang.out and not no_raw_controls(hang.out),
            "a hung call with a hostile name: its --bench-timeout failure names it escaped",
            [hang.cmd, *no_raw_controls(hang.out)[:5], *hang.lines("did not return", limit=3)],
        )
        runs = {
            "cli_compare": p.tb("compare", "main", "run2.json", "--md", "c.md", "--csv", "c.csv"),
            "cli_compare_files": p.tb("compare", "run1.json", "run2.json", "run2.json"),
            "cli_show": p.tb("show", "main"),
            "cli_history": p.tb("history", "main"),
            "cli_report": p.tb("report", "run2.json", "main", "-o", "r3.html"),
        }
        for case, r in runs.items():
            raw = no_raw_controls(r.out)
            report(
                4,
                case,
                not raw and r.rc in (0, 1) and not r.has_traceback(),
                f"`{' '.join(r.argv[1:3])}`: hostile names escaped, no error",
                [
                    r.cmd,
                    f"{len(raw)} line(s) with raw control characters, e.g.:",
                    *raw[:3],
                    *(r.evidence(limit=4) if r.rc not in (0, 1) else []),
                ],
            )
        problems = md_problems(p.dir / "c.md") + [f"csv: {c!r}" for c in csv_injections(p.dir / "c.csv")[:4]]
        report(
            4,
            "cli_md_csv",
            not problems,
            "tesserabench compare --md/--csv: tables intact, no formula cells",
            [runs["cli_compare"].cmd, *problems],
        )
    finally:
        p.stop_all()

    # 4.mathtext: call and group names matplotlib would read as mathtext; the report and the baseline survive.
    p = Project("4-mathtext")
    p.write("test_m.py", MATHTEXT)
    try:
        r = p.pytest("--bench-save=main", "--bench-html=r.html", "--bench-json=run.json", timeout=150)
        html = (p.dir / "r.html").read_text(errors="replace") if (p.dir / "r.html").exists() else ""
        runs = saved_ids(p.baseline_file())
        cli = p.tb("report", "run.json", "main", "-o", "r2.html", timeout=120)
        report(
            4,
            "mathtext_html",
            r.rc == 0
            and not r.has_traceback()
            and "undefinedmacro" in html
            and runs
            and len(runs[-1]) == 8
            and cli.rc == 0
            and (p.dir / "r2.html").exists(),
            r"call names like `cost $\undefinedmacro{x}$ total`: the HTML report is written (plugin and CLI), the baseline saved",
            [
                *r.evidence("Error", "error", "html", "saved", "passed", "failed", "Traceback"),
                *cli.evidence(),
                f"baseline runs: {len(runs)}; benchmarks in the last: {len(runs[-1]) if runs else 0}",
            ],
        )
    finally:
        p.stop_all()


# ---------------------------------------------------------------------------------------------
# Class 5: well-formed files with bad values


def mutate(path: Path, change) -> None:
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))


def first_record(doc: dict) -> dict:
    runs = doc["runs"] if "runs" in doc else [doc]
    return next(iter(runs[0]["benchmarks"].values()))


LARGE_CAP = 20  # seconds: the harness's limit per command on the large baseline


def class_5() -> None:
    p = Project("5-values")
    p.write("test_s.py", TWO_TESTS)
    try:
        base = p.pytest("--bench-save=main", "--bench-json=run.json", timeout=120)
        if base.rc != 0 or p.baseline_file() is None:
            report(5, "setup", False, "the baseline to mutate could not be made", base.evidence())
            return
        pristine_baseline, pristine_run = p.baseline_file().read_text(), (p.dir / "run.json").read_text()
        key = p.baseline_file().name

        def big_rounds_ms(doc):
            first_record(doc)["rounds_ms"][0] = 10**400

        def big_rounds(doc):
            first_record(doc)["stats"]["rounds"] = 10**400

        def inf_rounds(doc):
            first_record(doc)["rounds_ms"][0] = float("inf")  # written as Infinity, which json reads back

        def sha_number(doc):
            (doc["runs"][0] if "runs" in doc else doc)["commit"] = {"sha": 12345, "branch": 7, "dirty": "yes"}

        # (case, which file, mutation, commands)
        cases = [
            ("baseline_huge_rounds_ms", "baseline", big_rounds_ms, "show compare report pytest"),
            ("baseline_huge_stats_rounds", "baseline", big_rounds, "show compare report"),
            ("run_huge_rounds_ms", "run", big_rounds_ms, "compare report save"),
            ("run_huge_stats_rounds", "run", big_rounds, "compare report save"),
            ("baseline_infinity_round", "baseline", inf_rounds, "show compare"),
            ("run_sha_number", "run", sha_number, "compare report save"),
            ("baseline_sha_number", "baseline", sha_number, "show compare history"),
        ]
        for case, which, change, commands in cases:
            p.baseline_file().write_text(pristine_baseline)
            (p.dir / "run.json").write_text(pristine_run)
            mutate(p.baseline_file() if which == "baseline" else p.dir / "run.json", change)
            before = p.baseline_file().read_text()
            runs = []
            for command in commands.split():
                if command == "show":
                    runs.append(p.tb("show", "main"))
                elif command == "compare":
                    runs.append(p.tb("compare", "main", "run.json"))
                elif command == "report":
                    runs.append(p.tb("report", "run.json", "main", "-o", "r.html"))
                elif command == "history":
                    runs.append(p.tb("history", "main"))
                elif command == "save":
                    runs.append(p.tb("save", "other", "run.json"))
                else:
                    runs.append(p.pytest("--bench-compare=main", timeout=120))
            bad = [
                r for r in runs if r.has_traceback() or r.timed_out or r.rc == 0 and which == "run" and "save" in r.argv
            ]
            # a file with a bad value must be refused in one line naming the field; a sha given as a number may also be read
            unnamed = [
                r
                for r in runs
                if r.rc not in (0, 1) and not re.search(r"rounds|commit|sha|branch|dirty|median|Infinity|inf", r.out)
            ]
            report(
                5,
                case,
                not bad and not unnamed and p.baseline_file().read_text() == before,
                f"{which} file with {change.__name__.replace('_', ' ')}: {', '.join(commands.split())} refuse it in one line naming the field (or read it), no traceback",
                [
                    line
                    for r in runs
                    for line in r.evidence(
                        "Error", "error", "rounds", "commit", "sha", "Traceback", "INTERNALERROR", limit=3
                    )
                ],
            )
        p.baseline_file().write_text(pristine_baseline)
        (p.dir / "run.json").write_text(pristine_run)

        # 5.machine_key_slash: a machine key with `/` (and `..`) in the baseline file, in --machine, and in a run's device.
        other = p.dir / "baselines" / "main" / "evil.json"
        doc = json.loads(pristine_baseline)
        doc["machine_key"] = "../../escape/x"
        other.write_text(json.dumps(doc))
        runs = [
            p.tb("show", "main"),
            p.tb("compare", "main", "run.json"),
            p.tb("show", "main", "--machine", "../../escape/x"),
            p.tb("history", "main", "--machine", "../main/" + key[:-5]),
        ]
        other.unlink()
        mutate(p.dir / "run.json", lambda d: d["machine"].update(device="../../../escape/dev", arch="x86_64/../../y"))
        save = p.tb("save", "main", "run.json")
        escaped = [str(x) for x in p.dir.rglob("*") if "escape" in x.name or x.name == "y.json"] + [
            str(x) for x in (p.dir / "baselines" / "main").iterdir() if x.is_dir()
        ]
        runs.append(save)
        report(
            5,
            "machine_key_slash",
            not any(r.has_traceback() or r.timed_out for r in runs) and not escaped,
            "a machine key with `/` and `..` (in a baseline file, in --machine, in a run's device): no traceback, nothing written outside baselines/main/",
            [*(line for r in runs for line in r.evidence(limit=3)), f"written outside: {escaped}"],
        )
        (p.dir / "run.json").write_text(pristine_run)
        p.baseline_file().write_text(pristine_baseline)

        # 5.large_baseline: 10,000 runs of the two benchmarks; show, compare, report, history and a compare run.
        import random

        rng = random.Random(34)
        doc = json.loads(pristine_baseline)
        template = doc["runs"][0]
        runs_ = []
        for i in range(10_000):
            run = json.loads(json.dumps(template))
            run["started"] = f"20{10 + i // 8760:02d}-01-01T00:00:00Z"
            for record in run["benchmarks"].values():
                factor = 1 + rng.gauss(0, 0.02)
                record["rounds_ms"] = [x * factor for x in record["rounds_ms"]]
                record.pop("stats", None)  # recomputed from rounds_ms on reading
            runs_.append(run)
        doc["runs"] = runs_
        p.baseline_file().write_text(json.dumps(doc))
        size_mb = p.baseline_file().stat().st_size / 1e6
        timed = [
            p.tb("show", "main", timeout=60),
            p.tb("compare", "main", "run.json", timeout=60),
            p.tb("report", "run.json", "main", "-o", "big.html", timeout=LARGE_CAP),
            p.tb("history", "main", timeout=LARGE_CAP),
            p.pytest("--bench-compare=main", timeout=LARGE_CAP),
        ]
        slow = [r for r in timed if r.seconds > 30 or r.timed_out or r.has_traceback() or r.rc not in (0, 1)]
        report(
            5,
            "large_baseline",
            not slow,
            f"a baseline of 10,000 runs ({size_mb:.0f} MB): "
            + ", ".join(
                f"{r.argv[1] if r.argv[0] == str(TB) else 'pytest --bench-compare'} {r.seconds:.1f} s" for r in timed
            )
            + f" (each under 30 s, no error; the harness stops a command at {LARGE_CAP} s)",
            [line for r in slow for line in r.evidence(limit=4)],
        )
    finally:
        p.stop_all()


# ---------------------------------------------------------------------------------------------
# Class 6: outputs, run files, values a benchmark gives, signals

BAD_BENCHMARKS = """
import time

def test_extra_str(bench):
    bench.extra_info = "oops"
    bench(time.sleep, 0.0005)

def test_extra_object(bench):
    bench.extra_info["k"] = object()
    bench(time.sleep, 0.0005)

def test_extra_cycle(bench):
    d = {}
    d["self"] = d
    bench.extra_info["cyc"] = d
    bench(time.sleep, 0.0005)

def test_extra_nan(bench):
    bench.extra_info["nan"] = float("nan")
    bench(time.sleep, 0.0005)

def test_extra_deep(bench):
    deep = []
    for _ in range(300):
        deep = [deep]
    bench.extra_info["deep"] = deep
    bench(time.sleep, 0.0005)

def test_flops_str(bench):
    bench(time.sleep, 0.0005, flops="lots")

def test_bytes_negative(bench):
    bench(time.sleep, 0.0005, bytes=-5)

def test_flops_nan(bench):
    bench(time.sleep, 0.0005, flops=float("nan"))

def test_name_int(bench):
    bench(time.sleep, 0.0005)
    bench(time.sleep, 0.0005, name=123)

calls = [0]
def raise_later():
    calls[0] += 1
    if calls[0] > 10:
        raise ValueError("boom in round")
    time.sleep(0.0005)

def test_raises_in_rounds(bench):
    bench(raise_later)

exits = [0]
def exit_later():
    exits[0] += 1
    if exits[0] > 10:
        raise SystemExit(3)
    time.sleep(0.0005)

def test_system_exit_in_rounds(bench):
    bench(exit_later)

def test_good(bench):
    bench(time.sleep, 0.0005, name="good")
"""
BAD_TESTS = [
    line.split("(")[0][4:]
    for line in BAD_BENCHMARKS.splitlines()
    if line.startswith("def test_") and "good" not in line
]


def class_6() -> None:
    # 6.json_stdout: --bench-json=/dev/stdout with stdout redirected to a file, appended to, piped.
    p = Project("6-json-stdout")
    p.write("test_s.py", TWO_TESTS)
    try:
        base = [shlex.quote(str(PY)), "-m", "pytest", *COMMON, *FAST, "--bench"]
        for case, shell in (
            ("json_stdout_redirect", "{cmd} --bench-json=/dev/stdout > log.txt"),
            ("json_stdout_append", "echo FIRST > log.txt; {cmd} --bench-json=/dev/stdout >> log.txt"),
            ("json_fd1_pipe", "{cmd} --bench-json=/dev/fd/1 | cat > log.txt"),
        ):
            (p.dir / "log.txt").unlink(missing_ok=True)
            command = shell.format(cmd=" ".join(base))
            r = p.run(["bash", "-c", command], timeout=120)
            log = p.log("log.txt")
            match = re.search(r'\{\s*"benchmarks"', log)
            start = match.start() if match else -1
            try:
                parsed, _ = json.JSONDecoder().raw_decode(log[start:]) if start >= 0 else (None, 0)
            except ValueError:
                parsed = None
            keeps_log = (
                "2 passed" in log
                and "test session starts" in log
                and (case != "json_stdout_append" or log.startswith("FIRST"))
            )
            if case == "json_stdout_redirect":
                redirected = (command, log, start)
            report(
                6,
                case,
                r.rc == 0 and keeps_log and parsed is not None and len(parsed.get("benchmarks", {})) == 2,
                f"`{shell.format(cmd='pytest --bench')}`: pytest's log kept, the JSON in it, whole",
                [
                    f"$ {command}    # rc={r.rc}",
                    f"log.txt: {len(log)} chars; pytest's log kept: {keeps_log}; JSON parses: {parsed is not None}",
                    "log.txt head: " + log[:200].replace(chr(10), " / "),
                ],
            )
        command, log, start = redirected
        line_start = start >= 0 and (start == 0 or log[start - 1] == "\n")
        after = start >= 0 and log.find("[100%]") < start
        report(
            6,
            "json_stdout_own_lines",
            line_start and after,
            "... and the JSON starts on a line of its own after the tests' progress (usage.md: 'after the tests' progress and before pytest's summary'; file messages are 'never the end of pytest's progress line')",
            [
                f"$ {command}",
                "where the JSON starts: " + ascii(log[max(0, start - 90) : start + 20]),
                f"pytest's summary line comes {'after' if log.rfind('passed in') > start else 'before'} the JSON",
            ],
        )
    finally:
        p.stop_all()

    # 6.bad_benchmarks: each bad value fails only its own test, in one line; the good test is saved.
    for case, extra in (("bad_values_fail_their_test", []), ("bad_values_under_xdist", ["-n", "2"])):
        p = Project("6-" + case)
        p.write("test_bad.py", BAD_BENCHMARKS)
        try:
            r = p.pytest("--bench-save=main", "--bench-json=run.json", "-rf", *extra, timeout=180)
            failed = {name for name in BAD_TESTS if re.search(rf"FAILED test_bad.py::{name}\b", r.out)}
            missing = sorted(set(BAD_TESTS) - failed)
            runs = saved_ids(p.baseline_file())
            try:
                run_ok = "test_bad.py::test_good::good" in json.loads((p.dir / "run.json").read_text())["benchmarks"]
            except (OSError, ValueError, KeyError):
                run_ok = False
            show = p.tb("show", "main")
            report(
                6,
                case,
                not r.has_traceback()
                and not missing
                and "1 passed" in r.out
                and runs
                and runs[-1] == {"test_bad.py::test_good::good"}
                and run_ok
                and show.rc == 0,
                f"{len(BAD_TESTS)} benchmarks giving bad values (extra_info = 'oops', object, cycle, NaN, 300-deep; flops='lots', bytes=-5, "
                f"flops=NaN, name=123; raising, SystemExit mid-rounds){' under -n 2' if extra else ''}: each fails its own test; the good one saved, run file whole, baseline readable",
                [
                    r.cmd,
                    f"not reported FAILED: {missing}",
                    *r.lines("INTERNALERROR", "Traceback", limit=3),
                    *(line_ for line_ in r.out.splitlines() if line_.startswith("FAILED")),
                ][:16]
                + [f"baseline runs: {runs}; run file whole: {run_ok}", *show.evidence(limit=3)],
            )
        finally:
            p.stop_all()

    # 6.run_file_values: measured_order null (reads as absent), median 0, reversed interval.
    p = Project("6-run-values")
    p.write("test_s.py", TWO_TESTS)
    try:
        p.pytest("--bench-save=main", "--bench-json=run.json", timeout=120)
        pristine = (p.dir / "run.json").read_text()
        for case, change, must_read in (
            ("measured_order_null", lambda d: d.update(measured_order=None), True),
            ("median_zero", lambda d: first_record(d)["stats"].update(median_ms=0), False),
            (
                "ci95_reversed",
                lambda d: first_record(d)["stats"].update(ci95_ms=first_record(d)["stats"]["ci95_ms"][::-1]),
                False,
            ),
        ):
            (p.dir / "run.json").write_text(pristine)
            mutate(p.dir / "run.json", change)
            runs = [
                p.tb("compare", "main", "run.json"),
                p.tb("report", "run.json", "main", "-o", "r.html"),
                p.tb("save", "main", "run.json", "--dir", "tmpbase"),
            ]
            if must_read:
                ok_ = all(r.rc in (0, 1) and not r.has_traceback() for r in runs)
            else:
                ok_ = all(r.rc == 2 and not r.has_traceback() and ("median" in r.out or "ci95" in r.out) for r in runs)
            report(
                6,
                case,
                ok_,
                f"a run file with {case.replace('_', ' ')}: compare, report, save {'read it' if must_read else 'refuse it in one line naming the field'}",
                [line for r in runs for line in r.evidence(limit=3)],
            )
    finally:
        p.stop_all()

    # 6.dev_full: every output to /dev/full: one line, no traceback.
    p = Project("6-dev-full")
    p.write("test_s.py", TWO_TESTS)
    try:
        runs = [p.pytest("--bench-json=run.json", timeout=120)]
        for option in ("--bench-md", "--bench-csv", "--bench-json", "--bench-html", "--bench-openmetrics"):
            runs.append(p.pytest(f"{option}=/dev/full", timeout=120))
        runs += [
            p.tb("compare", "run.json", "run.json", "--md", "/dev/full"),
            p.tb("compare", "run.json", "run.json", "--csv", "/dev/full"),
            p.tb("report", "run.json", "-o", "/dev/full"),
        ]
        bad = [r for r in runs[1:] if r.has_traceback() or r.timed_out or r.rc == 0 or "/dev/full" not in r.out]
        report(
            6,
            "dev_full",
            not bad,
            "--bench-md/csv/json/html/openmetrics=/dev/full and compare --md/--csv, report -o /dev/full: a non-zero exit with one line naming the path",
            [line for r in bad for line in r.evidence("/dev/full", "Error", "error", "Traceback", limit=4)],
        )
    finally:
        p.stop_all()

    # 6.newer_keys: unknown keys a newer version wrote survive a --bench-save and a `tesserabench save`.
    p = Project("6-newer-keys")
    p.write("test_s.py", TWO_TESTS)
    try:
        p.pytest("--bench-save=main", "--bench-json=run.json", timeout=120)

        def add_keys(doc):
            doc["future_top"] = {"x": 1}
            run = doc["runs"][0] if "runs" in doc else doc
            run["future_run"] = [1, 2]
            record = first_record(doc)
            record["future_record"] = "r"
            record["stats"]["future_stat"] = 1.5
            record["sampling"]["future_sampling"] = True

        mutate(p.baseline_file(), add_keys)
        r = p.pytest("--bench-save=main", timeout=120)
        text = p.baseline_file().read_text()
        kept = [k for k in ("future_top", "future_run", "future_record", "future_stat", "future_sampling") if k in text]
        mutate(p.dir / "run.json", add_keys)
        s_ = p.tb("save", "other", "run.json")
        other = p.baseline_file("other")
        kept2 = [
            k
            for k in ("future_run", "future_record", "future_stat", "future_sampling")
            if other and k in other.read_text()
        ]
        report(
            6,
            "newer_keys_kept",
            r.rc == 0 and len(kept) == 5 and s_.rc == 0 and len(kept2) == 4,
            "unknown keys (top, run, record, stats, sampling) survive --bench-save and `tesserabench save`",
            [r.cmd, f"kept by --bench-save: {kept}", s_.cmd, f"kept by tesserabench save: {kept2}"],
        )
    finally:
        p.stop_all()

    # 6.save_names: --bench-save / --bench-compare names that are not names.
    p = Project("6-save-names")
    p.write("test_s.py", TWO_TESTS)
    try:
        bad = []
        for name in ("main\n", "../evil", "main/sub", " main", "main.json", "-x"):
            r = p.pytest(f"--bench-save={name}", timeout=60)
            made = [x.name for x in (p.dir / "baselines").rglob("*")] if (p.dir / "baselines").exists() else []
            made += [x.name for x in p.dir.parent.glob("evil*")]
            if r.rc != 4 or r.has_traceback() or made or "passed" in r.out:
                bad.append((name, r, made))
        r = p.pytest("--bench-compare=main\n", timeout=60)
        if r.rc != 4 or r.has_traceback():
            bad.append(("compare main\\n", r, []))
        report(
            6,
            "save_names",
            not bad,
            "--bench-save='main\\n', '../evil', 'main/sub', ' main', 'main.json', '-x' (and --bench-compare='main\\n'): a usage error before measuring, no folder made",
            [
                line
                for name, r, made in bad
                for line in [f"name {name!r}: made {made}", *r.evidence("error", "ERROR", "passed", limit=3)]
            ],
        )
    finally:
        p.stop_all()

    # 6.fifo: GITHUB_STEP_SUMMARY and --bench-md pointing at a FIFO nobody reads.
    p = Project("6-fifo")
    p.write("test_s.py", TWO_TESTS)
    try:
        os.mkfifo(p.dir / "summary.fifo")
        os.mkfifo(p.dir / "md.fifo")
        r1 = p.pytest("--bench", env={"GITHUB_STEP_SUMMARY": str(p.dir / "summary.fifo")}, timeout=45)
        r2 = p.pytest("--bench-md=md.fifo", timeout=45)
        report(
            6,
            "fifo_outputs",
            not r1.timed_out and r1.rc == 0 and "FIFO" in r1.out and not r2.timed_out and not r2.has_traceback(),
            f"GITHUB_STEP_SUMMARY and --bench-md naming a FIFO nobody reads: no hang, one line ({r1.seconds:.0f} s, {r2.seconds:.0f} s)",
            [*r1.evidence("FIFO", "summary", "passed"), *r2.evidence("FIFO", "md", "passed", "error")],
        )
    finally:
        p.stop_all()

    # 6.lock_files: saving to many baselines does not pile up lock files in the temp folder.
    p = Project("6-lock-files")
    p.write("test_s.py", TWO_TESTS)
    try:
        p.pytest("--bench", "--bench-json=run.json", timeout=120)
        for i in range(8):
            p.tb("save", f"b{i}", "run.json", timeout=60)
        locks = (
            sorted(x.name for x in (p.tmp / "tesserabench-locks").glob("*"))
            if (p.tmp / "tesserabench-locks").exists()
            else []
        )
        notes = [x for x in locks if "holder" in x]
        report(
            6,
            "lock_files",
            len(locks) <= 8 and not notes and all(re.fullmatch(r"slot-\d\d\.lock", x) for x in locks),
            f"8 saves to 8 baselines: {len(locks)} lock slot file(s) in tesserabench-locks/, no holder notes left",
            [f"tesserabench-locks/: {locks}"],
        )
    finally:
        p.stop_all()

    # 6.sigterm_save: SIGTERM while a fresh process of --bench-save-processes is inside a test.
    p = Project("6-sigterm-save")
    p.write("test_w.py", BLOCKER)
    args = [a for a in FAST if not a.startswith("--bench-save-processes")]
    argv = [PY, "-m", "pytest", *COMMON, *args, "--bench-save=main", "--bench-save-processes=2"]
    try:
        first = p.run(argv, timeout=150)
        before = p.baseline_file().read_text() if p.baseline_file() else None
        lead, reached = blocked_lead(p, argv, 1)
        signalled = time.monotonic()
        kill_pid(lead.pid, signal.SIGTERM)
        try:
            lead.wait(timeout=20)
            took = time.monotonic() - signalled
        except subprocess.TimeoutExpired:
            took = None
            kill_group(lead)
            lead.wait(timeout=30)
        wait_for(lambda: not p.processes(), 10)
        left = p.processes()
        folders = leftovers(p)[0]
        after = p.baseline_file().read_text() if p.baseline_file() else None
        report(
            6,
            "sigterm_save",
            first.rc == 0
            and reached
            and took is not None
            and took < 15
            and not left
            and not folders
            and after == before,
            "SIGTERM of --bench-save --bench-save-processes=2 while a fresh process is in a test: ends promptly, nothing saved, nothing left"
            + (f" ({took:.0f} s)" if took is not None else " (still running at 20 s, then SIGKILLed by the harness)"),
            [
                f"$ kill -TERM {lead.pid}  ({shlex.join(str(a) for a in argv[1:])})",
                f"ended after: {took if took is None else round(took, 1)} s",
                *p.describe(left),
                f"temp folders left: {folders}",
                f"baseline unchanged: {after == before}",
                "lead's output tail: " + p.log("lead.log")[-300:].replace(chr(10), " / "),
            ],
        )
    finally:
        p.stop_all()


# ---------------------------------------------------------------------------------------------
# Class 7: `tesserabench show`: widths and names


def class_7() -> None:
    p = Project("7-show")
    p.write("test_s.py", TWO_TESTS)
    try:
        p.pytest("--bench-save=main", timeout=120)
        for width in ("-1", "0", "3", "abc", "99999999"):
            r = p.tb("show", "main", f"--width={width}")
            good = (r.rc == 0 and "test_s.py::test_a" in r.out) or (
                r.rc == 2 and "width" in r.out and len(r.out.strip().splitlines()) <= 3
            )
            report(
                7,
                f"width_{width}",
                good and not r.has_traceback(),
                f"show main --width={width}: either the table or a one-line usage error naming --width",
                r.evidence(),
            )
        for name in ("main\n", ".hidden", "-", "main.json", "..main", "a..b", "", "x" * 101, "../main", "main."):
            r = p.tb("show", name)
            suggests = re.search(r"--bench-save=" + re.escape(name) + r"(\s|$|`|')", r.out) is not None or (
                name and f"--bench-save={shlex.quote(name)}" in r.out
            )
            says_invalid = (
                re.search(r"not a (valid )?(baseline )?name|invalid|must|letters|at most", r.out, re.I) is not None
            )
            report(
                7,
                f"name_{ascii(name)[1:-1][:12] or 'empty'}",
                r.rc == 2 and not r.has_traceback() and not suggests and says_invalid,
                f"show {ascii(name)}: exit 2, says the name is not a valid baseline name, suggests no save under it",
                r.evidence(),
            )
    finally:
        p.stop_all()


# ---------------------------------------------------------------------------------------------
# Main

CLASSES = {1: class_1, 2: class_2, 3: class_3, 4: class_4, 5: class_5, 6: class_6, 7: class_7}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated class numbers (default: all)")
    parser.add_argument("--keep", action="store_true", help="keep the case folders")
    args = parser.parse_args()
    only = [int(c) for c in args.only.split(",") if c.strip()] or sorted(CLASSES)
    BASE.mkdir(parents=True, exist_ok=True)
    began = time.monotonic()
    for number in only:
        print(f"== class {number}: {CLASS_TITLES[number]}", flush=True)
        started = time.monotonic()
        try:
            CLASSES[number]()
        except Exception:  # a harness error is a FAIL of its own, never a lost class
            report(number, "harness", False, "the battery itself raised", traceback.format_exc().splitlines()[-12:])
        print(f"   ({time.monotonic() - started:.0f} s)", flush=True)
    print()
    print(f"{'class':<40} {'cases':>5} {'pass':>5} {'fail':>5}")
    for number in only:
        mine = [r for r in RESULTS if r.cls == number]
        passed = sum(r.ok for r in mine)
        print(f"{str(number) + ' ' + CLASS_TITLES[number]:<40} {len(mine):>5} {passed:>5} {len(mine) - passed:>5}")
    total, passed = len(RESULTS), sum(r.ok for r in RESULTS)
    print(f"{'all':<40} {total:>5} {passed:>5} {total - passed:>5}")
    print(f"took {time.monotonic() - began:.0f} s")
    if not args.keep:
        shutil.rmtree(BASE, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
