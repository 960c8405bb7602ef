"""What every table of records shares: the columns, the notes, the order, the groups and the row
labels. The terminal table and the markdown summary draw from here, so both read alike.

Records are read through their fields (results.BenchRecord); a record's id is only ever shown,
never taken apart: a row label is what is left of its node id once the part every row of its
group shares has moved into the group's header.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from pytest_tesserabench.gate.conditions import sharing
from pytest_tesserabench.gate.config import GateConfig
from pytest_tesserabench.record.results import BenchRecord
from pytest_tesserabench.record.units import format_factor, format_gbps, format_ms, format_tflops
from pytest_tesserabench.report.safe_text import printable

CALL_SEPARATOR = " · "  # between a row's parameters and the name of a labelled call


def relative_speeds(records: Iterable[BenchRecord]) -> dict[str, float | None]:
    """Each record's speed relative to the first measured call of its own test (1.0 for it).

    None where the two were timed differently (an interpreted kernel against a torch CPU call):
    such a ratio says nothing about either.
    """
    first: dict[str, BenchRecord] = {}
    speeds: dict[str, float | None] = {}
    for record in records:
        reference = first.setdefault(record.nodeid, record)
        median, base = record.median_ms, reference.median_ms
        comparable = reference.timer == record.timer and median and base
        speeds[record.id] = base / median if comparable else None
    return speeds


def _roof(record: BenchRecord) -> float | None:
    roof = record.roofline
    return roof.get("efficiency") if roof else None


UNRESOLVED = ("INCONCLUSIVE", "NOT_GATED")  # what --bench-unresolved=fail fails a test for


def notes(record: BenchRecord, *, timer_shown: bool = False) -> list[str]:
    """Short facts about a record worth a reader's attention."""
    out = []
    verdict = record.verdict
    if record.outcome == "failed" and not (verdict and (verdict.failed or verdict.status in UNRESOLVED)):
        # measured, then its test failed (an assertion, or another row's verdict): not saved, and
        # not this row's doing, which a reader of a failed test's rows must not take it for (an
        # unresolved row may have failed it itself, under --bench-unresolved=fail: not said either way)
        out.append("its test failed, not on this row's verdict")
    if record.timer == "interpreter":
        out.append("interpreter, not gated")
    elif record.timer != "cpu" and not timer_shown:
        out.append(record.timer.replace("_", " "))
    if record.stats and record.stats.noisy:
        out.append("noisy")
    if cpu_shared(record):
        out.append("CPU shared")
    beyond = record.threads_beyond(GateConfig().crowded_cpus)
    if beyond is not None:
        out.append(f"{beyond:.1f} CPUs busy")
    for target in record.targets:
        if target.get("checked"):
            verdict = "met" if target.get("met") else "MISSED"
            out.append(f"target {target.get('at_least')}x vs {target.get('relative_to')} {verdict}")
    return out


def cpu_shared(record: BenchRecord) -> bool:
    """Whether other processes shared the CPU while this CPU-timed record's rounds were timed
    (gate.conditions.sharing, the same test a regression's note uses): caches, memory bandwidth,
    and a multi-threaded call's own threads, which then wait for each other (a steady figure, many
    times the quiet one). The summary's line says it of the run as a whole; this says which rows."""
    return record.timer == "cpu" and sharing(record) is not None


# -- columns ----------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Field:
    """A column of a record table: its header, its cell text and how it sorts and gives way."""

    key: str
    header: str
    cell: Callable[[BenchRecord, dict], str]
    value: Callable[[BenchRecord, dict], float | None]
    drop: int | None = None  # lower gives way first on a narrow terminal; None never does
    descending: bool = False  # sort best first: high rates first, short times first


def _stat(name: str) -> Callable[[BenchRecord, dict], float | None]:
    return lambda r, _: getattr(r.stats, name) if r.stats else None


def _comm(record: BenchRecord, key: str) -> float | None:
    """A collective's bandwidth (algbw_gbps, busbw_gbps) from the record's distributed block."""
    return (record.distributed or {}).get(key)


