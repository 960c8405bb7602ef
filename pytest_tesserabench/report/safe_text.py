"""Names as data at every output: a test id or parameter value may hold anything a string can
(terminal escape sequences, a right-to-left override, newlines, ``|``, a leading ``=``), and
none of it may act on the terminal, the Markdown table or the spreadsheet. (Plots parse no
mathtext: report/plots.py.)

Each function takes text and returns what is safe to put in that output; what a character was
stays readable (``\\x1b``, ``\\u202e``).
"""

from __future__ import annotations

import unicodedata

# Unicode's bidirectional controls: they reorder what follows on the line (Trojan Source).
BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")  # what a spreadsheet reads as a formula


def printable(text: str) -> str:
    """``text`` with control characters and bidirectional controls written as escapes."""
    text = str(text)
    if text.isprintable() and not BIDI_CONTROLS.intersection(text):
        return text
    out = []
    for char in text:
        if char in BIDI_CONTROLS or unicodedata.category(char) in ("Cc", "Cf", "Zl", "Zp"):
            code = ord(char)
            out.append(f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")
        else:
            out.append(char)
    return "".join(out)


def markdown_cell(text: str) -> str:
    """A table cell of GitHub-flavoured Markdown: one line, ``|`` escaped, no HTML."""
    return printable(text).replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def csv_cell(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: a value that starts like a formula gets a leading
    apostrophe (OWASP's advice for CSV injection)."""
    text = printable(text)
    return "'" + text if text.startswith(FORMULA_STARTS) else text
