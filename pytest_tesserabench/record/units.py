"""Human units for durations and rates, shared by every report."""

from __future__ import annotations

import math


def _three_digits(value: float) -> str:
    return f"{value:#.3g}".rstrip(".") if abs(value) < 100 else f"{value:.0f}"


def format_ms(ms: float | None) -> str:
    """A duration in milliseconds in a human unit: '812 ns', '45.6 µs', '1.23 ms', '2.10 s'."""
    if ms is None or not math.isfinite(ms):
        return "-"
    for scale, unit in ((1e3, "s"), (1.0, "ms"), (1e-3, "µs"), (1e-6, "ns")):
        if abs(ms) >= scale * 0.9995 or unit == "ns":  # 0.9996 ms reads "1.00 ms", not "1000 µs"
            return f"{_three_digits(ms / scale)} {unit}"
    raise AssertionError("unreachable")


def format_factor(ratio: float) -> str:
    """A ratio as a factor: '1.23x', '0.05x', '473x', '12,400x', '1/25,000x' (never '5e+02x')."""
    if ratio >= 100:
        return f"{ratio:,.0f}x"
    if 0 < ratio < 0.001:
        return f"1/{1 / ratio:,.0f}x"
    return f"{ratio:.3g}x" if ratio >= 1 else f"{ratio:.2g}x"


def parse_started(started: str | None):
    """A run's start (ISO 8601, as the file keeps it) as an aware datetime, UTC where it names no
    zone; None where it is missing or unreadable. (Python 3.10 reads no trailing Z.)"""
    import datetime  # ~3 ms that every `tesserabench` command would pay; few read a start

    try:
        moment = datetime.datetime.fromisoformat((started or "").replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.timezone.utc)


def format_started(started: str | None) -> str:
    """A run's start as date and minute in its own time zone (the file keeps ISO 8601 to the second)."""
    if not started:
        return "-"
    moment = parse_started(started)
    return moment.strftime("%Y-%m-%d %H:%M") if moment is not None else started


_PREFIXES = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""))


def _format_rate(per_second: float | None, unit: str) -> str:
    if per_second is None or not math.isfinite(per_second) or per_second <= 0:
        return "-"
    for scale, prefix in _PREFIXES:
        if per_second >= scale * 0.9995 or scale == 1.0:
            return f"{_three_digits(per_second / scale)} {prefix}{unit}"
    raise AssertionError("unreachable")


def format_tflops(tflops: float | None) -> str:
    """A compute rate given in TFLOP/s, scaled: '14.5 MFLOP/s', '812 GFLOP/s', '1.45 TFLOP/s'."""
    return _format_rate(None if tflops is None else tflops * 1e12, "FLOP/s")


def format_gbps(gbps: float | None) -> str:
    """A bandwidth given in GB/s (10^9 bytes), scaled: '845 MB/s', '12.3 GB/s', '3.35 TB/s'."""
    return _format_rate(None if gbps is None else gbps * 1e9, "B/s")
