"""IMPOSSIBLE through the plugin, on a CPU with declared peaks (--bench-peaks=FILE)."""

import json

import pytest

TESTS = """
def work():
    return sum(range(2000))  # tens of microseconds

def test_honest(bench):
    bench(work, flops=2000)

def test_claims_too_much(bench):
    bench(work, flops=10**12)  # a teraflop in microseconds: no CPU does that

def test_claims_too_many_bytes(bench):
    bench(work, bytes=10**12)
"""


@pytest.fixture
def peaks_file(tmp_path):
    path = tmp_path / "peaks.json"
    path.write_text(json.dumps({"name": "this-cpu", "tflops": {"fp32": 1.0}, "gbps": 100.0}))
    return path


def test_throughput_beyond_the_declared_roofline_fails_as_impossible(pytester, fast, peaks_file, tmp_path):
    pytester.makepyfile(test_p=TESTS)
    out = tmp_path / "run.json"
    result = pytester.runpytest("--bench", f"--bench-peaks={peaks_file}", f"--bench-json={out}", *fast)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(
        [
            "IMPOSSIBLE (severe); * TFLOP/s is *x the fp32 peak of this-cpu "
            "(1 TFLOP/s, declared figure); usual causes: *",
        ]
    )
    result.stdout.fnmatch_lines(["*_ test_claims_too_many_bytes _*", "IMPOSSIBLE (severe); * GB/s is *"])
    run = json.loads(out.read_text())["benchmarks"]
    assert run["test_p.py::test_honest"]["verdict"] is None
    assert run["test_p.py::test_honest"]["roofline"]["efficiency"] < 1  # declared peaks draw the roofline on a CPU
    assert run["test_p.py::test_claims_too_much"]["verdict"]["status"] == "IMPOSSIBLE"
    assert run["test_p.py::test_claims_too_much"]["outcome"] == "failed"


def test_without_peaks_nothing_is_judged_on_a_cpu(pytester, fast):
    pytester.makepyfile(test_p=TESTS)
    pytester.runpytest("--bench", *fast).assert_outcomes(passed=3)


def test_a_bad_peaks_file_is_a_usage_error_before_measuring(pytester, tmp_path):
    bad = tmp_path / "peaks.json"
    bad.write_text(json.dumps({"tflops": {"fp32": "fast"}, "gbps": 1}))
    pytester.makepyfile(test_p=TESTS)
    result = pytester.runpytest("--bench", f"--bench-peaks={bad}")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"ERROR: --bench-peaks: {bad}: fp32 is 'fast'; expected a positive number*"])


def test_a_failure_line_shows_a_hostile_call_name_as_text(pytester, fast, peaks_file):
    pytester.makepyfile(
        test_p="""
def test_named(bench):
    bench(lambda: sum(range(2000)), flops=10**12, name="\\x1b]0;title\\x07\\u202eevil")
"""
    )
    result = pytester.runpytest("--bench", f"--bench-peaks={peaks_file}", *fast)
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "[\\x1b]0;title\\x07\\u202eevil] IMPOSSIBLE" in out
    assert "\x1b]0;" not in out and "\u202e" not in out
