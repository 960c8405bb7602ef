"""--bench-save while another process holds the baseline's lock: the save waits a bounded time
saying who holds it, then keeps the run in a file and prints the command that saves it later
(`tesserabench save`), which works once the lock is free. The holder is a real process that holds
the lock until told to let go; the timeouts only bound waits that must fail."""

import re
import shlex

import pytest
from lock_holder import start_holder, stop

from pytest_tesserabench import cli
from pytest_tesserabench.history import baseline
from pytest_tesserabench.machine.device import machine_key
from pytest_tesserabench.record import files


def test_a_locked_baseline_keeps_the_run_and_tesserabench_save_saves_it_later(pytester, private_tmp, fast):
    pytester.makepyfile(
        "def test_a(bench):\n    bench(lambda: None)\n\ndef test_b(bench):\n    bench(lambda: sum(range(10)))\n"
    )
    path = baseline.baseline_path(pytester.path / "baselines", "main", machine_key())
    path.parent.mkdir(parents=True)
    holder = start_holder(files.lock_for(path).lock_file, private_tmp)
    try:
        # A process of its own: a wait that never ends fails this test (the timeout: a safety net).
        result = pytester.runpytest_subprocess("--bench-save=main", "--bench-lock-timeout=1", *fast, timeout=300)
    finally:
        stop(holder)
    output = result.stdout.str()
    assert f"waiting for the lock of baseline {path}" in output and f"held by pid {holder.pid} (" in output
    assert "lock_holder.py" in output  # who holds it
    assert "ERROR: --bench-save=main: not saved yet: gave up waiting" in output
    assert f"If it is stuck, end it (kill {holder.pid})" in output
    assert "nothing saved" not in output
    assert result.ret == pytest.ExitCode.TESTS_FAILED  # the save that was asked for did not happen
    assert not path.exists()

    found = re.search(r"save them once the lock is free: (tesserabench save .*)$", output, re.MULTILINE)
    assert found, output
    command = shlex.split(found.group(1))
    assert command[:3] == ["tesserabench", "save", "main"]
    assert cli.main(command[1:]) == cli.EXIT_OK  # the lock is free now
    (run,) = baseline.load_runs(path)
    assert sorted(i.rsplit("::", 1)[1] for i in run.benchmarks) == ["test_a", "test_b"]


def test_tesserabench_save_refuses_a_baseline_file_and_a_run_of_failures(tmp_path, capsys):
    run = {"schema": 1, "machine": {"device": "cpu", "arch": "x86_64"}, "benchmarks": {}}
    empty = tmp_path / "run.json"
    files.write_json(empty, run)
    assert cli.main(["save", "main", str(empty), "--dir", str(tmp_path / "b")]) == cli.EXIT_USAGE
    assert "holds no passing benchmark; nothing to save" in capsys.readouterr().err
