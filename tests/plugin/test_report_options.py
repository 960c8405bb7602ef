"""The report options: columns, sort, grouping, the report paths, --bench-only/--bench-skip."""

from pathlib import Path

import pytest

from pytest_tesserabench import options
from pytest_tesserabench.report.rows import FIELDS


def resolve(cli=None, ini=None):
    return options.resolve(cli or {}, ini or {}, Path("/r"))


def test_every_column_key_has_a_field():
    assert set(options.COLUMN_KEYS) == set(FIELDS)


def test_columns_sort_and_group_by_resolve():
    s = resolve({"bench_columns": "median, min,rounds", "bench_sort": "throughput", "bench_group_by": "test,param:M"})
    assert s.columns == ("median", "min", "rounds")
    assert s.sort == "throughput" and s.group_by == ("test", "param:M")
    assert resolve().columns is None and resolve().sort == "id" and resolve().group_by == ("group",)


@pytest.mark.parametrize(
    "cli, message",
    [
        ({"bench_columns": "median,ops"}, "--bench-columns='median,ops' (command line): has the unknown column 'ops'"),
        ({"bench_columns": ","}, "must name at least one column"),
        ({"bench_columns": "min,min"}, "names a column twice"),
        ({"bench_sort": "fastest"}, "--bench-sort='fastest' (command line): must be one of id, median"),
        ({"bench_group_by": "param:"}, "unknown grouping 'param:'; accepted: group, test, call, param:NAME"),
        ({"bench_only": True, "bench_skip": True}, "--bench-only (command line) and --bench-skip (command line)"),
    ],
)
def test_bad_report_options_name_the_culprit(cli, message):
    with pytest.raises(options.SettingsError) as info:
        resolve(cli)
    assert message in str(info.value)


def test_report_paths_imply_bench_only_on_the_command_line(tmp_path):
    assert resolve({"bench_md": tmp_path / "x.md"}).enabled
    assert resolve({"bench_only": True}).enabled
    assert not resolve(ini={"bench_html": str(tmp_path / "x.html")}).enabled  # ini: only where to write


SUITE = """
def test_measured(bench):
    bench(sum, [1, 2])

def test_plain():
    pass
"""


def test_bench_only_and_bench_skip_select_by_the_fixture(pytester, fast):
    pytester.makepyfile(SUITE)
    only = pytester.runpytest("--bench-only", "-v", *fast)
    only.assert_outcomes(passed=1, deselected=1)
    only.stdout.fnmatch_lines(["*test_measured PASSED*", "*= tesserabench =*"])
    skip = pytester.runpytest("--bench-skip", "-v")
    skip.assert_outcomes(passed=1, deselected=1)
    skip.stdout.fnmatch_lines(["*test_plain PASSED*"])
    both = pytester.runpytest("--bench-only", "--bench-skip")
    assert both.ret == pytest.ExitCode.USAGE_ERROR
    both.stderr.fnmatch_lines(["*--bench-only (command line) and --bench-skip (command line) exclude each other*"])
