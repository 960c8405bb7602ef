"""The comparison section: every compared benchmark against its baseline.

Laid out like the summary (report/layout.py): a table per group whose header carries what the
rows share, worst verdicts first; numbers never wrap; a verdict's reasons and notes are kept
whole, beside the row when there is room and on indented lines under it otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from pytest_tesserabench.record.results import STATUSES, BenchRecord, Verdict
from pytest_tesserabench.record.units import format_ms
from pytest_tesserabench.report import rows as R
from pytest_tesserabench.report.layout import Column, Line, Row, as_text, hidden_note, render_table, shorten_middle
from pytest_tesserabench.report.safe_text import printable

# What differs between two runs without changing the machine key (docs/usage.md, "The run file").
SOFTWARE_KEYS = ("driver", "cuda", "torch", "triton", "python", "numpy")
STYLE = {
    "REGRESSED": "red",
    "IMPOSSIBLE": "red",
    "INCONCLUSIVE": "yellow",
    "IMPROVED": "green",
    "NEW": "cyan",
    "MISSING": "purple",
}
# Worst first, so a long table starts with what needs attention.
_ORDER = {status: i for i, status in enumerate(STATUSES)}
COLUMNS = (
    Column("verdict", "verdict", align="left"),
    Column("change", "change [CI95]"),
    Column("baseline", "baseline", drop=2),
    Column("now", "now", drop=2),
    Column("shift", "shift", drop=2),  # only where a run's shared shift was removed from a change
    Column("p", "p", drop=1),
    Column("runs", "runs", drop=1),
)
# "now" apart from the results table's median by this much (log) earns a line saying why
CENTRE_APART = 0.02
# A/B: the other side is the reference measured in this job, and the count is of pairs
AB_COLUMNS = tuple(
    Column(c.key, {"baseline": "ref", "runs": "pairs"}.get(c.key, c.header), c.align, c.drop) for c in COLUMNS
)


def software_differences(candidate_machine: Mapping | None, baseline_machine: Mapping | None) -> list[str]:
    """['torch 2.11.0 -> 2.13.0', ...] for the recorded software versions that differ."""
    candidate_machine, baseline_machine = candidate_machine or {}, baseline_machine or {}
    diffs = []
    for key in SOFTWARE_KEYS:
        old, new = baseline_machine.get(key), candidate_machine.get(key)
        if old != new and (old is not None or new is not None):
            diffs.append(f"{key} {old if old is not None else '?'} -> {new if new is not None else '?'}")
    return diffs


def _cells(verdict: Verdict, paired: bool) -> dict[str, str]:
    return {
        "verdict": verdict.head(),
        "change": verdict.change_text(),
        "baseline": format_ms(verdict.baseline_ms),
        "now": format_ms(verdict.candidate_ms),
        "shift": verdict.shift_text() or "-",
        "p": "-" if verdict.p_value is None else f"{verdict.p_value if paired else claimed_p(verdict):.2g}",
        "runs": str(verdict.history) if verdict.history else "-",
    }


def claimed_p(verdict: Verdict) -> float:
    """History mode: the one-sided p of the direction the row names. A verdict keeps p for
    "slower", which an IMPROVED row would print as p=1 beside a significant speed-up; under Student's
    t its p for "faster" is the rest. (A/B's rule with one process per side is a sign test, whose
    p for "faster" is not the rest: its rows keep p for "slower".)"""
    return 1.0 - verdict.p_value if verdict.status == "IMPROVED" else verdict.p_value


def _stand_in(verdict_id: str) -> BenchRecord:
    """A record for a verdict whose benchmark no run at hand describes: grouped by its id alone."""
    return BenchRecord(nodeid=verdict_id, name=None, group=verdict_id, timer="cpu", rounds_ms=[], stats=None)


def counts_text(verdicts: Mapping[str, Verdict]) -> str:
    """'1 regressed, 3 unchanged', worst first."""
    counts: dict[str, int] = {}
    for verdict in verdicts.values():
        counts[verdict.status] = counts.get(verdict.status, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: _ORDER.get(item[0], 99))
    return ", ".join(f"{n} {s.lower().replace('_', ' ')}" for s, n in ordered) or "nothing compared"


def comparison_lines(
    verdicts: Mapping[str, Verdict],
    *,
    version_diffs: list[str],
    canary_ratio: float | None,
    records: Mapping[str, BenchRecord] | None = None,
    width: int = 120,
    canary: bool = True,
    paired: bool = False,
    hints: bool = True,
) -> list[Line]:
    """The comparison section. ``records`` (id -> record, from this run or the baseline) name
    each verdict's group; a verdict without one is a group of its own. ``hints``: a line per
    INCONCLUSIVE verdict saying what would settle it (off where each test's warning says so)."""
    records = records or {}
    by_record = {vid: records.get(vid) or _stand_in(vid) for vid in verdicts}
    groups = R.group_records(R.sort_records(by_record.values()), ("group",))

    def worst(members: list[BenchRecord]) -> int:
        return min(_ORDER.get(verdicts[m.id].status, 99) for m in members)

    columns = AB_COLUMNS if paired else COLUMNS
    if not any(v.shift_text() for v in verdicts.values()):
        columns = tuple(c for c in columns if c.key != "shift")
    out: list[Line] = []
    for key, members in sorted(groups.items(), key=lambda item: (worst(item[1]), R.natural_key(item[0]))):
        members = sorted(members, key=lambda m: _ORDER.get(verdicts[m.id].status, 99))  # stable: ids stay in order
        shared, labels = R.row_labels(members)
        rows = []
        for member, label in zip(members, labels):
            verdict = verdicts[member.id]
            details = [*verdict.reasons, *verdict.notes]  # why it failed first, then what to know
            rows.append(Row(label, _cells(verdict, paired), details, STYLE.get(verdict.status)))
        if out:
            out.append(Line(""))
        out.append(Line(shorten_middle(R.group_title(key, shared, []), width), "bold"))
        table = render_table("benchmark", columns, rows, width, details_apart=True)
        out.extend(table.lines)
        out.extend(hidden_note(table, width))
    out.append(Line(""))
    out.append(Line(counts_text(verdicts), "bold"))
    if canary_ratio is not None:
        out.append(Line(canary_line(canary_ratio)))
    elif canary:  # (A/B has no canary line: the pairs cancel what the machine does)
        out.append(Line("canary: not available in one of the runs"))
    if version_diffs:
        out.append(Line("software differs from the baseline: " + "; ".join(version_diffs)))
    if not paired and centres_apart(verdicts, records):
        out.append(Line(CENTRES_NOTE))
    # (one whose noise alone left it undecided has no cause of its own: the summary's one line
    # names those together, with the slowdown each could have caught and what judges them)
    for verdict in sorted((v for v in verdicts.values() if hints and v.hint_text and v.hint()), key=lambda v: v.id):
        out.append(Line(f"inconclusive {printable(verdict.id)}: {verdict.hint()}", "yellow"))
    return out


CENTRES_NOTE = (
    "baseline, now: each side's centre (per process its fastest pass's median, as interference only slows; "
    "then the median over processes), not the results table's median over every round"
)


def centres_apart(verdicts: Mapping[str, Verdict], records: Mapping[str, BenchRecord]) -> bool:
    """Whether some benchmark's "now" reads CENTRE_APART or more from the median of this run's
    record (a crowded run, a process measured again): there the two figures need telling apart."""
    for vid, verdict in verdicts.items():
        record = records.get(vid)
        median = record.median_ms if record is not None else None
        if verdict.candidate_ms and median and abs(math.log(verdict.candidate_ms / median)) >= CENTRE_APART:
            return True
    return False


def render_comparison(verdicts: Mapping[str, Verdict], *, color: bool = False, **kwargs) -> str:
    """The comparison section as text (see comparison_lines); ANSI colours with ``color``."""
    return as_text(comparison_lines(verdicts, **kwargs), color=color)


# A move of the canary smaller than this says nothing either way: on a shared VM its readings in
# the processes of one save, half a minute apart, spread by several percent.
CANARY_STEADY = 0.02


def canary_line(ratio: float) -> str:
    """The canary's time against the baseline's (gate.model.machine_ratio: below 1, a faster
    machine), said both ways so that 0.98x cannot read as slower."""
    change = ratio - 1.0
    if round(change, 3) == 0:
        how = "the same time: as fast a machine"
    elif abs(change) < CANARY_STEADY:
        how = f"{change:+.1%}: about as fast a machine (the canary reads {CANARY_STEADY:.0%} apart from run to run)"
    elif change < 0:
        how = f"{-change:.1%} less time: a faster machine"
    else:
        how = f"{change:.1%} more time: a slower machine"
    return f"canary: {ratio:.3f}x the baseline's time ({how})"
