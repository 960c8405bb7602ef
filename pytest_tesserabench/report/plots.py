"""The HTML report's plots, drawn with matplotlib (the optional 'report' extra) as inline SVG.

One group of records (a test function, unless ``@pytest.mark.bench(group=...)`` says otherwise)
gets up to five plots:

* ``sweep``: throughput (TFLOP/s, else GB/s, else the median time) against problem size, one
  line per labelled call (and per value of a non-size parameter such as the precision), with
  each point's 95% interval;
* ``roofline``: each benchmark with a compute and a memory figure placed under the device's roofs,
  where the peaks are known (the record's ``roofline`` field);
* ``distribution``: each benchmark's round medians relative to its median (the spread the
  statistics were computed from);
* ``change``: against a baseline, each benchmark's change with its 95% interval, regressions red;
* ``history``: each benchmark's median over the baseline's runs and this one, commit on the axis.

matplotlib is imported only when a plot is drawn; ``Figure`` objects are used directly (no
pyplot, no global state, no display needed). SVG text stays text, so the page is searchable.
"""

from __future__ import annotations

import importlib.util
import io
import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pytest_tesserabench.history import steps as steps_
from pytest_tesserabench.history.timeline import latest, series, steps_of
from pytest_tesserabench.record.results import BenchRecord, RunDocument, Verdict
from pytest_tesserabench.report import rows as R
from pytest_tesserabench.report.safe_text import printable

EXTRA_HINT = "install the 'report' extra: pip install 'pytest-tesserabench[report]'"
RED, GREEN, AMBER, GREY = "#c62828", "#2e7d32", "#ef8f00", "#8a8a8a"
STATUS_COLOR = {"REGRESSED": RED, "IMPOSSIBLE": RED, "IMPROVED": GREEN, "INCONCLUSIVE": AMBER}
MAX_ROWS = 60  # benchmarks drawn in one distribution or change plot; beyond, the plot says so


class PlotError(RuntimeError):
    """Plots cannot be drawn here (matplotlib is missing); the message says what to install."""


def missing_dependency() -> str | None:
    """Why plots cannot be drawn here, or None. Cheap: finds matplotlib without importing it."""
    try:
        found = importlib.util.find_spec("matplotlib") is not None
    except (ImportError, ValueError):
        found = False
    if found:
        return None
    return f"the HTML report draws its plots with matplotlib, which is not installed; {EXTRA_HINT}"


@dataclass(frozen=True)
class Plot:
    kind: str  # sweep, roofline, distribution, change, history
    title: str
    svg: str
    caption: str = ""


# matplotlib: the optional `report` extra (~0.4 s), imported where a figure is drawn (PlotError without it).
def _figure(width: float, height: float):
    try:
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise PlotError(f"matplotlib cannot be imported ({exc}); {EXTRA_HINT}") from None
    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.add_subplot()


def _svg(fig) -> str:
    import matplotlib
    import matplotlib.text

    buffer = io.StringIO()
    # Text as text (searchable, the browser's fonts); ids from content, so a page is reproducible.
    # Names are data: no mathtext parsed out of a '$' in a test id or call name (it raised), and
    # no control character drawn (a missing glyph, raw in the SVG: invalid XML, a reversed label).
    for text in fig.findobj(matplotlib.text.Text):
        text.set_parse_math(False)
        text.set_text(printable(text.get_text()))
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "tesserabench"}):
        fig.savefig(buffer, format="svg", metadata={"Date": None})
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _style(ax) -> None:
    ax.grid(True, which="major", color="#e3e3e3", linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)


def _scale(values: Sequence[float], unit: str) -> tuple[float, str]:
    """(divisor, label) putting the largest value in a readable range: ms -> µs, FLOP/s -> TFLOP/s."""
    top = max(values) if values else 1.0
    if unit == "ms":
        for divisor, name in ((1e3, "s"), (1.0, "ms"), (1e-3, "µs"), (1e-6, "ns")):
            if top >= divisor or name == "ns":
                return divisor, name
    base = 1e12 if unit == "FLOP/s" else 1e9  # records hold TFLOP/s and GB/s
    for divisor, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")):
        if top * base >= divisor or not prefix:
            return divisor / base, f"{prefix}{unit}"
    raise AssertionError("unreachable")


# -- the size sweep ---------------------------------------------------------------------------------
def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def size_axes(records: Sequence[BenchRecord]) -> list[str]:
    """The numeric parameters that vary across the records: the problem size."""
    names = [n for n in records[0].params if all(n in r.params for r in records)]
    return [
        n for n in names if all(_is_number(r.params[n]) for r in records) and len({r.params[n] for r in records}) > 1
    ]


