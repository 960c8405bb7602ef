"""The terminal summary: ids never split at any width, the columns, units, notes and -q."""

import re
from dataclasses import replace

import pytest

from pytest_tesserabench.record.results import ABDecision, ABResult, BenchRecord, Sampling, Stats, Verdict
from pytest_tesserabench.report.comparison_table import comparison_lines
from pytest_tesserabench.report.layout import ELLIPSIS, as_text, shorten_middle, shorten_unique
from pytest_tesserabench.report.rows import group_records, notes, relative_speeds, row_labels, sort_records
from pytest_tesserabench.report.terminal import ab_counts_line, render_summary, summary_lines, table_width


def record(nodeid, name, median, group="g", tflops=None, gbps=None, timer="cpu", noisy=False, params=None):
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
        nodeid=nodeid,
        name=name,
        group=group,
        timer=timer,
        rounds_ms=[median] * 7,
        stats=stats,
        tflops=tflops,
        gbps=gbps,
        params=params or {},
    )


def by_id(*records):
    return {r.id: r for r in records}


def test_row_labels_and_relative_speed():
    recs = [
        record("t.py::test_mm[M64-bf16]", None, 2.0, tflops=10.0),
        record("t.py::test_mm[M64-bf16]", "torch", 1.0),
    ]
    assert row_labels(recs) == ("t.py::test_mm[M64-bf16]", ["(unlabelled)", "torch"])
    # an unlabelled call is named by the function it measured, where the record knows it
    for function, label in (
        ("matmul", "matmul"),
        ("test_mm.<locals>.work", "work"),
        ("<lambda>", "(unlabelled)"),
        ("functools.partial(<function kernel>)", "(unlabelled)"),
    ):
        named = [replace(recs[0], function=function), recs[1]]
        assert row_labels(named) == ("t.py::test_mm[M64-bf16]", [label, "torch"])
    recs.append(record("t.py::test_mm[M128-bf16]", None, 4.0))
    assert row_labels(recs) == ("t.py::test_mm", ["M64-bf16", "M64-bf16 · torch", "M128-bf16"])
    assert relative_speeds(recs[:2]) == {recs[0].id: 1.0, recs[1].id: 2.0}
    recs[0] = replace(recs[0], timer="interpreter")  # an interpreted kernel beside a CPU call: no ratio
    assert relative_speeds(recs[:2])[recs[1].id] is None


def test_shorten_middle_keeps_both_ends_and_unique_cuts_keep_ids_apart():
    assert shorten_middle("abcdefghij", 10) == "abcdefghij"
    assert shorten_middle("abcdefghij", 7) == "ab…ghij"
    # Two names differing only in their middle: a plain middle cut would make them one.
    names = ["test_x[M1024-N4096-K4096-bf16]", "test_x[M2048-N4096-K4096-bf16]"]
    assert len(set(shorten_middle(n, 16) for n in names)) == 1
    short = shorten_unique(names, 16)
    assert len(set(short)) == 2 and all(len(s) == 16 for s in short)


# Ids as long as the benchmark suite's, some differing only at their end, one only in its middle.
FP8 = "tests/bench/test_bench_matmul.py::test_matmul_fp8_llm_projection"
SUITE = [
    (f"{FP8}[M16384-N28672-K4096-fp8_e4m3]", None),
    (f"{FP8}[M16384-N28672-K4096-fp8_e4m3]", "torch._scaled_mm"),
    (f"{FP8}[M16384-N8192-K28672-fp8_e4m3]", None),
    (f"{FP8}[M16384-N8192-K28672-fp8_e4m3]", "torch._scaled_mm"),
    ("tests/bench/test_bench_attention.py::test_attention[B2-H16-S8192-D128-causal_True-bf16]", None),
    ("tests/bench/test_bench_attention.py::test_attention[B2-H16-S8192-D128-causal_True-bf16]", "sdpa"),
    ("tests/bench/test_bench_attention.py::test_attention[B2-H16-S8192-D128-causal_False-bf16]", "sdpa"),
    ("tests/bench/test_bench_rows.py::test_softmax_with_an_unusually_long_function_name_for_the_suite", None),
    ("tests/bench/test_bench_rows.py::test_softmax_with_an_unusually_long_function_name_for_the_suite", "torch"),
]  # fmt: skip


