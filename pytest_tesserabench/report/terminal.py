"""The terminal summary: a table per group, or one line per benchmark under ``-q``."""

from __future__ import annotations

import io
from collections import defaultdict

from rich import box
from rich.console import Console
from rich.table import Table

from pytest_tesserabench.units import format_ms


def _rate(value: float | None) -> str:
    return "-" if not value else f"{value:.3g}"


def row_label(record: dict) -> str:
    """What distinguishes a record inside its group: the parameter id and the call's name."""
    nodeid = record["id"] if record.get("name") is None else record["id"][: -len(record["name"]) - 2]
    params = nodeid[nodeid.index("[") + 1 : -1] if nodeid.endswith("]") and "[" in nodeid else ""
    parts = [p for p in (params, record.get("name")) if p]
    return " · ".join(parts) if parts else nodeid.rsplit("::", 1)[-1]


def _test_of(record: dict) -> str:
    return record["id"] if record.get("name") is None else record["id"][: -len(record["name"]) - 2]


def _notes(record: dict) -> str:
    notes = []
    if record["timer"] == "interpreter":
        notes.append("interpreter, not gated")
    elif record["timer"] != "cpu":
        notes.append(record["timer"].replace("_", " "))
    if record["stats"].get("noisy"):
        notes.append("noisy")
    roof = record.get("roofline")
    if roof and roof.get("efficiency") is not None:
        notes.append(f"{roof['efficiency']:.0%} of {roof['bound']} roof")
    for target in record.get("targets", []):
        if target["checked"]:
            verdict = "met" if target["met"] else "MISSED"
            notes.append(f"target {target['at_least']}x vs {target['relative_to']} {verdict}")
    return ", ".join(notes)


def relative_speeds(records: list[dict]) -> dict[str, float | None]:
    """Each record's speed relative to the first measured call of its own test (1.0 for it).

    None where the two were timed differently (an interpreted kernel against a torch CPU call):
    such a ratio says nothing about either.
    """
    first: dict[str, dict] = {}
    speeds: dict[str, float | None] = {}
    for record in records:
        reference = first.setdefault(_test_of(record), record)
        median = record["stats"]["median_ms"]
        comparable = reference["timer"] == record["timer"] and median > 0
        speeds[record["id"]] = reference["stats"]["median_ms"] / median if comparable else None
    return speeds


def render_summary(records: dict[str, dict], *, width: int = 120, color: bool = False, quiet: bool = False) -> str:
    if not records:
        return ""
    ordered = list(records.values())
    speeds = relative_speeds(ordered)
    if quiet:
        lines = []
        for record in ordered:
            s = record["stats"]
            half = (s["ci95_ms"][1] - s["ci95_ms"][0]) / 2 / s["median_ms"] if s["median_ms"] else 0
            extra = f"  {record['tflops']:.4g} TFLOP/s" if record.get("tflops") else ""
            extra += f"  {record['gbps']:.4g} GB/s" if record.get("gbps") else ""
            lines.append(f"{record['id']}  {format_ms(s['median_ms'])} ±{half:.1%}{extra}")
        return "\n".join(lines) + "\n"

    groups: dict[str, list[dict]] = defaultdict(list)
    for record in ordered:
        groups[record["group"]].append(record)
    show_tflops = any(r.get("tflops") for r in ordered)
    show_gbps = any(r.get("gbps") for r in ordered)
    out = io.StringIO()
    # markup=False: labels and notes are data, never rich style tags.
    console = Console(file=out, width=width, force_terminal=color, no_color=not color, highlight=False, markup=False)
    for group, members in groups.items():
        table = Table(
            title=group,
            title_justify="left",
            title_style="bold",
            box=box.SIMPLE_HEAD,
            pad_edge=False,
            collapse_padding=True,
        )
        wide = width >= 110  # min and IQR give way on narrow terminals; the median and its CI never do
        columns = [("benchmark", "left"), ("median", "right"), ("±95%", "right")]
        columns += [("min", "right"), ("IQR", "right")] if wide else []
        columns += [("rounds", "right")]
        columns += [("TFLOP/s", "right")] if show_tflops else []
        columns += [("GB/s", "right")] if show_gbps else []
        columns += [("speed", "right"), ("notes", "left")]
        for header, justify in columns:
            wraps = header in ("benchmark", "notes")
            table.add_column(
                header,
                justify=justify,
                no_wrap=not wraps,
                overflow="fold" if wraps else "ellipsis",
                ratio=1 if wraps else None,
            )
        for record in members:
            s = record["stats"]
            lo, hi = s["ci95_ms"]
            half = (hi - lo) / 2 / s["median_ms"] if s["median_ms"] else 0.0
            cells = [row_label(record), format_ms(s["median_ms"]), f"{half:.1%}"]
            cells += [format_ms(s["min_ms"]), format_ms(s["iqr_ms"])] if wide else []
            cells += [str(s["rounds"])]
            cells += [_rate(record.get("tflops"))] if show_tflops else []
            cells += [_rate(record.get("gbps"))] if show_gbps else []
            speed = speeds[record["id"]]
            cells += ["-" if speed is None else f"{speed:.2f}x", _notes(record)]
            table.add_row(*cells)
        console.print(table)
    return out.getvalue()
