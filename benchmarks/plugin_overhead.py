"""What the plugin costs, measured (not a test): run `python benchmarks/plugin_overhead.py`.

1. The fixture's per-call overhead on an empty function: without --bench (a plain call through
   ``bench``), and with --bench (the timer's floor: the median an empty function is measured at).
2. The cost of ``pytest`` without --bench over a 200-test suite, with and without the plugin
   (target: under 5% more), alternating the two, median of several runs each.
3. The spread of a fixed CPU workload: the CV of round medians inside one measurement, and the
   spread of the medians of repeated measurements.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pytest_tesserabench.measure import sampling
from pytest_tesserabench.measure.fixture import Bench
from pytest_tesserabench.measure.timing import CpuTimer
from pytest_tesserabench.options import Settings


def empty():
    return None


def per_call_overhead(n: int = 200_000) -> tuple[float, float]:
    """ns per call of empty() directly and through a disabled bench (best of 5 passes each)."""

    def fresh_fixture():  # one test's fixture: each of its calls needs its own name
        return Bench(
            instruments=None,
            measurer=sampling.LocalMeasurer(),
            nodeid="x",
            params={},
            group="g",
            settings=Settings(enabled=False),
        )

    def direct():
        t0 = time.perf_counter_ns()
        for _ in range(n):
            empty()
        return (time.perf_counter_ns() - t0) / n

    names = [f"call{i}" for i in range(n)]

    def through_bench():
        fixture = fresh_fixture()
        t0 = time.perf_counter_ns()
        for name in names:
            fixture(empty, name=name)
        return (time.perf_counter_ns() - t0) / n

    return min(direct() for _ in range(5)), min(through_bench() for _ in range(5))


def measured_floor() -> float:
    """The median (ns) --bench reports for an empty function: the CPU timer's per-call floor."""
    m = sampling.measure(CpuTimer(empty), sampling.Budget(max_time=1.0, min_rounds=5, warmup=0.1))
    return m.summary()["median_ms"] * 1e6


def pytest_session_cost(runs: int) -> tuple[float, float]:
    """Median wall seconds of `pytest -q` over 200 trivial tests, with and without the plugin."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "pytest.ini").write_text("[pytest]\n")
        for i in range(20):
            body = "\n".join(f"def test_{i}_{j}():\n    assert {j} + 1 > {j}\n" for j in range(10))
            (root / f"test_mod{i}.py").write_text(body)
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist", str(root)]
        # As users run it: with bytecode caches (a PYTHONDONTWRITEBYTECODE shell would recompile
        # every module of the plugin on every start and bill that to it).
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        subprocess.run(base, capture_output=True, cwd=root, env=env)  # writes the caches
        with_plugin, without = [], []
        for _ in range(runs):
            for extra, sink in (([], with_plugin), (["-p", "no:tesserabench"], without)):
                t0 = time.perf_counter()
                proc = subprocess.run(base + extra, capture_output=True, text=True, cwd=root, env=env)
                sink.append(time.perf_counter() - t0)
                if "200 passed" not in proc.stdout:
                    raise RuntimeError(proc.stdout + proc.stderr)
        return statistics.median(with_plugin), statistics.median(without)


def workload_spread(repeats: int) -> tuple[list[float], list[float]]:
    """CV of round medians within each measurement, and the medians, for a fixed workload."""
    cvs, medians = [], []
    for _ in range(repeats):
        m = sampling.measure(
            CpuTimer(lambda: sum(range(20_000))), sampling.Budget(max_time=1.0, min_rounds=5, warmup=0.1)
        )
        s = m.summary()
        cvs.append(s["cv"])
        medians.append(s["median_ms"])
    return cvs, medians


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=7, help="pytest sessions per configuration")
    parser.add_argument("--repeats", type=int, default=5, help="measurements of the fixed workload")
    args = parser.parse_args()

    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cpus, "
        f"Python {platform.python_version()}"
    )
    direct, through = per_call_overhead()
    print(f"empty function, plain call:              {direct:8.1f} ns")
    print(f"empty function through bench (no --bench): {through:6.1f} ns  (+{through - direct:.1f} ns per call)")
    print(f"empty function measured with --bench:      {measured_floor():6.1f} ns  (the CPU timer's floor)")
    with_plugin, without = pytest_session_cost(args.runs)
    print(f"pytest, 200 tests, plugin loaded:  {with_plugin * 1e3:7.1f} ms (median of {args.runs})")
    print(f"pytest, 200 tests, -p no:tesserabench: {without * 1e3:7.1f} ms")
    print(f"plugin cost: {100 * (with_plugin / without - 1):+.1f}%  (target: under +5%)")
    cvs, medians = workload_spread(args.repeats)
    spread = (max(medians) - min(medians)) / statistics.median(medians)
    print(
        f"fixed workload sum(range(20000)): CV of round medians per measurement "
        f"{', '.join(f'{c:.2%}' for c in cvs)}; medians {', '.join(f'{m * 1e3:.1f} us' for m in medians)} "
        f"(max-min spread {spread:.2%})"
    )


if __name__ == "__main__":
    main()
