"""A test's benchmark figures as JUnit XML ``<property>`` entries (pytest's ``user_properties``).

CI systems that read JUnit XML (GitLab, Jenkins, Azure, GitHub actions that annotate tests) show
them beside the test case. Names: ``tesserabench.<figure>`` for the test's first call and
``tesserabench[<name>].<figure>`` for a labelled one; times in milliseconds, rates in TFLOP/s and
GB/s, the change as a ratio (1.05 = 5% slower) with its 95% interval.
"""

from __future__ import annotations

from collections.abc import Iterable

from pytest_tesserabench.record.results import BenchRecord


def _number(value: float) -> str:
    return f"{value:.6g}"


def properties(records: Iterable[BenchRecord]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for record in records:
        if record.stats is None:
            continue
        prefix = "tesserabench" if record.name is None else f"tesserabench[{record.name}]"
        stats = record.stats
        figures = [
            ("median_ms", _number(stats.median_ms)),
            ("ci95_low_ms", _number(stats.ci95_ms[0])),
            ("ci95_high_ms", _number(stats.ci95_ms[1])),
            ("rounds", str(stats.rounds)),
            ("timer", record.timer),
        ]
        if record.tflops:
            figures.append(("tflops", _number(record.tflops)))
        if record.gbps:
            figures.append(("gbps", _number(record.gbps)))
        verdict = record.verdict
        if verdict is not None:
            figures.append(("verdict", verdict.status))
            if verdict.ratio is not None:
                figures.append(("ratio", _number(verdict.ratio)))
            if verdict.ci is not None:
                figures += [("ratio_ci95_low", _number(verdict.ci[0])), ("ratio_ci95_high", _number(verdict.ci[1]))]
            if verdict.p_value is not None:
                figures.append(("p_value", _number(verdict.p_value)))
        out += [(f"{prefix}.{key}", value) for key, value in figures]
    return out
