"""The run's report files end to end: CSV, markdown, JUnit properties, the CI job summary, the
HTML report; and the paths and dependencies they need, checked before anything is measured."""

import csv
import json
import os
import re
import sys
import threading
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from snippets import FAKE_CLOCK

from pytest_tesserabench.history.baseline import save_run
from pytest_tesserabench.machine import device as machine
from pytest_tesserabench.record.results import RunDocument

# A fake clock: each "kernel" takes 2 ms x n (x SLOWER for n=2) with 1% noise, seeded, so the
# figures and the verdicts do not depend on how busy the machine is.
WORKLOAD = (
    """
import os, random, time, pytest
from pytest_tesserabench.machine import run_queue

"""
    + FAKE_CLOCK
    + """

@pytest.mark.bench_sizes(n=[1, 2])
def test_work(bench, n, fake_clock):
    rng = random.Random(f"{os.environ.get('RUN', '0')}-{n}")
    scale = float(os.environ.get("SLOWER", "1")) if n == 2 else 1.0

    def kernel(ms):
        fake_clock[0] += int(ms * 1e6 * (1 + rng.gauss(0, 0.01)))

    bench(kernel, 2.0 * n * scale, flops=4e9 * n, bytes=1e6 * n)
    bench(kernel, 1.0 * n, name="torch", flops=4e9 * n, bytes=1e6 * n)

def test_plain(bench, fake_clock):
    bench(lambda: fake_clock.__setitem__(0, fake_clock[0] + 500_000))
"""
)
ARGS = ("--bench-max-time=0.1", "--bench-warmup=0", "--bench-min-rounds=5")
IDS = [
    "test_k.py::test_work[n1]",
    "test_k.py::test_work[n1]::torch",
    "test_k.py::test_work[n2]",
    "test_k.py::test_work[n2]::torch",
    "test_k.py::test_plain",
]


@pytest.fixture
def project(pytester):
    pytester.makepyfile(test_k=WORKLOAD)
    return pytester


def write_baseline(pytester, runs=3):
    """A baseline of ``runs`` runs for this machine, as the fake clock would have measured it."""
    rng = np.random.default_rng(0)
    medians = {IDS[0]: 2.0, IDS[1]: 1.0, IDS[2]: 4.0, IDS[3]: 2.0, IDS[4]: 0.5}
    for i in range(runs):
        benchmarks = {}
        for record_id, median in medians.items():
            nodeid, _, name = record_id.partition("]::")
            nodeid = nodeid + "]" if name else record_id
            benchmarks[record_id] = {
                "nodeid": nodeid,
                "name": name or None,
                "timer": "cpu",
                "rounds_ms": (median * np.exp(rng.normal(0, 0.003) + rng.normal(0, 0.01, 8))).tolist(),
            }
        run = {"schema": 1, "machine": {}, "commit": {"sha": f"{i}abcdef0123"}, "benchmarks": benchmarks}
        save_run(pytester.path / "baselines", "main", machine.machine_key(), RunDocument.from_json(run))


def test_csv_has_one_row_per_record_with_units_in_its_header(project):
    result = project.runpytest("--bench-csv=out.csv", "--bench-json=run.json", "-q", *ARGS)
    result.assert_outcomes(passed=3)
    # Under -q pytest's progress line has no end of its own: the messages still start a line.
    result.stdout.fnmatch_lines(
        ["tesserabench: wrote 5 benchmark(s) to run.json", "tesserabench: wrote 5 row(s) to out.csv"]
    )
    rows = list(csv.DictReader((project.path / "out.csv").open()))
    run = json.loads((project.path / "run.json").read_text())["benchmarks"]
    assert [row["id"] for row in rows] == [IDS[4], *IDS[:4]]  # in id order
    for row in rows:
        assert float(row["median_ms"]) == pytest.approx(run[row["id"]]["stats"]["median_ms"], rel=1e-6)
        # numbers as a person reads them, not binary expansions such as 0.012961999999999918
        assert all(len(re.sub(r"[^0-9]|e.*", "", v.lstrip("-0."))) <= 7 for v in row.values() if _number(v))
        assert float(row["ci95_low_ms"]) <= float(row["median_ms"]) <= float(row["ci95_high_ms"])
    work = {r["id"]: r for r in rows}
    assert work[IDS[2]]["param_n"] == "2" and work[IDS[3]]["call"] == "torch" and work[IDS[4]]["param_n"] == ""
    # 8e9 flop in 4 ms: 2 TFLOP/s; 2e6 bytes: 0.5 GB/s (the fake clock's figures, 1% noise)
    assert float(work[IDS[2]]["tflop_per_s"]) == pytest.approx(2.0, rel=0.05)
    assert float(work[IDS[2]]["gb_per_s"]) == pytest.approx(0.5, rel=0.05)
    assert {"median_ms", "iqr_ms", "tflop_per_s", "gb_per_s", "change_pct"} <= set(rows[0])
    assert work[IDS[0]]["verdict"] == ""  # not compared


