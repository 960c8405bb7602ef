"""One CSV row per benchmark record (``--bench-csv``): tidy columns, units in the header.

Columns: the record's identity (id, nodeid, call, group), one ``param_<name>`` column per test
parameter seen in the run, how it was timed, the statistics of its round medians in
milliseconds, work and rates, the roofline, the verdict and the change against the baseline in
percent. An empty cell is a value the record does not have.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Mapping, Sequence

from pytest_tesserabench.record.results import BenchRecord, Verdict
from pytest_tesserabench.report import rows as R
from pytest_tesserabench.report.safe_text import csv_cell

BASE_COLUMNS = ("id", "nodeid", "call", "group")
FIGURE_COLUMNS = (
    "timer",
    "dtype",
    "outcome",
    "median_ms",
    "ci95_low_ms",
    "ci95_high_ms",
    "mean_ms",
    "min_ms",
    "max_ms",
    "iqr_ms",
    "stdev_ms",
    "rounds",
    "samples",
    "noisy",
    "flop",
    "bytes",
    "tflop_per_s",
    "gb_per_s",
    "roofline_efficiency_pct",
    "roofline_bound",
    "verdict",
    "baseline_ms",
    "change_pct",
    "change_ci95_low_pct",
    "change_ci95_high_pct",
    "p_value",
)


def _pct(ratio: float | None) -> float | None:
    return None if ratio is None else (ratio - 1.0) * 100.0


def _row(record: BenchRecord, verdict: Verdict | None, param_names: Sequence[str]) -> dict:
    s = record.stats
    roof = record.roofline or {}
    row = {
        "id": record.id,
        "nodeid": record.nodeid,
        "call": record.name,
        "group": record.group,
        **{f"param_{name}": record.params.get(name) for name in param_names},
        "timer": record.timer,
        "dtype": record.dtype,
        "outcome": record.outcome,
        "median_ms": s.median_ms,
        "ci95_low_ms": s.ci95_ms[0],
        "ci95_high_ms": s.ci95_ms[1],
        "mean_ms": s.mean_ms,
        "min_ms": s.min_ms,
        "max_ms": s.max_ms,
        "iqr_ms": s.iqr_ms,
        "stdev_ms": s.stdev_ms,
        "rounds": s.rounds,
        "samples": s.samples,
        "noisy": s.noisy,
        "flop": record.flops,
        "bytes": record.bytes,
        "tflop_per_s": record.tflops,
        "gb_per_s": record.gbps,
        "roofline_efficiency_pct": None if roof.get("efficiency") is None else roof["efficiency"] * 100.0,
        "roofline_bound": roof.get("bound"),
    }
    if verdict is not None:
        ci = verdict.ci or (None, None)
        row |= {
            "verdict": verdict.status,
            "baseline_ms": verdict.baseline_ms,
            "change_pct": _pct(verdict.ratio),
            "change_ci95_low_pct": _pct(ci[0]),
            "change_ci95_high_pct": _pct(ci[1]),
            "p_value": verdict.p_value,
        }
    return row


def csv_text(records: Sequence[BenchRecord], verdicts: Mapping[str, Verdict] | None = None) -> str:
    """The CSV file's text, rows in id order."""
    verdicts = verdicts or {}
    measured = R.sort_records(r for r in records if r.stats is not None)
    param_names = sorted({name for r in measured for name in r.params})
    header = [*BASE_COLUMNS, *(f"param_{n}" for n in param_names), *FIGURE_COLUMNS]
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=header, lineterminator="\n")
    writer.writeheader()
    for record in measured:
        row = _row(record, verdicts.get(record.id), param_names)
        writer.writerow(cells(row))
    return out.getvalue()


def cells(row: Mapping) -> dict:
    """A row as CSV cells: None empty, floats to 7 significant digits (0.012962, not the binary
    expansion 0.012961999999999918; a timer's resolution is coarser still)."""
    return {
        k: "" if v is None else format(v, ".7g") if isinstance(v, float) else csv_cell(v) if isinstance(v, str) else v
        for k, v in row.items()
    }
