"""Fixed-width text tables that never break a name.

A terminal table has one name column, value columns and free-text details per row. When the
table is wider than the terminal, it gives way in this order: details move from a column to
indented lines under their row (wrapped at word boundaries: they are prose); value columns drop,
in the order each declares, and the table says which; only then are names shortened, in the
middle (ids differ at their ends), with every shortened name still unique. A cell is never
wrapped, so an id or a number is never split across lines.

Rendering returns ``Line`` objects (text and a style); the caller prints them with its own
colours (pytest's terminal writer) or joins them (files, the CLI).
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

ELLIPSIS = "…"
GAP = "  "
RULE = "─"
DETAIL_INDENT = "    "


@dataclass(frozen=True)
class Line:
    text: str
    style: str | None = None  # a pytest markup name: "red", "green", "yellow", "bold", ...

    def markup(self) -> dict[str, bool]:
        return {self.style: True} if self.style else {}


@dataclass(frozen=True)
class Column:
    key: str
    header: str
    align: str = "right"  # "left" or "right"
    drop: int | None = None  # lower ranks give way first, a rank's columns together; None never does


@dataclass
class Row:
    name: str
    cells: dict[str, str]
    details: list[str] = field(default_factory=list)
    style: str | None = None


@dataclass(frozen=True)
class Table:
    lines: list[Line]
    hidden: list[str]  # headers of the columns left out for want of width
    name_width: int


def shorten_middle(text: str, width: int, head: float = 1 / 3) -> str:
    """``text`` in at most ``width`` characters: whole, or its start and end around an ellipsis
    (``head`` of the room for the start). The end carries what tells ids apart (parameters,
    labels), so it gets the larger share."""
    if len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    room = width - 1
    start = round(room * head)
    return text[:start] + ELLIPSIS + text[len(text) - (room - start) :]


def shorten_unique(texts: Sequence[str], width: int) -> list[str]:
    """Each text middle-shortened to ``width``, cut so that texts that differ still differ once
    shortened: a third of the room for the start by default; when that merges two texts, as
    much of the end as tells them apart, or else of the start."""
    short = [shorten_middle(t, width) for t in texts]
    distinct = len(set(texts))
    if len(set(short)) == distinct or width < 2:
        return short
    for tail in range(1, width):  # the shortest end that tells every text apart
        if len({t[-tail:] if len(t) > width else t for t in texts}) == distinct:
            head = (width - 1 - tail) / (width - 1)
            return [shorten_middle(t, width, head) for t in texts]
    for head in range(1, width):  # else the shortest start that does
        if len({t[:head] if len(t) > width else t for t in texts}) == distinct:
            return [shorten_middle(t, width, head / (width - 1)) for t in texts]
    return short


def _fit(text: str, width: int, align: str) -> str:
    return text.ljust(width) if align == "left" else text.rjust(width)


def render_table(
    name_header: str,
    columns: Sequence[Column],
    rows: Sequence[Row],
    width: int,
    *,
    details_header: str | None = "notes",
    details_apart: bool = False,
    min_name_width: int = 16,
) -> Table:
    """The table as lines no wider than ``width`` where that is possible at all. Under their row,
    details share one line (wrapped), or with ``details_apart`` take a line each (sentences)."""
    names = [row.name for row in rows]
    natural = {c.key: max([len(c.header), *(len(row.cells.get(c.key, "")) for row in rows)]) for c in columns}
    name_width = max([len(name_header), *(len(n) for n in names)])
    inline = [", ".join(row.details) for row in rows]
    details_width = max([len(details_header or ""), *(len(t) for t in inline)]) if any(inline) else 0

    def total(cols: Sequence[Column], name_w: int, with_details: bool) -> int:
        size = name_w + sum(len(GAP) + natural[c.key] for c in cols)
        return size + (len(GAP) + details_width if with_details and details_width else 0)

    shown = list(columns)
    details_inline = details_header is not None and total(shown, name_width, True) <= width
    hidden: list[str] = []
    droppable = sorted((c for c in columns if c.drop is not None), key=lambda c: c.drop)
    while not details_inline and total(shown, name_width, False) > width and droppable:
        rank = droppable[0].drop  # columns of one rank go together (baseline and now, say)
        for column in [c for c in droppable if c.drop == rank]:
            droppable.remove(column)
            shown.remove(column)
            hidden.append(column.header)
    if not details_inline and total(shown, name_width, False) > width:
        name_width = max(min_name_width, len(name_header), width - total(shown, 0, False))
        names = shorten_unique(names, name_width)

    def line(name: str, cells: dict[str, str], extra: str | None) -> str:
        parts = [name.ljust(name_width)] + [_fit(cells.get(c.key, ""), natural[c.key], c.align) for c in shown]
        if extra is not None:
            parts.append(extra)
        return GAP.join(parts).rstrip()

    headers = {c.key: c.header for c in shown}
    header = line(name_header, headers, details_header if details_inline and details_width else None)
    body: list[Line] = []
    widest = len(header)  # the rule spans the header and the rows, not the detail lines under them
    for row, name, text in zip(rows, names, inline):
        body.append(Line(line(name, row.cells, text if details_inline else None), row.style))
        widest = max(widest, len(body[-1].text))
        if not details_inline:
            details = row.details if details_apart else [text] if text else []
            body.extend(Line(d, row.style) for d in _detail_lines(details, width))
    rule = RULE * min(width, widest)
    return Table([Line(header, "bold"), Line(rule), *body], hidden, name_width)


def hidden_note(table: Table, width: int) -> list[Line]:
    """Under a table that left columns out: which (a reader should know what is missing)."""
    if not table.hidden:
        return []
    text = f"(hidden at {width} columns: {', '.join(table.hidden)})"
    return [Line(part) for part in textwrap.wrap(text, max(20, width), subsequent_indent=" ", break_on_hyphens=False)]


def _detail_lines(details: Sequence[str], width: int) -> list[str]:
    """Details under their row, one per line, wrapped at spaces only (never inside a word)."""
    out = []
    room = max(20, width - len(DETAIL_INDENT))
    for detail in details:
        wrapped = textwrap.wrap(detail, room, break_long_words=False, break_on_hyphens=False) or [""]
        out.extend(DETAIL_INDENT + part for part in wrapped)
    return out


_ANSI = {"red": "31", "green": "32", "yellow": "33", "purple": "35", "cyan": "36", "bold": "1"}


def as_text(lines: Sequence[Line], *, color: bool = False) -> str:
    """The lines as text; with ``color``, styled lines in ANSI colours (a terminal, not a file)."""
    out = []
    for line in lines:
        code = _ANSI.get(line.style or "") if color else None
        out.append(f"\x1b[{code}m{line.text}\x1b[0m\n" if code and line.text else line.text + "\n")
    return "".join(out)