def suite_records():
    records = []
    for i, (nodeid, name) in enumerate(SUITE):
        group = nodeid.split("[")[0]
        records.append(
            record(nodeid, name, 0.5 + i, group=group, tflops=1.45e-05 * (i + 1), gbps=12.3, noisy=i % 3 == 0)
        )
    return by_id(*records)


def appears_whole_or_shortened(text, line):
    """``text`` in ``line`` whole, or as a start (maybe empty) and an end around an ellipsis."""
    if text in line:
        return True
    for match in re.finditer(re.escape(ELLIPSIS), line):
        before = line[: match.start()]
        after = line[match.end() :]
        for i in range(0, len(before) + 1):
            head = before[len(before) - i :]
            if not text.startswith(head):
                continue
            rest = text[len(head) :]
            for j in range(1, len(rest)):
                if after.startswith(rest[-j:]) and len(head) + j < len(text):
                    return True
    return False


@pytest.mark.parametrize("width", [60, 80, 120, 200])
@pytest.mark.parametrize("verbosity", [0, 1])
def test_no_id_is_ever_split_at_any_width(width, verbosity):
    records = suite_records()
    text = render_summary(records, width=width, verbosity=verbosity)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= width
    for members in group_records(records.values()).values():
        shared, labels = row_labels(members)
        assert sum(appears_whole_or_shortened(shared, line) for line in lines) == 1
        # Each row's label on exactly one line, as its first cell, whole or cut in the middle.
        for label in labels:
            rows = [line for line in lines if appears_whole_or_shortened(label, line.split("  ")[0])]
            assert len(rows) >= 1, (label, text)
        firsts = [line.split("  ")[0] for line in lines if line and not line.startswith((" ", "─", "benchmark", "("))]
        assert len(firsts) == len(set(firsts))  # shortened names stay distinct
    # Parts of an id never start a line of their own (a wrapped id would).
    for nodeid, _ in SUITE:
        for tail in (nodeid[-12:], "::" + nodeid.split("::")[-1][:10]):
            assert not any(line.startswith(tail) for line in lines)


@pytest.mark.parametrize("width", [60, 80, 120, 200])
def test_quiet_is_one_line_per_benchmark_with_whole_or_shortened_ids(width):
    records = suite_records()
    lines = render_summary(records, width=width, verbosity=-1).splitlines()
    ordered = sort_records(records.values())  # -q lists in id order
    assert len(lines) == len(ordered)
    for record, line in zip(ordered, lines):
        assert appears_whole_or_shortened(record.id, line.split("  ")[0]), (record.id, line)
        assert ("(noisy)" in line) == record.stats.noisy  # -q keeps the notes
    firsts = [line.split("  ")[0] for line in lines]
    assert len(set(firsts)) == len(records)  # ids differing only at their end stay apart
    if width >= 200:
        assert all(line.startswith(r.id + "  ") for r, line in zip(ordered, lines))  # room enough: whole


def test_units_scale_and_labels_read_right():
    recs = by_id(
        record("a.py::t[n1]", None, 0.0456, group="A", tflops=1.45e-05, gbps=0.845),
        record("a.py::t[n2]", None, 2.5, group="A", tflops=812e-3, gbps=3350),
    )
    text = render_summary(recs, width=120)
    assert "14.5 MFLOP/s" in text and "812 GFLOP/s" in text
    assert "845 MB/s" in text and "3.35 TB/s" in text
    assert "45.6 µs" in text and "2.50 ms" in text
    assert "CI95" in text and "±1.0%" in text and "±95%" not in text and "e-05" not in text


def test_an_interval_past_100_percent_reads_as_factors_of_the_median():
    # rounds in two levels 500x apart (a thread pool crowded out now and then): a percentage says nothing
    two_levels = record("a.py::t", None, 0.00715, noisy=True)
    two_levels = replace(two_levels, stats=replace(two_levels.stats, ci95_ms=(0.0070, 3.85)))
    text = render_summary(by_id(two_levels, record("a.py::u", None, 1.0)), width=120)
    assert "[0.98x, 538x]" in text and "±26" not in text and "±1.0%" in text


