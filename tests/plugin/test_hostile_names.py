"""Names are data at every output (report/safe_text.py): escape sequences, bidirectional
overrides, newlines, '|', a leading '=' and '$' in a test id or call name act on nothing."""

import csv
import io
import json
import unicodedata

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pytest_tesserabench.report.safe_text import BIDI_CONTROLS, FORMULA_STARTS, csv_cell, markdown_cell, printable


def acts(text: str) -> bool:
    """Whether ``text`` holds a character that acts on a terminal or reorders a line."""
    return any(c in BIDI_CONTROLS or unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") for c in text)


@given(st.text())
def test_any_name_is_printable_one_line_and_neutral_in_every_format(name):
    assert not acts(printable(name))
    cell = markdown_cell(name)
    assert not acts(cell) and "\n" not in cell and "|" not in cell.replace("\\|", "")
    assert not csv_cell(name).startswith(FORMULA_STARTS)
    if name.isprintable() and not BIDI_CONTROLS.intersection(name):
        assert printable(name) == name  # ordinary names are shown as they are


HOSTILE = """
import pytest

NAMES = ["\\x1b[31mred\\u202eevil", "a|b\\nc", "=HYPERLINK(1)", "cost $\\\\undefinedmacro{x}$"]

@pytest.mark.parametrize("name", NAMES)
def test_w(bench, name):
    bench(lambda: sum(range(100)), name=name)
"""


def test_hostile_names_reach_the_terminal_markdown_csv_and_html_as_text(pytester):
    pytest.importorskip("matplotlib")
    pytester.makepyfile(test_hostile=HOSTILE)
    args = ("--bench-max-time=0.01", "--bench-warmup=0", "--bench-min-rounds=3", "-p", "no:randomly")
    result = pytester.runpytest(
        "--bench", "--bench-md=r.md", "--bench-csv=r.csv", "--bench-html=r.html", "--bench-json=r.json", *args
    )
    result.assert_outcomes(passed=4)
    out = result.stdout.str()
    assert "\x1b[31m" not in out and "\u202e" not in out and "\\x1b[31mred\\u202eevil" in out
    markdown = (pytester.path / "r.md").read_text()
    assert "\x1b" not in markdown and "a\\|b\\x0ac" in markdown
    rows = list(csv.DictReader(io.StringIO((pytester.path / "r.csv").read_text())))
    assert not any(value.startswith(FORMULA_STARTS) for row in rows for value in row.values() if value)
    assert any("'=HYPERLINK(1)" in value for row in rows for value in row.values())
    assert (pytester.path / "r.html").stat().st_size > 0  # (a '$' in a name once crashed the plots)
    names = {record["name"] for record in json.loads((pytester.path / "r.json").read_text())["benchmarks"].values()}
    assert "=HYPERLINK(1)" in names  # the record keeps the name as given: only outputs neutralise it


def test_hostile_names_reach_the_html_plots_and_every_command_as_text(pytester, capsys, monkeypatch):
    # The plots' labels (SVG text a browser reorders at U+202E, and an ESC that is not XML), the
    # failure line, `tesserabench show`, `history` and the table across several run files.
    pytest.importorskip("matplotlib")
    pytest.importorskip("ruptures")
    from pytest_tesserabench.cli import main

    pytester.makepyfile(test_hostile=HOSTILE)
    args = ("--bench-max-time=0.01", "--bench-warmup=0", "--bench-min-rounds=3", "-p", "no:randomly")
    args += ("--bench-passes=1", "--bench-save-processes=0", "--bench-confirm=0")
    for run in ("1", "2"):  # (in subprocesses: a second in-process run re-imports half of matplotlib)
        result = pytester.runpytest_subprocess(
            "--bench-save=main", f"--bench-json=r{run}.json", f"--bench-html=r{run}.html", *args
        )
        result.assert_outcomes(passed=4)
    html = (pytester.path / "r2.html").read_text()
    assert "\x1b" not in html and "\u202e" not in html and "\\x1b[31mred\\u202eevil" in html
    monkeypatch.chdir(pytester.path)
    capsys.readouterr()
    for command in (["show", "main"], ["history", "main"], ["compare", "r1.json", "r2.json", "r2.json"]):
        main(command)
        said = capsys.readouterr()
        text = said.out + said.err
        assert "\x1b" not in text and "\u202e" not in text, (command, text)
        assert "\\x1b[31mred\\u202eevil" in text, (command, text)