def series_of(record: BenchRecord, sizes: Sequence[str], varying: Sequence[str]) -> str:
    """A line of the sweep: the labelled call, and the values of the other varying parameters."""
    parts = ["first call" if record.name is None else record.name]
    parts += [f"{n}={record.params.get(n)}" for n in varying if n not in sizes]
    interpreted = " (interpreter)" if record.timer == "interpreter" else ""  # not the device's speed
    return R.CALL_SEPARATOR.join(parts) + interpreted


def _metric(records: Sequence[BenchRecord]) -> str:
    if sum(1 for r in records if r.tflops) * 2 >= len(records) and any(r.tflops for r in records):
        return "throughput"
    if any(r.gbps for r in records) and sum(1 for r in records if r.gbps) * 2 >= len(records):
        return "bandwidth"
    return "time"


def _value_and_interval(record: BenchRecord, metric: str) -> tuple[float, float, float] | None:
    """(value, low, high) of the metric; a rate's interval follows from the time's."""
    s = record.stats
    lo_ms, hi_ms = s.ci95_ms
    if metric == "time":
        return s.median_ms, lo_ms, hi_ms
    rate = record.tflops if metric == "throughput" else record.gbps
    if not rate:
        return None
    work = rate * s.median_ms  # rate x time is constant: the work
    return rate, work / hi_ms if hi_ms > 0 else rate, work / lo_ms if lo_ms > 0 else rate


