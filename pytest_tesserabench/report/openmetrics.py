"""A run as metrics a dashboard scrapes (``--bench-openmetrics=PATH``): per benchmark its median
and 95% interval, throughput, bandwidth, roofline efficiency and verdict, labelled by benchmark id,
group, machine key and commit.

Written with prometheus-client (the ``metrics`` extra), its own exposition code, so the text is
what Prometheus' parsers read: the OpenMetrics text format, or, for a path ending in ``.prom``,
the Prometheus text format that node-exporter's textfile collector and a Pushgateway read.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from pytest_tesserabench.machine import device
from pytest_tesserabench.record.results import STATUSES
from pytest_tesserabench.report.data import ReportData

EXTRA_HINT = "install the 'metrics' extra: pip install 'pytest-tesserabench[metrics]'"
PREFIX = "tesserabench"


def missing_dependency() -> str | None:
    """Why the metrics cannot be written here, or None. Cheap: finds the client without importing it."""
    try:
        found = importlib.util.find_spec("prometheus_client") is not None
    except (ImportError, ValueError):
        found = False
    return None if found else f"the metrics are written with prometheus-client, which is not installed; {EXTRA_HINT}"


def metrics_text(data: ReportData, path: Path | str) -> str:
    """The run's metrics in the format ``path``'s name asks for (see the module doc)."""
    # prometheus-client: the optional `metrics` extra (~60 ms); every --bench run imports this module
    from prometheus_client import CollectorRegistry
    from prometheus_client.core import GaugeMetricFamily, StateSetMetricFamily

    try:
        machine = device.machine_key(data.run.machine)  # the key its baselines are filed under
    except ValueError:
        machine = ""
    commit = str((data.run.commit or {}).get("sha") or "")
    names = ["benchmark", "group", "machine", "commit"]

    def family(name: str, doc: str, unit: str = ""):
        return GaugeMetricFamily(f"{PREFIX}_{name}", doc, labels=names, unit=unit)

    median = family("median", "median time of a call", "seconds")
    low = family("ci95_low", "lower end of the median's 95% interval", "seconds")
    high = family("ci95_high", "upper end of the median's 95% interval", "seconds")
    flops = family("throughput", "floating-point operations per second at the median", "flops")
    bandwidth = family("bandwidth", "bytes moved per second at the median", "bytes_per_second")
    efficiency = family("roofline_efficiency", "share of what the roofline allows (1 = at the roof)")
    change = family("change_ratio", "the gate's estimate of now / baseline (1 = unchanged)")
    verdicts = StateSetMetricFamily(f"{PREFIX}_verdict", "the gate's verdict", labels=names)
    for record in data.records:
        labels = [record.id, record.group, machine, commit]
        median.add_metric(labels, record.stats.median_ms / 1e3)
        low.add_metric(labels, record.stats.ci95_ms[0] / 1e3)
        high.add_metric(labels, record.stats.ci95_ms[1] / 1e3)
        if record.tflops:
            flops.add_metric(labels, record.tflops * 1e12)
        if record.gbps:
            bandwidth.add_metric(labels, record.gbps * 1e9)
        if record.roofline and record.roofline.get("efficiency") is not None:
            efficiency.add_metric(labels, float(record.roofline["efficiency"]))
        verdict = data.verdicts.get(record.id)
        if verdict is not None:
            verdicts.add_metric(labels, {status: status == verdict.status for status in STATUSES})
            if verdict.ratio is not None:
                change.add_metric(labels, verdict.ratio)
    families = [median, low, high, flops, bandwidth, efficiency, change, verdicts]

    class _Run:
        def collect(self):
            return [f for f in families if f.samples]

    registry = CollectorRegistry(auto_describe=False)
    registry.register(_Run())
    if str(path).endswith(".prom"):
        from prometheus_client.exposition import generate_latest
    else:
        from prometheus_client.openmetrics.exposition import generate_latest
    return generate_latest(registry).decode()