def _ci_text(record: BenchRecord) -> str:
    """The median's 95% interval: '±1.3%'; past ±100% as factors of the median, '[0.98x, 538x]'
    (rounds in two levels far apart: '±26867.9%' says nothing a reader can use)."""
    stats = record.stats
    if stats.ci_halfwidth <= 1.0 or stats.median_ms <= 0:
        return f"±{stats.ci_halfwidth:.1%}"
    low, high = (ms / stats.median_ms for ms in stats.ci95_ms)
    return f"[{format_factor(low)}, {format_factor(high)}]"


def _speed_text(record: BenchRecord, speeds: dict) -> str:
    speed = speeds.get(record.id)
    return "-" if speed is None else f"{speed:.2f}x"


FIELDS: dict[str, Field] = {
    f.key: f
    for f in (
        Field("median", "median", lambda r, _: format_ms(r.median_ms), _stat("median_ms")),
        Field(
            "ci",
            "CI95",
            lambda r, _: _ci_text(r),
            lambda r, _: r.stats.ci_halfwidth if r.stats else None,
        ),
        Field("mean", "mean", lambda r, _: format_ms(r.stats.mean_ms), _stat("mean_ms"), drop=1),
        Field("stdev", "stdev", lambda r, _: format_ms(r.stats.stdev_ms), _stat("stdev_ms"), drop=1),
        Field("max", "max", lambda r, _: format_ms(r.stats.max_ms), _stat("max_ms"), drop=1),
        Field("timer", "timer", lambda r, _: r.timer, lambda r, _: None, drop=2),
        Field("rounds", "rounds", lambda r, _: str(r.stats.rounds), _stat("rounds"), drop=3),
        Field("iqr", "IQR", lambda r, _: format_ms(r.stats.iqr_ms), _stat("iqr_ms"), drop=4),
        Field("min", "min", lambda r, _: format_ms(r.stats.min_ms), _stat("min_ms"), drop=5),
        Field("throughput", "throughput", lambda r, _: format_tflops(r.tflops), lambda r, _: r.tflops, 9, True),
        Field("bandwidth", "bandwidth", lambda r, _: format_gbps(r.gbps), lambda r, _: r.gbps, 8, True),
        Field(
            "roof",
            "roof",
            lambda r, _: "-" if _roof(r) is None else f"{_roof(r):.0%}",
            lambda r, _: _roof(r),
            drop=6,
            descending=True,
        ),
        Field("speed", "speed", _speed_text, lambda r, s: s.get(r.id), drop=7, descending=True),
        # A collective's bandwidths (nccl-tests' algbw and busbw), from the record's distributed block.
        Field("algbw", "algbw", lambda r, _: format_gbps(_comm(r, "algbw_gbps")), lambda r, _: _comm(r, "algbw_gbps"),
              8, True),
        Field("busbw", "busbw", lambda r, _: format_gbps(_comm(r, "busbw_gbps")), lambda r, _: _comm(r, "busbw_gbps"),
              9, True),
    )
}  # fmt: skip
VERBOSE_EXTRA = ("min", "iqr", "rounds", "timer")


def default_columns(records: Sequence[BenchRecord], *, verbose: bool) -> tuple[str, ...]:
    """median and its interval; min, IQR, rounds and timer with -v; throughput, bandwidth, the
    share of the roofline and relative speed where some record has them."""
    keys = ["median", "ci"]
    if verbose:
        keys += VERBOSE_EXTRA
    if any(r.tflops for r in records):
        keys.append("throughput")
    if any(r.gbps for r in records):
        keys.append("bandwidth")
    if any(_comm(r, "busbw_gbps") is not None for r in records):
        keys += ["algbw", "busbw"]
    if any(_roof(r) is not None for r in records):
        keys.append("roof")
    if any(speed not in (None, 1.0) for speed in relative_speeds(sort_records(records)).values()):
        keys.append("speed")  # some test measured more than one call, timed alike
    return tuple(keys)


# -- order ------------------------------------------------------------------------------------------
def natural_key(text: str) -> list:
    """'M512' before 'M4096': digits compare as numbers."""
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", text)]


def sort_records(records: Iterable[BenchRecord], key: str = "id") -> list[BenchRecord]:
    """By id (numbers in ids compare as numbers), or by a column's value, best first, records
    without that value last."""
    ordered = sorted(records, key=lambda r: (natural_key(r.nodeid), r.name is not None, natural_key(r.name or "")))
    if key == "id":
        return ordered
    field_ = FIELDS[key]
    speeds = relative_speeds(ordered)
    present = [r for r in ordered if field_.value(r, speeds) is not None]
    absent = [r for r in ordered if field_.value(r, speeds) is None]
    present.sort(key=lambda r: field_.value(r, speeds), reverse=field_.descending)
    return present + absent