def test_verbose_adds_min_iqr_rounds_timer():
    recs = by_id(record("a.py::t[n1]", None, 1.0), record("a.py::t[n2]", None, 2.0))
    plain = summary_lines(recs, width=200)[1].text.split()
    verbose = summary_lines(recs, width=200, verbosity=1)[1].text.split()
    assert plain == ["benchmark", "median", "CI95"]
    assert verbose == ["benchmark", "median", "CI95", "min", "IQR", "rounds", "timer"]
    # At 60 columns the extra columns give way, and the table says which.
    narrow = render_summary(recs, width=40, verbosity=1)
    assert "hidden at 40 columns" in narrow and "1.00 ms" in narrow


def test_notes_every_row_shares_move_into_the_group_header():
    recs = by_id(
        record("a.py::t[n1]", None, 1.0, group="a.py::t", timer="interpreter"),
        record("a.py::t[n2]", None, 1.0, group="a.py::t", timer="interpreter", noisy=True),
    )
    lines = render_summary(recs, width=100).splitlines()
    assert lines[0] == "a.py::t — interpreter, not gated"
    assert [("noisy" in line) for line in lines[3:5]] == [False, True]


def test_a_row_timed_while_other_processes_shared_the_cpu_says_so():
    # A steady figure can be many times the quiet one (a two-thread matmul beside two busy
    # processes on two CPUs: 8 ms for 0.19 ms, at +-0.9%): the row says its CPU was shared.
    quiet = record("a.py::t[quiet]", None, 1.0, group="a.py::t")
    busy = replace(quiet, nodeid="a.py::t[busy]", sampling=Sampling(others_cpu_s=0.66, others_wall_s=0.5))
    waited = replace(quiet, nodeid="a.py::t[waited]", sampling=Sampling(run_queue_wait_s=0.1), samples_ms=[1.0] * 7)
    gpu = replace(busy, nodeid="a.py::t[gpu]", timer="cuda_event")
    assert [("CPU shared" in notes(r)) for r in (quiet, busy, waited, gpu)] == [False, True, True, False]
    rows = {line.split()[0]: line for line in render_summary(by_id(quiet, busy), width=100).splitlines()[3:]}
    assert "CPU shared" in rows["busy"] and "CPU shared" not in rows["quiet"], rows


@pytest.mark.parametrize(("tty", "columns", "width"), [(True, None, 80), (False, None, 160), (False, "100", 80)])
def test_tables_in_a_log_are_wide_enough_for_every_column(monkeypatch, tty, columns, width):
    # A CI log does not wrap, and 80 columns hid a regression's baseline and candidate times;
    # a terminal, or COLUMNS, says the width itself (pytest's terminal writer reads COLUMNS).
    class Out:
        def isatty(self):
            return tty

    monkeypatch.setattr("sys.__stdout__", Out())
    monkeypatch.delenv("COLUMNS", raising=False)
    if columns:
        monkeypatch.setenv("COLUMNS", columns)
    assert table_width(80) == width


def test_columns_sort_and_group_by():
    recs = by_id(
        record("a.py::t[n1-bf16]", None, 3.0, params={"n": 1, "precision": "bf16"}),
        record("a.py::t[n1-fp16]", None, 1.0, params={"n": 1, "precision": "fp16"}),
        record("a.py::t[n2-bf16]", None, 2.0, params={"n": 2, "precision": "bf16"}),
    )
    text = render_summary(recs, width=100, columns=("median", "rounds"), sort="median")
    assert text.splitlines()[1].split() == ["benchmark", "median", "rounds"]
    assert text.index("n1-fp16") < text.index("n2-bf16") < text.index("n1-bf16")
    grouped = render_summary(recs, width=100, group_by=("param:precision",))
    assert "precision=bf16  (a.py::t)" in grouped and "precision=fp16  (a.py::t[n1-fp16])" in grouped


