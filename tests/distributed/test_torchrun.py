"""pytest under torchrun, for real: gloo ranks as subprocesses on this machine.

Each test launches ``python -m torch.distributed.run --standalone`` (torchrun: a free port, its
own store) and reads every rank's output from torchrun's log folder. Small messages and short
measurement budgets keep each launch to seconds; the ranks' start-up (importing torch) is most of it.
"""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from nccl_tests_factors import FACTORS as NCCL_TESTS_FACTORS

REPO = Path(__file__).resolve().parents[2]
SUITE = "tests/bench/test_bench_collectives.py"
FAST = ("--bench-max-time=0.02", "--bench-warmup=0", "--bench-min-rounds=3")
# the operation is the test's name without "test_"
FACTORS = {f"test_{op}": factor for op, factor in NCCL_TESTS_FACTORS.items()}


def torchrun(nproc: int, args, *, cwd: Path, logs: Path, env=None, timeout: float = 240):
    """(return code, {rank: its stdout and stderr}, torchrun's own output, seconds)."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}"]
    command += ["--log-dir", str(logs), "--redirects", "3", "-m", "pytest", "-p", "no:cacheprovider", *args]
    # TMPDIR: the ranks' measurement lock is this test's own, not the one other sessions share.
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).parent), "TMPDIR": str(logs.parent), **(env or {})}
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        environment.pop(name, None)  # each rank is a plain pytest session, not one of our workers
    started = time.monotonic()
    proc = subprocess.run(command, cwd=cwd, env=environment, capture_output=True, text=True, timeout=timeout)
    seconds = time.monotonic() - started
    outputs = {}
    for rank in range(nproc):
        (folder,) = logs.glob(f"*/attempt_0/{rank}")
        outputs[rank] = (folder / "stdout.log").read_text() + (folder / "stderr.log").read_text()
    return proc.returncode, outputs, proc.stdout + proc.stderr, seconds


def _check_suite_run(tmp_path: Path, nproc: int) -> None:
    run_json, baselines, writes = tmp_path / "run.json", tmp_path / "baselines", tmp_path / "writes.log"
    code, out, launcher, _ = torchrun(
        nproc,
        [
            SUITE,
            "--bench",
            *FAST,
            f"--bench-json={run_json}",
            "--bench-save=dist",
            f"--bench-dir={baselines}",
            "-p",
            "write_probe",
        ],  # fmt: skip
        cwd=REPO,
        logs=tmp_path / "logs",
        env={"TESSERABENCH_WRITE_LOG": str(writes)},
    )
    assert code == 0, out[0][-3000:] + launcher[-2000:]
    # Rank 0 alone prints the table, with the bus bandwidth; every rank ran every test.
    assert f"tesserabench: rank 0 of {nproc} (gloo" in out[0]
    assert "a round's time is the slowest rank's" in out[0]
    assert "= tesserabench =" in out[0] and "busbw" in out[0]
    for rank in range(1, nproc):
        assert "= tesserabench =" not in out[rank]
        assert f"tesserabench: rank {rank} of {nproc} (gloo" in out[rank]
    # the counts only: pytest pads the line with '=' to the terminal's width, less its duration's
    passed = [line for line in out[0].splitlines() if " passed" in line][-1].strip("= ").split(" in ")[0]
    assert passed.endswith("passed") and all(passed in out[rank] for rank in range(nproc)), passed
    # Rank 0 alone wrote files: the run and the baseline, keyed by backend and world size.
    (baseline,) = baselines.glob("dist/*.json")
    assert baseline.name.endswith(f"-gloo-x{nproc}.json")
    assert sorted(writes.read_text().splitlines()) == sorted([f"0 {run_json}", f"0 {baseline}"])
    run = json.loads(run_json.read_text())
    assert (run["machine"]["world_size"], run["machine"]["backend"], run["machine"]["nodes"]) == (nproc, "gloo", 1)
    # Bus bandwidth as nccl-tests defines it, computed here from the record's own median.
    operations = set()
    for record_id, record in run["benchmarks"].items():
        block = record["distributed"]
        assert (block["world_size"], block["backend"]) == (nproc, "gloo")
        test = record_id.split("::")[1].split("[")[0]
        if test not in FACTORS:
            continue
        operations.add(test)
        algbw = block["comm_bytes"] / (record["stats"]["median_ms"] / 1e3) / 1e9
        assert block["algbw_gbps"] == pytest.approx(algbw, rel=1e-9)
        assert block["busbw_gbps"] == pytest.approx(algbw * FACTORS[test](nproc), rel=1e-9)
    assert operations == set(FACTORS)
    mesh = [i for i in run["benchmarks"] if "test_mesh_all_reduce" in i]
    assert any(i.endswith("::tp all_reduce") for i in mesh) and any(i.endswith("::dp all_reduce") for i in mesh)


def test_collective_suite_on_2_ranks(tmp_path):
    _check_suite_run(tmp_path, 2)


def test_collective_suite_on_4_ranks(tmp_path):
    _check_suite_run(tmp_path, 4)


FAILING = """
import torch
import torch.distributed as td


