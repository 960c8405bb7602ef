"""The terminal summary and its compact form."""

from pytest_tesserabench.report.terminal import relative_speeds, render_summary, row_label
from pytest_tesserabench.results import BenchRecord, Stats


def record(nodeid, name, median, group="g", tflops=None, timer="cpu", noisy=False):
    stats = Stats(
        median_ms=median,
        ci95_ms=(median * 0.99, median * 1.01),
        mean_ms=median,
        min_ms=median * 0.9,
        max_ms=median * 1.1,
        iqr_ms=median * 0.02,
        stdev_ms=median * 0.01,
        cv=0.01,
        rounds=7,
        samples=7,
        noisy=noisy,
    )
    return BenchRecord(
        nodeid=nodeid, name=name, group=group, timer=timer, rounds_ms=[median] * 7, stats=stats, tflops=tflops
    )


def test_row_labels_and_relative_speed():
    recs = [
        record("t.py::test_mm[M=64-bf16]", None, 2.0, tflops=10.0),
        record("t.py::test_mm[M=64-bf16]", "torch", 1.0),
    ]
    assert [row_label(r) for r in recs] == ["M=64-bf16", "M=64-bf16 · torch"]
    assert relative_speeds(recs) == {recs[0].id: 1.0, recs[1].id: 2.0}
    recs[0].timer = "interpreter"  # an interpreted kernel beside a CPU call: no ratio
    assert relative_speeds(recs)[recs[1].id] is None


def test_table_per_group():
    recs = {
        r.id: r
        for r in (
            record("a.py::t[1]", None, 1.0, group="A", tflops=3.0),
            record("b.py::u", None, 2.0, group="B", timer="interpreter"),
        )
    }
    text = render_summary(recs, width=140)
    assert text.index("A") < text.index("B")
    assert "TFLOP/s" in text and "3" in text and "interpreter, not gated" in text and "±95%" in text


def test_quiet_is_one_line_per_benchmark_with_its_notes():
    recs = {r.id: r for r in (record("a.py::t", None, 1.0), record("a.py::t", "x", 2.0, noisy=True))}
    lines = render_summary(recs, quiet=True).splitlines()
    assert lines == ["a.py::t  1.00 ms ±1.0%", "a.py::t::x  2.00 ms ±1.0%  (noisy)"]


def test_a_noisy_record_says_so_in_the_table():
    recs = {r.id: r for r in (record("a.py::t", None, 1.0, noisy=True), record("a.py::u", None, 1.0))}
    lines = render_summary(recs, width=140).splitlines()
    assert [("noisy" in line) for line in lines if "a.py" not in line and "1.00 ms" in line] == [True, False]
