"""The terminal summary: a table per group, or one line per benchmark under ``-q``."""

from __future__ import annotations

import io
from collections import defaultdict

from rich import box
from rich.console import Console
from rich.table import Table

from pytest_tesserabench.results import BenchRecord
from pytest_tesserabench.units import format_ms


def _rate(value: float | None) -> str:
    return "-" if not value else f"{value:.3g}"


def row_label(record: BenchRecord) -> str:
    """What distinguishes a record inside its group: the parameter id and the call's name."""
    nodeid = record.nodeid
    params = nodeid[nodeid.index("[") + 1 : -1] if nodeid.endswith("]") and "[" in nodeid else ""
    parts = [p for p in (params, record.name) if p]
    return " · ".join(parts) if parts else nodeid.rsplit("::", 1)[-1]


def _comm(record: BenchRecord, key: str) -> float | None:
    """A collective's bandwidth (algbw_gbps, busbw_gbps) from the record's distributed block."""
    return (record.distributed or {}).get(key)


def notes(record: BenchRecord) -> str:
    out = []
    if record.timer == "interpreter":
        out.append("interpreter, not gated")
    elif record.timer != "cpu":
        out.append(record.timer.replace("_", " "))
    if record.stats and record.stats.noisy:
        out.append("noisy")
    roof = record.roofline
    if roof and roof.get("efficiency") is not None:
        out.append(f"{roof['efficiency']:.0%} of {roof['bound']} roof")
    for target in record.targets:
        if target.get("checked"):
            verdict = "met" if target.get("met") else "MISSED"
            out.append(f"target {target.get('at_least')}x vs {target.get('relative_to')} {verdict}")
    return ", ".join(out)


def relative_speeds(records: list[BenchRecord]) -> dict[str, float | None]:
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


def render_summary(
    records: dict[str, BenchRecord], *, width: int = 120, color: bool = False, quiet: bool = False
) -> str:
    ordered = [r for r in records.values() if r.stats is not None]
    if not ordered:
        return ""
    speeds = relative_speeds(ordered)
    if quiet:
        lines = []
        for record in ordered:
            extra = f"  {record.tflops:.4g} TFLOP/s" if record.tflops else ""
            extra += f"  {record.gbps:.4g} GB/s" if record.gbps else ""
            if _comm(record, "algbw_gbps") is not None:
                extra += f"  algbw {_comm(record, 'algbw_gbps'):.4g} GB/s  busbw {_comm(record, 'busbw_gbps'):.4g} GB/s"
            note = notes(record)
            extra += f"  ({note})" if note else ""
            lines.append(f"{record.id}  {format_ms(record.stats.median_ms)} ±{record.stats.ci_halfwidth:.1%}{extra}")
        return "\n".join(lines) + "\n"

    groups: dict[str, list[BenchRecord]] = defaultdict(list)
    for record in ordered:
        groups[record.group].append(record)
    show_tflops = any(r.tflops for r in ordered)
    show_gbps = any(r.gbps for r in ordered)
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
        show_comm = any(_comm(r, "algbw_gbps") is not None for r in members)  # collectives' groups only
        wide = width >= 110  # min and IQR give way on narrow terminals; the median and its CI never do
        columns = [("benchmark", "left"), ("median", "right"), ("±95%", "right")]
        columns += [("min", "right"), ("IQR", "right")] if wide else []
        columns += [("rounds", "right")]
        columns += [("TFLOP/s", "right")] if show_tflops else []
        columns += [("GB/s", "right")] if show_gbps else []
        columns += [("algbw GB/s", "right"), ("busbw GB/s", "right")] if show_comm else []
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
            s = record.stats
            cells = [row_label(record), format_ms(s.median_ms), f"{s.ci_halfwidth:.1%}"]
            cells += [format_ms(s.min_ms), format_ms(s.iqr_ms)] if wide else []
            cells += [str(s.rounds)]
            cells += [_rate(record.tflops)] if show_tflops else []
            cells += [_rate(record.gbps)] if show_gbps else []
            cells += [_rate(_comm(record, "algbw_gbps")), _rate(_comm(record, "busbw_gbps"))] if show_comm else []
            speed = speeds[record.id]
            cells += ["-" if speed is None else f"{speed:.2f}x", notes(record)]
            table.add_row(*cells)
        console.print(table)
    return out.getvalue()


def _kernel_lines(records: dict[str, BenchRecord]) -> list[str]:
    from pytest_tesserabench.inspect import format_kernel_lines

    lines = []
    for record_id, record in records.items():
        if record.kernels:
            lines.append(record_id)
            lines.extend(f"  {line}" for line in format_kernel_lines(record.kernels))
    return lines


def header_lines(state, interpret_switch) -> list[str]:
    """The report header: what this run does, on which device, against what."""
    from pytest_tesserabench import interpret

    settings = state.settings
    interpreting = interpret.interpreting()
    why = ""
    if interpret_switch is not None and interpret_switch.changed:
        why = f" (--bench-interpret={settings.interpret}" + (": no GPU driver found)" if interpreting else ")")
    triton = f"; Triton kernels in the interpreter{why}" if interpreting else ""
    if not settings.enabled:
        return [f"tesserabench: {settings.mode}{triton}"]
    info = state.context.machine_info
    device = f"{info.get('device')} ({info.get('arch')})"
    lines = [f"tesserabench: {settings.mode}; timer {settings.timer}; device {device}{triton}"]
    if state.comparison is not None:
        lines.append(f"tesserabench: baseline {state.comparison.describe()}")
    archs = settings.arch
    if archs is None:
        archs = ("the live GPU's arch",) if info.get("gpu_count") else ("sm_90",)
    lines.append(f"tesserabench: static kernel analysis for {', '.join(archs)}")
    return lines


def write_summary(terminalreporter, state, *, verbosity: int) -> None:
    """The whole tesserabench section of the terminal summary."""
    width = terminalreporter.config.get_terminal_writer().fullwidth
    terminalreporter.write_sep("=", "tesserabench")
    terminalreporter.write(
        render_summary(state.records, width=width, color=terminalreporter.hasmarkup, quiet=verbosity < 0)
    )
    kernel_lines = _kernel_lines(state.records)
    if kernel_lines and verbosity >= 0:
        terminalreporter.write_sep("-", "static kernel analysis")
        for line in kernel_lines:
            terminalreporter.write_line(line)
    comparison = state.comparison
    if comparison is None:
        return
    from pytest_tesserabench.gate import canary_ratio
    from pytest_tesserabench.report.comparison_table import render_comparison, software_differences

    terminalreporter.write_sep("-", f"compared with baseline {comparison.describe()}")
    terminalreporter.write(
        render_comparison(
            state.all_verdicts(),
            version_diffs=software_differences(state.context.machine_info, comparison.baseline.latest_machine),
            canary_ratio=canary_ratio([state.document()], comparison.runs) if comparison.same_machine else None,
            width=width,
            color=terminalreporter.hasmarkup,
        )
    )
    not_run = comparison.not_run(state.ran)
    if not_run:
        terminalreporter.write_line(
            f"{not_run} baseline benchmark(s) belong to tests that did not run in this session (deselected or removed)"
        )