def test_comparison_keeps_every_reason_visible_and_ids_whole():
    nodeid = "tests/bench/test_bench_matmul.py::test_matmul_fp8_llm_projection[M16384-N28672-K4096-fp8_e4m3]"
    verdicts = {
        nodeid: Verdict(
            id=nodeid,
            status="REGRESSED",
            severity="moderate",
            baseline_ms=1.0,
            candidate_ms=1.15,
            ratio=1.15,
            ci=(1.12, 1.18),
            p_value=1e-6,
            history=5,
            reasons=("spills went from 0 to 128 bytes on sm_90 (kernel _matmul_fp8_kernel, num_warps=8)",),
            notes=("kernel config changed: BLOCK_M 128 -> 64",),
        ),
        nodeid + "::torch": Verdict(id=nodeid + "::torch", status="UNCHANGED", ratio=1.0, ci=(0.99, 1.01)),
    }
    records = by_id(record(nodeid, None, 1.15, group=nodeid.split("[")[0]), record(nodeid, "torch", 1.0))
    for width in (60, 80, 120, 200):
        lines = comparison_lines(verdicts, version_diffs=[], canary_ratio=None, records=records, width=width)
        text = as_text(lines)
        assert max(len(line) for line in text.splitlines()) <= width
        flat = " ".join(text.split())
        assert "spills went from 0 to 128 bytes on sm_90 (kernel _matmul_fp8_kernel, num_warps=8)" in flat
        assert "kernel config changed: BLOCK_M 128 -> 64" in flat
        assert "_matmul_fp8_kernel," in text  # a word of a reason is never cut either
        assert "+15.0% [+12.0%, +18.0%]" in text and "REGRESSED (moderate)" in text
        regressed = [line for line in lines if line.style == "red"]
        assert regressed[0].text.startswith("(unlabelled)  REGRESSED")
        assert appears_whole_or_shortened(nodeid, lines[0].text)  # the group's header: the test
        assert text.index("REGRESSED") < text.index("UNCHANGED")


def test_the_rule_under_a_comparison_header_spans_the_rows_not_the_notes_under_them():
    note = "timed on a CPU other processes shared (other processes kept 1.0 CPUs busy beside it): " * 2
    verdicts = {
        "t.py::test_a": Verdict(id="t.py::test_a", status="UNCHANGED", ratio=1.0, ci=(0.99, 1.01), notes=(note,))
    }
    records = by_id(record("t.py::test_a", None, 1.0, group="t.py::test_a"))
    body = as_text(comparison_lines(verdicts, version_diffs=[], canary_ratio=None, records=records, width=200))
    lines = body.splitlines()
    rule = next(i for i, line in enumerate(lines) if line.startswith("─"))
    assert len(lines[rule]) == max(len(lines[rule - 1]), len(lines[rule + 1])) < len(note.strip())


def test_a_centre_apart_from_the_results_median_says_what_each_figure_is():
    # A crowded run: the results table's median over every round reads 7.99 ms, the comparison's
    # "now" (the fastest pass's median) 6.10 ms; a new user read them as two measurements.
    def lines(now_ms, *, paired=False):
        verdicts = {"t.py::test_a": Verdict(id="t.py::test_a", status="UNCHANGED", ratio=1.0, ci=(0.99, 1.01),
                                            baseline_ms=6.0, candidate_ms=now_ms)}  # fmt: skip
        records = by_id(record("t.py::test_a", None, 7.99, group="t.py::test_a"))
        return as_text(comparison_lines(verdicts, version_diffs=[], canary_ratio=None, records=records, paired=paired))

    assert "not the results table's median over every round" in lines(6.10)
    assert "results table's median" not in lines(7.95)  # 0.5% apart: nothing to tell apart
    assert "results table's median" not in lines(6.10, paired=True)  # A/B's columns are pairs' medians


def test_the_p_column_is_for_the_direction_the_row_names():
    # A verdict keeps p for "slower": an IMPROVED row printed p=1 beside a significant speed-up.
    verdicts = {
        "t.py::test_a": Verdict(id="t.py::test_a", status="IMPROVED", ratio=0.9, ci=(0.86, 0.95), p_value=0.99996),
        "t.py::test_b": Verdict(id="t.py::test_b", status="REGRESSED", ratio=1.2, ci=(1.1, 1.3), p_value=3e-05),
    }
    records = by_id(*(record(i, None, 1.0, group="t") for i in verdicts))
    rows = as_text(comparison_lines(verdicts, version_diffs=[], canary_ratio=None, records=records, width=200))
    improved = next(line for line in rows.splitlines() if "IMPROVED" in line)
    regressed = next(line for line in rows.splitlines() if "REGRESSED" in line)
    assert "4e-05" in improved and " 1 " not in improved
    assert "3e-05" in regressed


def test_a_group_of_one_is_titled_by_its_id_once():
    from pytest_tesserabench.report.rows import group_title

    assert group_title("t.py::test_x", "t.py::test_x[R128-C1024]", []) == "t.py::test_x[R128-C1024]"
    assert group_title("t.py::test_x", "R128", []) == "t.py::test_x  (R128)"  # what rows share, beside the key