def sweep_plot(records: Sequence[BenchRecord]) -> Plot:
    sizes = size_axes(records)
    varying = [n for n in records[0].params if len({repr(r.params.get(n)) for r in records}) > 1 and n not in sizes]
    metric = _metric(records)
    points: dict[str, list[tuple[float, tuple[float, float, float]]]] = {}
    tests = list(dict.fromkeys(r.nodeid for r in records))  # one size: the tests side by side
    left_out = 0
    for record in records:
        value = _value_and_interval(record, metric)
        if value is None:
            left_out += 1
            continue
        x = math.prod(float(record.params[n]) for n in sizes) if sizes else float(tests.index(record.nodeid))
        points.setdefault(series_of(record, sizes, varying), []).append((x, value))
    if not sizes and len(points) > 1:  # calls of one test side by side, not on top of each other
        offsets = {name: (i - (len(points) - 1) / 2) * 0.12 for i, name in enumerate(points)}
        points = {name: [(x + offsets[name], v) for x, v in line] for name, line in points.items()}

    fig, ax = _figure(6.4, 3.8 + (0.18 * ((len(points) + 1) // 2) if len(points) > 3 else 0))
    _style(ax)
    unit = {"throughput": "FLOP/s", "bandwidth": "B/s", "time": "ms"}[metric]
    divisor, unit_label = _scale([v[0] for line in points.values() for _, v in line], unit)
    for name, line in points.items():
        line.sort()
        xs = [x for x, _ in line]
        ys = [v[0] / divisor for _, v in line]
        yerr = [[(v[0] - v[1]) / divisor for _, v in line], [(v[2] - v[0]) / divisor for _, v in line]]
        ax.errorbar(xs, ys, yerr=yerr, marker="o", markersize=4, linewidth=1.5, capsize=2, label=name)
    all_x = [x for line in points.values() for x, _ in line]
    all_y = [v[0] for line in points.values() for _, v in line]
    if sizes and min(all_x) > 0 and max(all_x) / min(all_x) >= 8:
        ax.set_xscale("log", base=2)
    if min(all_y) > 0 and max(all_y) / min(all_y) >= 20:
        ax.set_yscale("log")
    if not sizes:
        _, ticks = R.test_labels(tests)
        ax.set_xticks(
            range(len(tests)), ticks, rotation=30 if len(tests) > 4 else 0, ha="right" if len(tests) > 4 else "center"
        )
        ax.set_xlim(-0.5, len(tests) - 0.5)
    ax.set_xlabel(" · ".join(sizes) if sizes else "benchmark")
    what = {"throughput": "throughput", "bandwidth": "bandwidth", "time": "median time (lower is better)"}[metric]
    ax.set_ylabel(f"{what} [{unit_label}]")
    if len(points) > 3:  # under the plot, where it covers no line
        fig.legend(loc="outside lower center", ncols=2, fontsize=7, frameon=False)
    elif len(points) > 1:
        ax.legend(fontsize=8, frameon=False)
    caption = "error bars: 95% interval of the median"
    if left_out:
        caption += f"; {left_out} benchmark(s) without this figure left out"
    title = f"{what.split(' (')[0]} against problem size" if sizes else what.split(" (")[0]
    return Plot("sweep", title, _svg(fig), caption)


# -- the roofline -------------------------------------------------------------------------------------
def roofline_plot(records: Sequence[BenchRecord]) -> Plot | None:
    """Benchmarks with flops and bytes under their device's roofs; None when no peak is known."""
    placed = [r for r in records if r.roofline and r.roofline.get("peak_tflops") and r.tflops and r.flops and r.bytes]
    if not placed:
        return None
    intensity = [r.flops / r.bytes for r in placed]
    lo, hi = min(intensity) / 8, max(intensity) * 8
    fig, ax = _figure(6.4, 3.8)
    _style(ax)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    roofs = {(r.roofline.get("precision") or "?", r.roofline["peak_tflops"], r.roofline["peak_gbps"]) for r in placed}
    for style, (precision, peak, gbps) in zip(("-", "--", ":", "-."), sorted(roofs)):
        knee = peak * 1e3 / gbps  # flop/byte where the memory roof meets the compute roof
        xs = [lo, min(max(knee, lo), hi), hi]
        label = f"roof: {precision} {peak:.3g} TFLOP/s, memory {gbps:.3g} GB/s"
        ax.plot(xs, [min(peak, x * gbps / 1e3) for x in xs], color="#444", linewidth=1.2, linestyle=style, label=label)
    by_series: dict[str, list[BenchRecord]] = {}
    for record in placed:
        by_series.setdefault("first call" if record.name is None else record.name, []).append(record)
    for name, members in by_series.items():
        ax.scatter([r.flops / r.bytes for r in members], [r.tflops for r in members], s=22, label=name, zorder=3)
    ax.set_xlabel("arithmetic intensity [FLOP/byte]")
    ax.set_ylabel("achieved [TFLOP/s]")
    ax.legend(fontsize=8, frameon=False, loc="best")
    sources = sorted({str(r.roofline.get("source", "table")) for r in placed})
    caption = f"roofs from {', '.join(sources)} peaks"
    if len(placed) < len(records):
        caption += f"; {len(records) - len(placed)} benchmark(s) without flops, bytes or a known peak left out"
    return Plot("roofline", "roofline", _svg(fig), caption)


# -- spread, change, history ----------------------------------------------------------------------------
def _rows_plot_height(n: int) -> float:
    return 1.2 + 0.28 * n


def distribution_plot(records: Sequence[BenchRecord]) -> Plot:
    _, labels = R.row_labels(records)
    shown = list(zip(records, labels))[:MAX_ROWS]
    fig, ax = _figure(6.4, _rows_plot_height(len(shown)))
    _style(ax)
    data = [[(x / r.median_ms - 1) * 100 for x in r.measured_rounds] or [0.0] for r, _ in shown]
    positions = list(range(len(shown), 0, -1))
    try:
        ax.boxplot(data, positions=positions, orientation="horizontal", widths=0.6, showfliers=False)
    except TypeError:  # matplotlib before 3.10
        ax.boxplot(data, positions=positions, vert=False, widths=0.6, showfliers=False)
    for y, values in zip(positions, data):
        ax.scatter(values, [y] * len(values), s=6, color="#1f77b4", alpha=0.5, zorder=3)
    ax.set_yticks(positions, [label for _, label in shown], fontsize=8)
    ax.axvline(0, color="#444", linewidth=0.8)
    ax.set_xlabel("round median relative to the benchmark's median [%]")
    caption = "box: quartiles of the round medians; points: every round"
    if len(records) > len(shown):
        caption += f"; the first {len(shown)} of {len(records)} benchmarks"
    return Plot("distribution", "distribution of round medians", _svg(fig), caption)


def change_plot(records: Sequence[BenchRecord], verdicts: Mapping[str, Verdict]) -> Plot | None:
    _, labels = R.row_labels(records)
    rows = [(label, verdicts[r.id]) for r, label in zip(records, labels) if r.id in verdicts]
    rows = [(label, v) for label, v in rows if v.ratio is not None][:MAX_ROWS]
    if not rows:
        return None
    fig, ax = _figure(6.4, _rows_plot_height(len(rows)))
    _style(ax)
    positions = list(range(len(rows), 0, -1))
    for y, (_, verdict) in zip(positions, rows):
        change = (verdict.ratio - 1) * 100
        lo, hi = verdict.ci if verdict.ci else (verdict.ratio, verdict.ratio)
        color = STATUS_COLOR.get(verdict.status, GREY)
        ax.errorbar(
            [change], [y], xerr=[[change - (lo - 1) * 100], [(hi - 1) * 100 - change]], fmt="o", color=color, capsize=3
        )
    ax.axvline(0, color="#444", linewidth=0.8)
    thresholds = {v.threshold for _, v in rows if v.threshold}
    if len(thresholds) == 1:
        ax.axvline(thresholds.pop() * 100, color=RED, linewidth=0.8, linestyle="--")
    ax.set_yticks(positions, [label for label, _ in rows], fontsize=8)
    ax.set_xlabel("change against the baseline [%] (positive: slower)")
    caption = "95% interval of the change; red: regressed, green: improved, amber: inconclusive"
    caption += "; dashed: the threshold" if any(v.threshold for _, v in rows) else ""
    return Plot("change", "change against the baseline", _svg(fig), caption)


def _run_label(run: RunDocument, index: int) -> str:
    sha = run.commit.get("sha")
    if sha:
        return str(sha)[:7] + ("+" if run.commit.get("dirty") else "")
    return (run.started or f"run {index + 1}")[:10]


def history_plot(
    records: Sequence[BenchRecord],
    history: Sequence[RunDocument],
    current: RunDocument,
    verdicts: Mapping[str, Verdict],
) -> Plot | None:
    """Each benchmark's median in every baseline run and in this run, relative to the baseline's
    centre (the median of its runs' medians), the runs in order with their commits."""
    runs = [*history, current]
    _, labels = R.row_labels(records)
    lines = []
    for record, label in zip(records, labels):
        medians = [run.benchmarks[record.id].median_ms if record.id in run.benchmarks else None for run in runs]
        past = [m for m in medians[:-1] if m]
        if not past:
            continue
        centre = statistics.median(past)
        lines.append((label, record.id, [None if m is None else (m / centre - 1) * 100 for m in medians]))
    if not lines:
        return None
    fig, ax = _figure(6.4, 3.6)
    _style(ax)
    xs = list(range(len(runs)))
    for label, record_id, values in lines:
        verdict = verdicts.get(record_id)
        color = STATUS_COLOR.get(verdict.status) if verdict else None
        points = [(x, v) for x, v in zip(xs, values) if v is not None]
        ax.plot(
            [x for x, _ in points],
            [v for _, v in points],
            marker="o",
            markersize=3,
            linewidth=1.2 if color else 0.9,
            color=color,
            label=label if len(lines) <= 10 else None,
        )
    ax.axhline(0, color="#444", linewidth=0.8)
    marked = _mark_steps(ax, history, [record_id for _, record_id, _ in lines])
    names = [_run_label(run, i) for i, run in enumerate(history)] + ["this run"]
    ax.set_xticks(xs, names, rotation=30 if len(xs) > 5 else 0, ha="right" if len(xs) > 5 else "center", fontsize=8)
    ax.set_xlabel("baseline runs, oldest first (commit), then this run")
    ax.set_ylabel("median against the baseline's [%]")
    if 1 < len(lines) <= 10:
        ax.legend(fontsize=7, frameon=False)
    caption = f"{len(history)} baseline run(s); red: regressed; {marked}"
    return Plot("history", "history over the baseline's runs", _svg(fig), caption)


def _mark_steps(ax, history: Sequence[RunDocument], ids: Sequence[str]) -> str:
    """A dashed line before the first run after each step the baseline's history took (the steps
    `tesserabench history` finds), labelled with its size; what the caption says about them."""

    try:
        found = {i: (points, steps_of(points, alpha=0.01)) for i, points in series(history).items() if i in ids}
    except steps_.MissingLibrary:
        return "steps not marked (pip install 'pytest-tesserabench[history]')"
    count = 0
    for points, steps in found.values():
        for step in steps:
            x = points[step.index].run - 1.5  # between the last run before the step and the first after
            ax.axvline(x, color="#888", linestyle="--", linewidth=0.8)
            ax.annotate(f"{step.ratio - 1:+.0%}", (x, 1), xycoords=("data", "axes fraction"), fontsize=7,
                        ha="center", va="bottom")  # fmt: skip
            count += 1
    return f"dashed: {count} step(s) in the baseline's runs" if count else "no step in the baseline's runs"


def group_plots(
    records: Sequence[BenchRecord],
    *,
    verdicts: Mapping[str, Verdict],
    history: Sequence[RunDocument],
    current: RunDocument,
) -> list[Plot]:
    """Every plot that applies to one group of records, in reading order."""
    if not records:
        raise PlotError("no measured benchmark to plot")
    plots = [sweep_plot(records)]
    roof = roofline_plot(records)
    if roof is not None:
        plots.append(roof)
    plots.append(distribution_plot(records))
    change = change_plot(records, verdicts)
    if change is not None:
        plots.append(change)
    if history:  # (the latest runs: a plot of thousands reads as nothing, and its steps cost minutes)
        past = history_plot(records, latest(history)[0], current, verdicts)
        if past is not None:
            plots.append(past)
    return plots
