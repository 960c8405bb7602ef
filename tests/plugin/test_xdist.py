"""pytest -n 2 --bench: workers measure, the controller alone reports and writes files."""

import json
import subprocess
import sys


def test_xdist_results_flow_back_to_the_controller(pytester, fast, tmp_path):
    out = tmp_path / "run.json"
    pytester.makepyfile("""
        import os, time, pytest
        @pytest.mark.bench_sizes(n=[1, 2, 3, 4])
        def test_a(bench, n):
            bench(sum, range(100 * n))
            bench(sorted, range(50 * n), name="sorted")
            bench.extra_info["worker"] = os.environ.get("PYTEST_XDIST_WORKER")
    """)
    result = pytester.runpytest("-n", "2", "--bench", f"--bench-json={out}", *fast)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["*= tesserabench =*", "*n1 · sorted*"])
    assert result.stdout.str().count("= tesserabench =") == 1
    run = json.loads(out.read_text())
    assert len(run["benchmarks"]) == 8
    workers = {b["extra_info"]["worker"] for b in run["benchmarks"].values()}
    assert workers <= {"gw0", "gw1"} and len(workers) == 2
    assert all(b["samples_ms"] for b in run["benchmarks"].values())


def test_measured_sections_never_overlap_across_workers(pytester, tmp_path):
    log = tmp_path / "spans.txt"
    pytester.makepyfile(f"""
        import time, pytest
        CALLS = {{}}
        def work(i):
            CALLS[i] = CALLS.get(i, 0) + 1
            t0 = time.perf_counter()
            time.sleep(0.002)
            with open({str(log)!r}, "a") as f:
                f.write(f"{{t0}} {{time.perf_counter()}} {{CALLS[i]}}\\n")
        @pytest.mark.parametrize("i", range(4))
        def test_a(bench, i):
            bench(work, i)
    """)
    result = pytester.runpytest(
        "-n", "2", "--bench", "--bench-max-time=0.03", "--bench-warmup=0", "--bench-min-rounds=3"
    )
    result.assert_outcomes(passed=4)
    spans = [tuple(map(float, line.split())) for line in log.read_text().splitlines()]
    # The first call of each test runs outside the lock (it may compile kernels); every call made
    # while measuring is serialised: no two of those overlap, whatever the machine's load.
    measured = sorted((t0, t1) for t0, t1, call in spans if call > 1)
    assert len(measured) >= 4 * 3
    overlaps = [(a, b) for a, b in zip(measured, measured[1:]) if b[0] < a[1]]
    assert not overlaps


def test_importing_the_plugin_imports_nothing_heavy():
    code = (
        "import sys, pytest_tesserabench.plugin, pytest_tesserabench.measure.fixture; "
        "heavy = [m for m in ('torch', 'triton', 'numpy', 'scipy', 'rich') if m in sys.modules]; "
        "print(heavy); sys.exit(1 if heavy else 0)"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_run_without_bench_imports_nothing_heavy(pytester):
    # The whole configure/collect/run path, not only the import: a plain `pytest` stays cheap.
    pytester.makepyfile(
        """
        import sys

        def test_plain(bench):
            bench(lambda: None)

        def test_zz_nothing_heavy_was_imported():
            heavy = [m for m in ('torch', 'triton', 'numpy', 'scipy', 'rich') if m in sys.modules]
            assert heavy == []
        """
    )
    result = pytester.runpytest_subprocess("-p", "no:randomly", "-p", "no:hypothesispytest", "-p", "no:xdist")
    result.assert_outcomes(passed=2)


def test_a_kernel_that_crashes_its_worker_fails_alone_and_the_others_are_saved(pytester, fast):
    # A segfault ends a plain session as it ends pytest (nothing of that run is saved); under xdist
    # the worker is replaced, the test fails naming the crash, and the other tests are measured
    # and saved (docs/usage.md, "Bad input").
    pytester.makepyfile("""
        import ctypes

        def test_a(bench):
            bench(sum, range(100))

        def test_crash(bench):
            bench(lambda: ctypes.string_at(0))

        def test_c(bench):
            bench(sorted, range(100))
    """)
    result = pytester.runpytest_subprocess("-n", "1", "--bench-save=main", "-p", "no:randomly", *fast)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*worker 'gw0' crashed while running 'test_a_kernel_that_crashes*.py::test_crash'*"])
    (saved,) = (pytester.path / "baselines" / "main").glob("*.json")
    benchmarks = json.loads(saved.read_text())["runs"][0]["benchmarks"]
    assert sorted(name.split("::")[1] for name in benchmarks) == ["test_a", "test_c"]