# -- groups -------------------------------------------------------------------------------------------
def _group_part(record: BenchRecord, by: str) -> str:
    if by == "group":
        return record.group
    if by == "test":
        return record.nodeid
    if by == "call":
        return "first call" if record.name is None else f"call {record.name}"
    name = by.removeprefix("param:")
    return f"{name}={record.params.get(name, '-')}"


def group_records(records: Iterable[BenchRecord], by: Sequence[str] = ("group",)) -> dict[str, list[BenchRecord]]:
    """Records by the group key (in the order of their first record)."""
    groups: dict[str, list[BenchRecord]] = {}
    for record in records:
        groups.setdefault("  ".join(_group_part(record, b) for b in by), []).append(record)
    return groups


def _boundaries(nodeid: str) -> list[int]:
    """Positions where a node id may be cut between its shared part and a row's label: after a
    '::' and before a '['."""
    cuts = [m.end() for m in re.finditer("::", nodeid)]
    cuts += [i for i, ch in enumerate(nodeid) if ch == "["]
    return sorted(set(cuts))


def shared_prefix(nodeids: Sequence[str]) -> str:
    """The longest start that every node id shares, cut at a boundary ('::', '[') that leaves
    every id a non-empty remainder; the whole id when there is only one test."""
    if len(set(nodeids)) == 1:
        return nodeids[0]
    common = os.path.commonprefix(list(nodeids))
    cut = 0
    for position in _boundaries(nodeids[0]):
        if position <= len(common) and all(len(n) > position for n in nodeids):
            cut = position
    return nodeids[0][:cut]


def test_labels(nodeids: Sequence[str]) -> tuple[str, list[str]]:
    """(what the node ids share, the rest of each: its parameters without brackets, or the
    test's name)."""
    if not nodeids:
        return "", []
    prefix = shared_prefix(nodeids)
    labels = []
    for nodeid in nodeids:
        rest = nodeid[len(prefix) :]
        labels.append(rest[1:-1] if rest.startswith("[") and rest.endswith("]") else rest)
    return prefix.removesuffix("::"), labels


UNLABELLED = "(unlabelled)"  # an unlabelled call's row (bench without name=) when nothing names its function


def function_label(record: BenchRecord) -> str:
    """An unlabelled call's row where the header names its test: the function it measured, as
    the test named it (``dumps`` for ``bench(json.dumps, doc)``; a function defined in the test by
    its own name), else ``(unlabelled)`` (a lambda, a callable object, or a file written before
    records kept it)."""
    function = (record.function or "").rsplit("<locals>.", 1)[-1]
    return function if _DOTTED_NAME.fullmatch(function) else UNLABELLED


_DOTTED_NAME = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")  # (not a lambda's, nor a callable object's repr)


def row_labels(records: Sequence[BenchRecord]) -> tuple[str, list[str]]:
    """(what the rows share, each row's label): the rest of its node id and the name of a
    labelled call (an unlabelled one alone in its test: the function it measured)."""
    shared, tests = test_labels([r.nodeid for r in records])
    labels = []
    for record, test in zip(records, tests):
        call = function_label(record) if record.name is None else record.name
        labels.append(call if not test else test if record.name is None else f"{test}{CALL_SEPARATOR}{call}")
    return printable(shared), [printable(label) for label in labels]  # (names are data: safe_text)


def group_title(key: str, shared: str, shared_notes: Sequence[str]) -> str:
    """A group's header: its key, what its rows' ids share (when the key does not already say
    it) and the notes every row has."""
    key = printable(key)
    if not shared or shared in key:
        title = key
    elif shared.startswith(key):  # e.g. a group of one: its whole id says the key too
        title = shared
    else:
        title = f"{key}  ({shared})"
    return f"{title} — {', '.join(shared_notes)}" if shared_notes else title


def common_notes(note_lists: Sequence[Sequence[str]]) -> list[str]:
    """Notes that every row has, in the first row's order (they move into the group's header)."""
    if len(note_lists) < 2:
        return []
    return [n for n in note_lists[0] if all(n in other for other in note_lists[1:])]
