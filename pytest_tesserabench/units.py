"""Human units for durations, shared by every report."""

from __future__ import annotations

import math


def format_ms(ms: float | None) -> str:
    """A duration in milliseconds in a human unit: '812 ns', '45.6 us', '1.23 ms', '2.10 s'."""
    if ms is None or not math.isfinite(ms):
        return "-"
    for scale, unit in ((1e3, "s"), (1.0, "ms"), (1e-3, "us"), (1e-6, "ns")):
        if abs(ms) >= scale * 0.9995 or unit == "ns":  # 0.9996 ms reads "1.00 ms", not "1000 us"
            value = ms / scale
            digits = f"{value:#.3g}".rstrip(".") if abs(value) < 100 else f"{value:.0f}"
            return f"{digits} {unit}"
    raise AssertionError("unreachable")