@pytest.mark.parametrize("name", ["bench.txt", "bench.prom"])
def test_the_run_as_metrics_reads_back_with_prometheus_own_parsers(project, monkeypatch, name):
    """--bench-openmetrics: the OpenMetrics text format (the Prometheus one for .prom, which
    node-exporter's textfile collector reads), parsed by the client's own parser."""
    pytest.importorskip("prometheus_client")
    if name.endswith(".prom"):
        from prometheus_client.parser import text_string_to_metric_families
    else:
        from prometheus_client.openmetrics.parser import text_string_to_metric_families

    write_baseline(project)
    monkeypatch.setenv("SLOWER", "1.5")
    result = project.runpytest("--bench-compare=main", f"--bench-openmetrics={name}", "--bench-json=run.json", *ARGS)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([f"tesserabench: wrote the metrics of 5 benchmark(s) to {name}"])
    families = {f.name: f for f in text_string_to_metric_families((project.path / name).read_text())}
    run = json.loads((project.path / "run.json").read_text())["benchmarks"]
    medians = {s.labels["benchmark"]: s.value for s in families["tesserabench_median_seconds"].samples}
    assert medians == pytest.approx({i: run[i]["stats"]["median_ms"] / 1e3 for i in IDS})
    sample = next(s for s in families["tesserabench_median_seconds"].samples if s.labels["benchmark"] == IDS[2])
    assert sample.labels["group"] == "test_k.py::test_work" and sample.labels["machine"]
    flops = {s.labels["benchmark"]: s.value for s in families["tesserabench_throughput_flops"].samples}
    assert flops[IDS[2]] == pytest.approx(4e9 * 2 / (run[IDS[2]]["stats"]["median_ms"] / 1e3), rel=1e-6)
    verdict = "tesserabench_verdict"
    states = {(s.labels["benchmark"], s.labels[verdict]): s.value for s in families[verdict].samples}
    assert states[(IDS[2], "REGRESSED")] == 1 and states[(IDS[2], "UNCHANGED")] == 0
    assert states[(IDS[0], "UNCHANGED")] == 1
    ratios = {s.labels["benchmark"]: s.value for s in families["tesserabench_change_ratio"].samples}
    assert 1.4 < ratios[IDS[2]] < 1.6


def test_metrics_without_the_client_is_a_usage_error_naming_the_extra(project, monkeypatch):
    monkeypatch.setattr("importlib.util.find_spec", lambda name, *a: None if name == "prometheus_client" else 1)
    result = project.runpytest("--bench-openmetrics=bench.prom", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--bench-openmetrics=bench.prom: *prometheus-client*[[]metrics[]]*"])
    assert not (project.path / "bench.prom").exists()


def test_markdown_summary_puts_counts_then_regressions_then_the_table(project, monkeypatch):
    write_baseline(project)
    monkeypatch.setenv("SLOWER", "1.5")
    result = project.runpytest("--bench-compare=main", "--bench-md=summary.md", *ARGS)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["tesserabench: wrote the markdown summary to summary.md"])
    text = (project.path / "summary.md").read_text()
    lines = text.splitlines()
    content = [line for line in lines if line and not line.startswith("#")]
    assert content[0] == "**1 regressed, 4 unchanged**"
    assert lines.index("### Regressions") < lines.index("<details><summary>All results</summary>")
    regressions = table_after(lines, "### Regressions")
    assert len(regressions) == 1
    assert regressions[0]["benchmark"] == f"`{IDS[2]}`" and regressions[0]["verdict"] == "REGRESSED (severe)"
    assert re.fullmatch(r"\+\d+\.\d% \[\+\d+\.\d%, \+\d+\.\d%\]", regressions[0]["change [CI95]"])
    results = table_after(lines, "**test_k.py::test_work**")
    assert [r["benchmark"] for r in results] == ["`n1`", "`n1 · torch`", "`n2`", "`n2 · torch`"]
    assert [r["verdict"] for r in results] == ["UNCHANGED", "UNCHANGED", "REGRESSED (severe)", "UNCHANGED"]
    assert results[2]["change [CI95]"] == regressions[0]["change [CI95]"]  # every row's change, as judged
    assert all(re.fullmatch(r"[+-]\d+\.\d% \[.*\]", r["change [CI95]"]) for r in results)
    assert results[2]["throughput"].endswith("TFLOP/s") and results[0]["CI95"].startswith("±")


