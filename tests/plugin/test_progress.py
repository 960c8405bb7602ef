"""The live status line: on a terminal while a benchmark measures, erased after; never in a log."""

import os
import pty
import subprocess
import sys

from pytest_tesserabench.report.progress import RESTORE_AND_ERASE, SAVE, StatusLine


def read_all(fd):
    chunks = []
    while True:
        try:
            data = os.read(fd, 65536)
        except OSError:  # the other end closed (EIO on Linux)
            break
        if not data:
            break
        chunks.append(data)
    return b"".join(chunks).decode("utf-8", "replace")


def test_status_line_shows_rounds_and_interval_then_erases_itself():
    read_end, write_end = os.pipe()
    now = [0.0]
    status = StatusLine(write_end, room=lambda: 52, clock=lambda: now[0])
    on_round = status.start("test_mm[M4096-bf16] · torch")
    on_round([1.0, 1.1], 0.05, 0.5)  # within the refresh interval of the start: not shown
    now[0] = 1.0
    on_round([1.0, 1.1, 1.2], 1.0, 0.031)
    status.stop()
    status.close()
    text = read_all(read_end)
    assert text.startswith(SAVE) and text.endswith(RESTORE_AND_ERASE)
    shown = [part.removeprefix(SAVE).strip() for part in text.split(RESTORE_AND_ERASE) if part.strip(SAVE)]
    assert shown == ["test_mm[M4096-bf16] · torch  warming up", "test… · torch  round 3  1.0 s  median 1.10 ms ±3.1%"]
    assert all(len(line) <= 51 for line in shown)  # never past the end of pytest's line


BENCH = """
import time
def test_slow(bench):
    bench(time.sleep, 0.002)
"""
ARGS = ["--bench", "--bench-max-time=0.5", "--bench-warmup=0", "--bench-target-ci=0.0001", "-p", "no:cacheprovider"]


def test_on_a_terminal_the_line_appears_and_is_erased(pytester):
    pytester.makepyfile(BENCH)
    master, slave = pty.openpty()
    env = {**os.environ, "COLUMNS": "200", "TERM": "xterm"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", *ARGS], cwd=pytester.path, stdin=slave, stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    output = read_all(master)
    os.close(master)
    assert proc.wait(timeout=120) == 0, output
    assert output.count(SAVE) >= 2 and "test_slow  round " in output and " s  median 2." in output
    assert output.rindex(RESTORE_AND_ERASE) < output.index("= tesserabench =")  # erased before the summary
    assert "1 passed" in output


def test_in_a_log_there_is_no_status_line(pytester):
    pytester.makepyfile(BENCH)
    result = pytester.runpytest_subprocess(*ARGS)  # output to a pipe, as in CI
    result.assert_outcomes(passed=1)
    assert SAVE not in result.stdout.str() and "round " not in result.stdout.str()


def test_quiet_turns_it_off():
    assert StatusLine.for_terminal(config=None, quiet=True) is None