def test_the_ab_counts_say_how_settling_went():
    def record(i, settle_s=0.0, decided=True, ab=True):
        decision = ABDecision("UNCHANGED", decided, 1.0, (0.99, 1.01), 0.5, 0.05, pairs=12, processes=8)
        return BenchRecord(
            nodeid=f"t.py::test[{i}]", name=None, group="t.py::test", timer="cpu", rounds_ms=[1.0], stats=None,
            ab=ABResult(ref="main", decision=decision, settle_s=settle_s) if ab else None,
        )  # fmt: skip

    assert ab_counts_line([record(0, ab=False)]) is None  # nothing compared by A/B
    line = ab_counts_line([record(1, 0.0, True), record(2, 2.0, True), record(3, 1.5, False)])
    assert line == (
        "A/B: 3 benchmark(s) compared in 36 pairs of blocks from 8 process pairs; 2 needed settling (3.5 s), "
        "1 decided by it, 1 judged when its budget ended"
    )
    assert ab_counts_line([record(1, 2.0, True)]).endswith("1 needed settling (2.0 s), 1 decided by it")


def test_a_record_whose_test_failed_for_its_own_reasons_says_so():
    from dataclasses import replace

    from pytest_tesserabench.report.rows import notes

    measured = replace(record("t.py::test_k", None, 1.0), outcome="failed")  # an assertion after bench()
    assert "its test failed, not on this row's verdict" in notes(measured)
    regressed = replace(measured, verdict=Verdict(id=measured.id, status="REGRESSED", severity="severe"))
    assert "its test failed" not in notes(regressed)  # its verdict says why already
    # an unresolved row may have failed its test itself (--bench-unresolved=fail): not said either way
    inconclusive = replace(measured, verdict=Verdict(id=measured.id, status="INCONCLUSIVE"))
    assert "its test failed" not in notes(inconclusive)
    assert "its test failed" not in notes(replace(measured, outcome="passed"))


def test_the_ci_summary_counts_measured_benchmarks_that_were_not_judged():
    from pytest_tesserabench.record.results import RunDocument
    from pytest_tesserabench.report.data import ReportData
    from pytest_tesserabench.report.markdown_report import markdown_summary

    judged, failed = record("t.py::test_a", None, 1.0), record("t.py::test_b", None, 1.0)
    run = RunDocument(benchmarks={judged.id: judged, failed.id: failed})
    verdicts = {judged.id: Verdict(id=judged.id, status="UNCHANGED")}
    text = markdown_summary(ReportData(run=run, verdicts=verdicts, baseline="baseline main"))
    assert "2 benchmark(s) measured (1 not judged)" in text and "1 unchanged" in text


def test_quiet_cuts_an_ids_path_before_its_test_name():
    # A cut in the middle left `tests/benc…48-D64-bf16-causal]`, which names no test.
    bench_id = "tests/bench/test_bench_attention.py::test_attention[B1-H8-S1024-D64-bf16-causal]"
    recs = by_id(record(bench_id, None, 64.6, noisy=True))
    (line,) = render_summary(recs, width=80, verbosity=-1).splitlines()
    assert line.startswith(ELLIPSIS) and "test_attention[B1-H8-S1024-D64-bf16-causal]  64.6 ms" in line
    assert len(line) <= 80


def test_a_long_id_loses_whole_leading_folders_first_then_its_path_never_a_word():
    from pytest_tesserabench.report.terminal import _shorten_id

    bench_id = "tests/bench/cpu/test_cpu_workloads.py::test_medium_matmul[N400-fp32]"
    assert _shorten_id(bench_id, 80) == bench_id
    assert _shorten_id(bench_id, 60) == "…/cpu/test_cpu_workloads.py::test_medium_matmul[N400-fp32]"
    assert _shorten_id(bench_id, 56) == "…/test_cpu_workloads.py::test_medium_matmul[N400-fp32]"
    assert _shorten_id(bench_id, 40) == "…::test_medium_matmul[N400-fp32]"
    short = _shorten_id(bench_id, 20)
    assert len(short) == 20 and short.endswith("fp32]") and ELLIPSIS in short