def table_after(lines, heading):
    """The markdown table under ``heading`` as dicts."""
    start = lines.index(heading) + 2
    header = [cell.strip() for cell in lines[start].strip("|").split("|")]
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append(dict(zip(header, (cell.strip() for cell in re.split(r"(?<!\\)\|", line.strip("|"))))))
    return rows


def test_junit_xml_carries_each_benchmarks_median_interval_and_verdict(project, monkeypatch):
    write_baseline(project)
    monkeypatch.setenv("SLOWER", "1.5")
    result = project.runpytest("--bench-compare=main", "--junitxml=junit.xml", "--bench-json=run.json", *ARGS)
    result.assert_outcomes(passed=2, failed=1)
    run = json.loads((project.path / "run.json").read_text())["benchmarks"]
    cases = {c.get("name"): c for c in ET.parse(project.path / "junit.xml").getroot().iter("testcase")}
    properties = {p.get("name"): p.get("value") for p in cases["test_work[n2]"].iter("property")}
    assert properties["tesserabench.verdict"] == "REGRESSED"
    assert properties["tesserabench[torch].verdict"] == "UNCHANGED"
    median = run[IDS[2]]["stats"]["median_ms"]
    assert float(properties["tesserabench.median_ms"]) == pytest.approx(median, rel=1e-5)
    low, high = float(properties["tesserabench.ci95_low_ms"]), float(properties["tesserabench.ci95_high_ms"])
    assert low <= median <= high
    assert float(properties["tesserabench.ratio_ci95_low"]) > 1.2  # 1.5x slower, surely more than 20%
    assert float(properties["tesserabench[torch].median_ms"]) == pytest.approx(2.0, rel=0.05)
    assert cases["test_work[n2]"].find("failure") is not None
    plain = {p.get("name"): p.get("value") for p in cases["test_plain"].iter("property")}
    assert float(plain["tesserabench.median_ms"]) == pytest.approx(0.5, rel=0.05) and plain["tesserabench.rounds"]


def test_github_step_summary_is_appended_and_can_be_turned_off(project, monkeypatch):
    summary = project.path / "step-summary.md"
    summary.write_text("earlier step\n")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    result = project.runpytest("--bench", *ARGS)
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["tesserabench: appended the summary to GITHUB_STEP_SUMMARY"])
    text = summary.read_text()
    assert text.startswith("earlier step\n## TesseraBench") and "5 benchmark(s) measured, none compared" in text
    project.makeini("[pytest]\nbench_github_summary = false\n")
    summary.write_text("")
    project.runpytest("--bench", *ARGS).assert_outcomes(passed=3)
    assert summary.read_text() == ""


def test_an_unwritable_step_summary_warns_and_never_fails_the_run(project, monkeypatch):
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(project.path / "no-such-folder" / "summary.md"))
    result = project.runpytest("--bench", *ARGS)
    result.assert_outcomes(passed=3)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*warning: could not append the summary to GITHUB_STEP_SUMMARY=*no-such-folder*"])
    assert "Traceback" not in result.stdout.str()


