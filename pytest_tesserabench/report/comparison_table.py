"""The comparison section: every compared benchmark against its baseline, as a rich table."""

from __future__ import annotations

import io
from collections.abc import Mapping

from rich import box
from rich.console import Console
from rich.table import Table

from pytest_tesserabench.results import STATUSES, Verdict
from pytest_tesserabench.units import format_ms

# What differs between two runs without changing the machine key (DESIGN.md section 6).
SOFTWARE_KEYS = ("driver", "cuda", "torch", "triton", "python", "numpy")
_STYLE = {
    "REGRESSED": "bold red",
    "IMPOSSIBLE": "bold red",
    "INCONCLUSIVE": "yellow",
    "IMPROVED": "green",
    "NEW": "cyan",
    "MISSING": "magenta",
    "NOT_GATED": "dim",
}
# Worst first, so a long table starts with what needs attention.
_ORDER = {status: i for i, status in enumerate(STATUSES)}


def software_differences(candidate_machine: Mapping | None, baseline_machine: Mapping | None) -> list[str]:
    """['torch 2.11.0 -> 2.13.0', ...] for the recorded software versions that differ."""
    candidate_machine, baseline_machine = candidate_machine or {}, baseline_machine or {}
    diffs = []
    for key in SOFTWARE_KEYS:
        old, new = baseline_machine.get(key), candidate_machine.get(key)
        if old != new and (old is not None or new is not None):
            diffs.append(f"{key} {old if old is not None else '?'} -> {new if new is not None else '?'}")
    return diffs


def _verdict_text(verdict: Verdict) -> str:
    text = verdict.status if verdict.severity is None else f"{verdict.status} ({verdict.severity})"
    # Reasons first (why it failed), then notes: kernel changes, a short history, why not gated.
    details = [*verdict.reasons, *verdict.notes]
    return text + ("\n" + "\n".join(details) if details else "")


def render_comparison(
    verdicts: Mapping[str, Verdict],
    *,
    version_diffs: list[str],
    canary_ratio: float | None,
    width: int = 120,
    color: bool = False,
    canary: bool = True,
) -> str:
    """The terminal comparison section as text (ANSI colours only when ``color``)."""
    # The verdict comes first after the name; numbers never wrap (a split number misleads); on a
    # narrow terminal p and the history length give way.
    wide = width >= 110
    table = Table(title="benchmark comparison", title_justify="left", expand=False, box=box.SIMPLE_HEAD, pad_edge=False)
    table.add_column("benchmark", overflow="fold", ratio=1, min_width=16)
    table.add_column("verdict", overflow="fold")
    table.add_column("change [95% CI]", justify="right", no_wrap=True)
    table.add_column("baseline", justify="right", no_wrap=True)
    table.add_column("now", justify="right", no_wrap=True)
    if wide:
        table.add_column("p", justify="right", no_wrap=True)
        table.add_column("runs", justify="right", no_wrap=True)
    for verdict in sorted(verdicts.values(), key=lambda v: (_ORDER.get(v.status, 99), v.id)):
        cells = [
            verdict.id,
            _verdict_text(verdict),
            verdict.change_text(),
            format_ms(verdict.baseline_ms),
            format_ms(verdict.candidate_ms),
        ]
        if wide:
            cells += [
                "-" if verdict.p_value is None else f"{verdict.p_value:.2g}",
                str(verdict.history) if verdict.history else "-",
            ]
        table.add_row(*cells, style=_STYLE.get(verdict.status))

    buffer = io.StringIO()
    # markup=False: node ids hold brackets ("test_x[M=64]") that rich would read as style tags.
    console = Console(
        file=buffer,
        width=width,
        force_terminal=color,
        no_color=not color,
        color_system="standard" if color else None,
        highlight=False,
        emoji=False,
        markup=False,
    )
    console.print(table)
    counts: dict[str, int] = {}
    for verdict in verdicts.values():
        counts[verdict.status] = counts.get(verdict.status, 0) + 1
    console.print(
        ", ".join(f"{n} {s.lower()}" for s, n in sorted(counts.items(), key=lambda x: _ORDER.get(x[0], 99)))
        or "nothing compared"
    )
    if canary_ratio is not None:
        console.print(f"canary: {canary_ratio:.3f}x the baseline's (machine-wide speed; 1.000 = same)")
    elif canary:
        console.print("canary: not available in one of the runs")
    if version_diffs:
        console.print("software differs from the baseline: " + "; ".join(version_diffs))
    hints = sorted({v.hint() for v in verdicts.values() if v.hint()})
    for hint in hints:
        console.print(f"inconclusive: {hint}")
    return buffer.getvalue()