def test_a_run_whose_timings_were_all_undecided_says_whether_kernel_figures_were_judged():
    from pytest_tesserabench.report.terminal import unresolved_line

    undecided = Verdict(id="t.py::test_k::torch", status="INCONCLUSIVE", ratio=1.1, ci=(0.8, 1.5), detectable=0.8)
    figures = Verdict(id="t.py::test_k", status="UNCHANGED", stage="kernel figures")
    assert unresolved_line({undecided.id: undecided}).startswith("NOTHING JUDGED: all 1 timed benchmark(s)")
    both = unresolved_line({undecided.id: undecided, figures.id: figures})
    assert both.startswith("NO TIMING JUDGED (the kernel figures of 1 were): all 1 timed benchmark(s) are INCONCLUSIVE")


def test_the_unresolved_line_names_a_threshold_this_machine_can_judge():
    from pytest_tesserabench.report.terminal import threshold_within_reach, unresolved_line

    def verdict(i, status, detectable, stage="rule"):
        ratio, ci = (1.0, (0.9, 1.3)) if status == "INCONCLUSIVE" else (1.0, (0.98, 1.02))
        verdict_id = f"t.py::test_{i}"
        return Verdict(verdict_id, status, ratio=ratio, ci=ci, threshold=0.05, detectable=detectable, stage=stage)

    # eight timed: two decided at 5%, six undecided that could catch 9-250%
    catches = [0.09, 0.12, 0.181, 0.19, 0.4, 2.5]
    timed = [verdict(0, "UNCHANGED", 0.03), verdict(1, "UNCHANGED", 0.04)]
    timed += [verdict(i + 2, "INCONCLUSIVE", c) for i, c in enumerate(catches)]
    assert threshold_within_reach(timed) == (19, 6)  # the 6th of 8 needs 19%
    line = unresolved_line({v.id: v for v in timed})
    assert "; or a threshold this machine can judge: --bench-threshold=19 (6 of 8); --bench-unresolved=fail" in line
    # a benchmark the run's conditions left undecided is out of any threshold's reach
    crowded = [*timed[:5], *(verdict(i + 10, "INCONCLUSIVE", 0.06, stage="conditions") for i in range(3))]
    assert threshold_within_reach(crowded) is None
    # nothing to suggest at 100% or more, or where 3 in 4 are judged already
    assert threshold_within_reach([verdict(i, "INCONCLUSIVE", 1.5) for i in range(4)]) is None
    assert threshold_within_reach([*timed[:2], verdict(5, "UNCHANGED", 0.01), timed[-1]]) is None
    # one benchmark's own bench(threshold=50) does not hide the suggestion from the rest
    tolerant = replace(timed[0], threshold=0.5)
    assert threshold_within_reach([tolerant, *timed[1:]]) == (19, 6)


@pytest.mark.parametrize("verbosity", [0, 1])
def test_noisy_is_said_once_where_a_benchmark_is(verbosity):
    noisy = [record("t.py::test_a", None, 1.0, noisy=True), record("t.py::test_b", None, 2.0)]
    text = [line.text for line in summary_lines(noisy, width=250, verbosity=verbosity)]
    legends = [t for t in text if t.startswith("noisy (1 of 2): its time ran out (--bench-max-time)")]
    assert len(legends) == 1 and "--bench-target-ci" in legends[0]
    narrow = [line.text for line in summary_lines(noisy, width=60, verbosity=verbosity)]
    assert max(map(len, narrow)) <= 60 and any(t.startswith("noisy (1 of 2)") for t in narrow)
    steady = [record("t.py::test_a", None, 1.0), record("t.py::test_b", None, 2.0)]
    assert not any("noisy" in line.text for line in summary_lines(steady, width=200, verbosity=verbosity))


def test_the_static_analysis_block_lists_records_by_id_not_as_they_completed(monkeypatch):
    # under -n the records complete in another order each run; two runs' blocks are read side by side
    from dataclasses import replace

    from pytest_tesserabench.report import terminal

    monkeypatch.setattr(terminal, "format_kernel_lines", lambda kernels: [kernels[0]["name"]])
    later, earlier = (replace(record(f"t.py::test_{k}", None, 1.0), kernels=[{"name": k}]) for k in "ba")
    lines = terminal._kernel_lines({later.id: later, earlier.id: earlier})
    assert lines == ["t.py::test_a", "  a", "t.py::test_b", "  b"]