def test_a_step_summary_that_is_a_fifo_is_not_written_and_never_blocks_the_run(project, monkeypatch, tmp_path):
    fifo = tmp_path / "summary-fifo"
    os.mkfifo(fifo)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(fifo))
    done = threading.Event()
    drained = []

    def unblock_a_hung_run():
        # A safety net only: should the run open the FIFO, it would wait forever for a reader;
        # this reader lets it finish so that the assertions below fail instead of the suite hanging.
        if done.wait(120):
            return
        fd = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as stream:
            while not done.is_set():
                try:
                    chunk = stream.read()
                except BlockingIOError:
                    chunk = None
                if chunk:
                    drained.append(chunk)
                done.wait(0.05)

    safety = threading.Thread(target=unblock_a_hung_run, daemon=True)
    safety.start()
    try:
        result = project.runpytest("--bench", *ARGS)
    finally:
        done.set()
        safety.join()
    result.assert_outcomes(passed=3)
    assert result.ret == 0 and not drained
    result.stdout.fnmatch_lines(
        ["*the summary was not written to GITHUB_STEP_SUMMARY=*summary-fifo: it is a FIFO (named pipe), not a regular*"]
    )


@pytest.mark.parametrize("option", ["--bench-md", "--bench-csv", "--bench-html"])
def test_a_report_path_that_cannot_be_written_fails_before_measuring(project, option):
    result = project.runpytest(f"{option}=missing-folder/out", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}=missing-folder/out (command line): folder missing-folder does not exist*"])
    assert "passed" not in result.stdout.str()


@pytest.mark.parametrize("option, example", [("--bench-html", "report.html"), ("--bench-md", "summary.md")])
def test_a_report_path_that_is_a_folder_is_told_what_file_to_give(project, option, example):
    project.mkdir("out")
    result = project.runpytest(f"{option}=out", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines([f"*{option}=out (command line): is a directory; give a file path like out/{example}"])


def test_html_without_matplotlib_is_a_usage_error_naming_the_extra(project, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # as if it were not installed
    result = project.runpytest("--bench-html=report.html", *ARGS)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(
        ["*--bench-html=report.html: *matplotlib*pip install 'pytest-tesserabench[[]report[]]'"]
    )
    assert "Traceback" not in result.stderr.str() and not (project.path / "report.html").exists()


def test_html_report_has_each_test_functions_plots_and_opens_offline(project, monkeypatch):
    (project.path / "peaks.json").write_text('{"name": "fake", "tflops": {"fp32": 10}, "gbps": 20}')
    write_baseline(project)
    monkeypatch.setenv("SLOWER", "1.5")
    result = project.runpytest("--bench-compare=main", "--bench-html=report.html", "--bench-peaks=peaks.json", *ARGS)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["tesserabench: wrote the HTML report of 5 benchmark(s) to report.html"])
    page = (project.path / "report.html").read_text()
    sections = re.findall(r'<section class="group" id="g\d+">(.*?)</section>', page, re.S)
    assert len(sections) == 2  # one per test function
    work, plain = sorted(sections, key=lambda s: "test_plain" in s)
    kinds = re.findall(r'<figure class="plot (\w+)">', work)
    assert kinds == ["sweep", "roofline", "distribution", "change", "history"]
    assert re.findall(r'<figure class="plot (\w+)">', plain) == ["sweep", "distribution", "change", "history"]
    assert page.count("<svg") == 9
    sweep = work[work.index('class="plot sweep"') : work.index('class="plot roofline"')]
    assert ">first call<" in sweep and ">torch<" in sweep and ">n<" in sweep and "TFLOP/s" in sweep
    history = work[work.index('class="plot history"') :]
    assert all(f">{i}abcdef<" in history for i in range(3)) and ">this run<" in history  # commits
    change = work[work.index('class="plot change"') : work.index('class="plot history"')]
    assert "#c62828" in change  # the regression in red
    # Self-contained: nothing is fetched (xmlns names a namespace, it loads nothing).
    assert not re.findall(r"(?:src|href)\s*=\s*[\"'](?!#)", page)
    assert "@import" not in page and not re.findall(r"url\((?!#)", page)


def test_html_of_a_run_that_measured_nothing_says_so(project):
    result = project.runpytest("--bench-html=report.html", "-k", "no_such_test", *ARGS)
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["tesserabench: no HTML report written to report.html: no benchmark was measured"])
    assert not (project.path / "report.html").exists()


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return "." in text or "e" in text
