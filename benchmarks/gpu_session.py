"""The GPU session's work, one step per command, each well inside the device's 10-minute limit.

    ./dev gpu truth       benchmarks/gpu_truth.py: the whole device check in one bounded command
                          (--dry-run runs it here without a GPU; --budget S, --only PARTS)
    ./dev gpu install     pip install --no-deps --no-build-isolation -e .  (the device has no network)
    ./dev gpu tests       the project's tests with the GPU present (GPU-only tests run here)
    ./dev gpu validate    benchmarks/gpu_validation.py: events, graphs, do_bench, ncu side by side
    ./dev gpu suite       the benchmark suite once, with telemetry, roofline and static analysis
    ./dev gpu baseline    the suite three times into baselines/main (a GPU baseline to commit)
    ./dev gpu tune        benchmarks/tune_matmul_gpu.py (the tuner against exhaustive and autotune)
    ./dev gpu collectives the collective suite with NCCL on one GPU (world size 1)
    ./dev gpu ab          A/A of the bf16 matmul and row kernels, --bench-ab=HEAD with 1 and with 8
                          served processes per side: does a process's bias vanish for device time?
    ./dev gpu gate        benchmarks/gate_real.py, history mode and pytest-benchmark, on the device
                          machine's CPUs: the history rule's figures on a dedicated, steadier host
                          than the CI VM (where its speed steps leave it INCONCLUSIVE)

Every step writes its log and JSON under $OUT (the device tool's folder that comes back), else
under .bench-out/. It uses the interpreter it runs under (the device's Python, whose torch and
triton are already installed); nothing here creates a virtual environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(os.environ.get("OUT") or ROOT / ".bench-out")
PY = sys.executable


def run(step: str, *command: str, timeout: int = 540) -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    log = OUT / f"{step}.log"
    started = time.perf_counter()
    with open(log, "w") as stream:
        try:
            code = subprocess.run(
                command, cwd=ROOT, stdout=stream, stderr=subprocess.STDOUT, timeout=timeout
            ).returncode
        except subprocess.TimeoutExpired:
            code = 124
    tail = log.read_text(errors="replace").strip().splitlines()[-15:]
    print(f"== {step}: exit {code} in {time.perf_counter() - started:.0f} s ({log})", *tail, sep="\n")
    return code


def pytest(*args: str) -> list[str]:
    return [PY, "-m", "pytest", "-p", "no:randomly", *args]


def _tune_strategy() -> str:
    """TPE when Optuna is installed; the device has no network and may lack it: random search then."""
    import importlib.util

    if importlib.util.find_spec("optuna") is not None:
        return "bayesian"
    print("optuna is not installed here: the tune step searches at random (say so with its figures)")
    return "random"


def _ab_a_a() -> int:
    """A/A on the device: the same commit on both sides, so every REGRESSED or IMPROVED is the
    gate's error (INCONCLUSIVE: it could not tell). The device's copy of the tree may not be a git
    repository: make it one."""
    if subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True).returncode != 0:
        for git in (
            ["init", "-q"],
            ["add", "-A"],
            ["-c", "user.name=gpu", "-c", "user.email=gpu@local", "commit", "-qm", "snapshot"],
        ):
            subprocess.run(["git", *git], cwd=ROOT, check=True, capture_output=True)
    files = ("tests/bench/test_bench_matmul.py", "tests/bench/test_bench_rows.py")
    return max(
        run(
            f"ab-{n}",
            *pytest(
                *files,
                "-k",
                "bf16",
                "--bench-ab=HEAD",
                f"--bench-ab-processes={n}",
                f"--bench-json={OUT / f'ab{n}.json'}",
            ),
            timeout=280,
        )
        for n in (1, 8)
    )


STEPS = {
    "install": lambda: run("install", PY, "-m", "pip", "install", "--no-deps", "--no-build-isolation", "-e", "."),
    # every failure, not the first: GPU time is too short to rerun for the next one
    "tests": lambda: run("tests", *pytest("-q", "-n", "4", "tests", "-rs", "--junitxml", str(OUT / "tests.xml"))),
    "validate": lambda: run(
        "validate", PY, "benchmarks/gpu_validation.py", "--ncu", "--json", str(OUT / "validation.json")
    ),
    "suite": lambda: run(
        "suite",
        *pytest("tests/bench", "--bench", f"--bench-json={OUT / 'suite.json'}", f"--bench-html={OUT / 'suite.html'}"),
    ),
    "baseline": lambda: max(
        run(f"baseline-{i}", *pytest("tests/bench", "--bench-save=main", f"--bench-json={OUT / f'save{i}.json'}"))
        for i in (1, 2, 3)
    ),
    "tune": lambda: run(
        "tune",
        PY,
        "benchmarks/tune_matmul_gpu.py",
        "--strategy",
        _tune_strategy(),
        "--results",
        str(OUT / "tune_matmul_gpu"),
    ),
    "collectives": lambda: run(
        "collectives",
        *pytest("tests/bench/test_bench_collectives.py", "--bench", f"--bench-json={OUT / 'collectives.json'}"),
    ),
    "ab": _ab_a_a,
    "gate": lambda: run(
        "gate",
        PY,
        "benchmarks/gate_real.py",
        "--python",
        PY,
        "--modes",
        "history,pytest-benchmark",
        "--reps",
        "3",
        "--json",
        str(OUT / "gate_real.json"),
        timeout=590,
    ),
}


def main(argv: list[str]) -> int:
    if argv and argv[0] == "truth":
        return subprocess.run([PY, "benchmarks/gpu_truth.py", *argv[1:]], cwd=ROOT).returncode
    if not argv or argv[0] not in STEPS:
        print(__doc__)
        return 2
    return STEPS[argv[0]]()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