def test_rank1_asserts_after_its_collectives(dist):
    td.all_reduce(torch.ones(4))
    assert dist.rank != 1, "rank 1 disagrees"


def test_in_step_again(dist):
    t = torch.ones(4)
    td.all_reduce(t)
    assert t[0].item() == dist.world_size


def test_rank1_raises_while_measured(bench, dist):
    calls = []

    def step():
        calls.append(1)
        if dist.rank == 1 and len(calls) > 3:  # inside the measurement, however slow the machine
            raise ValueError("boom on rank 1")
        td.all_reduce(torch.ones(4))

    bench(step)


def test_never_runs(dist):
    raise AssertionError("the session should have stopped before this test")
"""


def test_a_rank_that_raises_fails_the_test_on_every_rank_and_nobody_hangs(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_failing.py").write_text(FAILING)
    timeout = 3
    args = ["test_failing.py", "--bench", "--bench-max-time=0.5", "--bench-warmup=0", f"--bench-dist-timeout={timeout}"]
    code, out, launcher, seconds = torchrun(2, args, cwd=project, logs=tmp_path / "logs")
    assert code != 0
    for rank in (0, 1):
        text = out[rank]
        # A failure after the collectives: every rank fails the test, names rank 1, and goes on.
        assert "tesserabench: rank 1 failed in call: AssertionError: rank 1 disagrees" in text
        # A failure inside a measurement leaves rank 0 waiting on rank 1: named, then every rank stops.
        assert "tesserabench: rank 1 failed in call: ValueError: boom on rank 1" in text
        assert "Interrupted: tesserabench: the ranks' collectives are out of step after" in text
        assert "2 failed, 1 passed" in text  # test_never_runs did not run
    assert "rank 0 failed waiting for it" in out[0]
    assert seconds < 60 + 4 * timeout, seconds  # start-up, plus one group timeout, not a hang


def test_ranks_that_collected_different_tests_stop_with_a_clear_error(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / "test_x.py").write_text("def test_a(dist):\n    pass\n\ndef test_b(dist):\n    pass\n")
    (project / "conftest.py").write_text(
        "import os\n"
        "def pytest_collection_modifyitems(items):\n"
        "    if os.environ['RANK'] == '1':\n"
        "        items[:] = [i for i in items if i.name != 'test_b']\n"
    )
    code, out, _, _ = torchrun(2, ["test_x.py"], cwd=project, logs=tmp_path / "logs")
    assert code != 0
    for rank in (0, 1):
        assert "ERROR: tesserabench: the ranks collected different tests: rank 0 has 2, rank 1 has 1" in out[rank]
        assert "rank 0 runs 'test_x.py::test_b', rank 1 runs nothing" in out[rank]
        assert " passed" not in out[rank]


@pytest.mark.skipif(
    not Path("/dev/nvidiactl").exists(), reason="needs a CUDA GPU: NCCL on one GPU (a later GPU session runs it)"
)
def test_nccl_on_one_gpu_runs_and_records(tmp_path):
    run_json = tmp_path / "run.json"
    code, out, launcher, _ = torchrun(
        1, [SUITE, "--bench", *FAST, f"--bench-json={run_json}"], cwd=REPO, logs=tmp_path / "logs", timeout=590
    )
    assert code == 0, out[0][-3000:] + launcher[-2000:]
    run = json.loads(run_json.read_text())
    assert (run["machine"]["backend"], run["machine"]["world_size"]) == ("nccl", 1)
    assert all(r["timer"] == "cuda_event" for r in run["benchmarks"].values())
