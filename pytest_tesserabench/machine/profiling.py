"""GPU profiling behind ``--bench-ncu`` and ``--bench-trace=DIR``.

Nsight Compute: ``run_ncu(nodeid, ...)`` re-runs one benchmark in a child pytest under ``ncu``
and returns the record's ``ncu`` field. Only kernels inside the NVTX range ``tesserabench`` are
profiled: in the child (``under_ncu()`` is true) the fixture calls the function once to compile
and autotune, then once more inside ``with ncu_region():``. Each profiled kernel is replayed
once per counter pass, so the child runs the benchmark once, never its timing rounds.

Trace: ``trace_call(fn, args, kwargs, path)`` records a few calls with torch.profiler and writes
a Chrome trace (open it in chrome://tracing or https://ui.perfetto.dev).
"""

from __future__ import annotations

import contextlib
import csv
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pytest_tesserabench.machine import device as machine

# torch (~1.2 s, the optional GPU stack) loads only in ncu's child and for a trace, where a test uses it anyway.

NVTX_RANGE = "tesserabench"
# The kernel each benchmark's profiled call begins with (torch.cuda._sleep's): ncu lists kernels
# in launch order, so these split one test's kernels between its benchmarks.
BENCHMARK_MARKER = "spin_kernel"
NCU_ENV_VAR = "TESSERABENCH_UNDER_NCU"

# Metric names as Nsight Compute spells them (``ncu --query-metrics``; Kernel Profiling Guide).
GPU_TIME = "gpu__time_duration.sum"
ACHIEVED_OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
DRAM_THROUGHPUT = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
DEFAULT_METRICS = (GPU_TIME, ACHIEVED_OCCUPANCY, DRAM_THROUGHPUT, SM_THROUGHPUT)
# Names used in the record's ``ncu`` field.
METRIC_FIELDS = {
    ACHIEVED_OCCUPANCY: "achieved_occupancy_pct",
    DRAM_THROUGHPUT: "dram_throughput_pct",
    SM_THROUGHPUT: "sm_throughput_pct",
}
_TIME_UNITS_TO_MS = {
    "nsecond": 1e-6,
    "ns": 1e-6,
    "usecond": 1e-3,
    "us": 1e-3,
    "msecond": 1.0,
    "ms": 1.0,
    "second": 1e3,
    "s": 1e3,
}
# ncu options the child must not inherit: it profiles one benchmark, writes no results.
_PARENT_ONLY_FLAGS = (
    "--bench-ncu",
    "--bench-save",
    "--bench-compare",
    "--bench-json",
    "--bench-trace",
    "--bench-ir-dump",
)


class NcuError(RuntimeError):
    """Nsight Compute ran but produced nothing usable; the message says why."""


# ---- Nsight Compute ------------------------------------------------------------------------


def ncu_available() -> str | None:
    """Path of the ``ncu`` executable: on PATH, else under $CUDA_HOME or /usr/local/cuda."""
    found = shutil.which("ncu")
    if found:
        return found
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root and os.access(Path(root, "bin", "ncu"), os.X_OK):
            return str(Path(root, "bin", "ncu"))
    return None


def ncu_skip_reason() -> str | None:
    """Why --bench-ncu cannot work here (a skip reason), or None when it can."""

    if not machine.gpu_plausibly_present():
        return "--bench-ncu needs an NVIDIA GPU and no GPU driver was found"
    if ncu_available() is None:
        return (
            "--bench-ncu needs Nsight Compute: `ncu` is not on PATH nor in $CUDA_HOME/bin; "
            "install the CUDA toolkit or nsight-compute and put ncu on PATH"
        )
    return None


def under_ncu() -> bool:
    """True in the child pytest that run_ncu() starts under Nsight Compute."""
    return os.environ.get(NCU_ENV_VAR) == "1"


@contextlib.contextmanager
def ncu_region():
    """The NVTX range ncu profiles; a no-op outside run_ncu()'s child."""
    if not under_ncu():
        yield
        return
    import torch

    torch.cuda.nvtx.range_push(NVTX_RANGE)
    try:
        yield
    finally:
        torch.cuda.synchronize()  # the range must close after its kernels were launched
        torch.cuda.nvtx.range_pop()


def mark_benchmark() -> None:
    """Inside ncu_region: launch the marker kernel that begins this benchmark's kernels."""
    import torch

    if hasattr(torch.cuda, "_sleep"):
        torch.cuda._sleep(1)


def per_benchmark(kernels: list[dict]) -> list[list[dict]] | None:
    """The kernels after each marker, one list per benchmark in call order (markers left out);
    None when no marker was launched (then they cannot be told apart)."""
    groups: list[list[dict]] | None = None
    for kernel in kernels:
        if BENCHMARK_MARKER in kernel["name"]:
            groups = [*(groups or []), []]
        elif groups is not None:
            groups[-1].append(kernel)
    return groups


def ncu_for_records(counters: dict, n_records: int) -> list[dict | None]:
    """run_ncu()'s result as the ``ncu`` field of each of a test's n records, in call order. When
    its kernels cannot be split between them, the first record (the kernel under test) gets all
    of them, saying so, and the others nothing."""
    parts = counters.get("per_benchmark")
    if not counters.get("available") or parts is None or len(parts) != n_records:
        whole = {key: value for key, value in counters.items() if key != "per_benchmark"}
        if counters.get("available") and n_records > 1:
            whole["note"] = f"the kernels of all {n_records} benchmarks of this test: they could not be told apart"
        return [whole] + [None] * (n_records - 1)
    return [{**part, "clock_control": counters["clock_control"]} for part in parts]


def _child_args(pytest_args: Iterable[str]) -> list[str]:
    args = []
    for arg in pytest_args:
        if arg.split("=", 1)[0] in _PARENT_ONLY_FLAGS:
            continue  # only the --opt=value spelling is dropped safely; pass values that way
        args.append(arg)
    return args


def ncu_argv(
    program: Sequence[str],
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    ncu: str | None = None,
    log_file: str | os.PathLike | None = None,
    clock_control: str = "base",
) -> list[str]:
    """argv that runs ``program`` under Nsight Compute, profiling only the kernels inside the
    NVTX range ``tesserabench`` (ncu_region) of it and of every process it starts.

    ``clock_control="base"`` (ncu's default) locks the GPU to its base clock for repeatable
    counters, so gpu__time_duration reads slower than a timed run at boost clocks; "none"
    leaves clocks alone, for comparing times with the other timers. Caches are flushed between
    profiled kernels either way (ncu's default cache control). With ``log_file`` the CSV goes
    there instead of mixing with the program's output on stdout.
    """
    if clock_control not in ("base", "none"):
        raise ValueError(f"clock_control must be 'base' or 'none', got {clock_control!r}")
    ncu = ncu or ncu_available()
    if ncu is None:
        raise NcuError(ncu_skip_reason() or "ncu not found")
    if not metrics:
        raise ValueError("ncu_argv() needs at least one metric name")
    command = [
        ncu,
        "--csv",
        "--print-units",
        "base",
        "--metrics",
        ",".join(metrics),
        "--target-processes",
        "all",
        "--clock-control",
        clock_control,
        "--nvtx",
        "--nvtx-include",
        f"{NVTX_RANGE}/",
    ]
    if log_file is not None:
        command += ["--log-file", str(log_file)]
    return command + list(program)


def ncu_command(
    nodeid: str,
    pytest_args: Sequence[str] = (),
    metrics: Sequence[str] = DEFAULT_METRICS,
    *,
    ncu: str | None = None,
    log_file: str | os.PathLike | None = None,
    clock_control: str = "base",
    python: str = sys.executable,
) -> list[str]:
    """argv that re-runs one benchmark (``nodeid``) under Nsight Compute (ncu_argv says how).

    ``pytest_args`` are options for the child pytest (rootdir, -c, -p ...), not paths:
    the node id selects the test. Options that would make the child save baselines or
    profile again (--bench-ncu, --bench-save=...) are dropped. Run it with
    ``env={**os.environ, NCU_ENV_VAR: "1"}`` (run_ncu() does).
    """
    child = [python, "-m", "pytest", nodeid, "-q", "-p", "no:cacheprovider", *_child_args(pytest_args)]
    return ncu_argv(child, metrics, ncu=ncu, log_file=log_file, clock_control=clock_control)


def _number(text: str) -> float | str:
    try:
        return float(text.replace(",", ""))  # ncu groups thousands: "1,054,720"
    except ValueError:
        return text  # a few metrics are text (e.g. "n/a")


def parse_ncu_csv(text: str) -> list[dict]:
    """Kernels from ``ncu --csv`` output, in launch order.

    Each: ``{"id": int, "name": str, "metrics": {metric: {"value": float|str, "unit": str}}}``.
    The CSV may sit among other output (==PROF== lines, the program's own prints): it starts at
    the header line that begins with "ID".
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        raise NcuError(
            'no ncu CSV in the output (no header line starting with "ID"): '
            "ncu profiled no kernel, or was run without --csv"
        )
    body = (line for line in lines[start:] if line.startswith('"'))  # skip ==PROF== and prints
    reader = csv.reader(body)
    header = next(reader)
    required = ("ID", "Kernel Name", "Metric Name", "Metric Unit", "Metric Value")
    missing = [column for column in required if column not in header]
    if missing:
        raise NcuError(f"ncu CSV lacks columns {missing}; header was {header}")
    column = {name: header.index(name) for name in required}
    kernels: dict[int, dict] = {}
    for row in reader:
        if len(row) != len(header) or row == header:
            continue
        kernel_id = int(row[column["ID"]])
        kernel = kernels.setdefault(kernel_id, {"id": kernel_id, "name": row[column["Kernel Name"]], "metrics": {}})
        kernel["metrics"][row[column["Metric Name"]]] = {
            "value": _number(row[column["Metric Value"]]),
            "unit": row[column["Metric Unit"]],
        }
    return [kernels[key] for key in sorted(kernels)]


def _gpu_time_ms(kernel: dict) -> float | None:
    metric = kernel["metrics"].get(GPU_TIME)
    if metric is None or not isinstance(metric["value"], float):
        return None
    if metric["unit"] not in _TIME_UNITS_TO_MS:
        raise NcuError(f"unknown time unit {metric['unit']!r} for {GPU_TIME} in kernel {kernel['name']!r}")
    return metric["value"] * _TIME_UNITS_TO_MS[metric["unit"]]


def _weighted(pairs: list[tuple[float, float]]) -> float | None:
    """Mean of values weighted by GPU time (plain mean when no time is known)."""
    if not pairs:
        return None
    total = sum(weight for _, weight in pairs)
    if total <= 0:
        return sum(value for value, _ in pairs) / len(pairs)
    return sum(value * weight for value, weight in pairs) / total


def summarize_ncu(kernels: list[dict]) -> dict:
    """The record's ``ncu`` field: totals, GPU-time-weighted percentages, one entry per kernel
    name (launches of the same kernel are merged)."""
    by_name: dict[str, list[dict]] = {}
    for kernel in kernels:
        by_name.setdefault(kernel["name"], []).append(kernel)

    def summary(group: list[dict]) -> dict:
        times = [_gpu_time_ms(kernel) for kernel in group]
        known = [time for time in times if time is not None]
        entry = {"launches": len(group), "gpu_time_ms": sum(known) if known else None}
        for metric, field in METRIC_FIELDS.items():
            pairs = [
                (kernel["metrics"][metric]["value"], time or 0.0)
                for kernel, time in zip(group, times)
                if isinstance(kernel["metrics"].get(metric, {}).get("value"), float)
            ]
            entry[field] = _weighted(pairs)
        return entry

    per_kernel = [{"name": name, **summary(group)} for name, group in by_name.items()]
    per_kernel.sort(key=lambda entry: -(entry["gpu_time_ms"] or 0.0))
    return {"available": True, **summary(kernels), "kernels": per_kernel}


def _permission_problem(output: str) -> str | None:
    if "ERR_NVGPUCTRPERM" in output:
        return (
            "ncu may not read GPU performance counters (ERR_NVGPUCTRPERM): run as root or "
            "load the driver with NVreg_RestrictProfilingToAdminUsers=0"
        )
    return None


def run_ncu(
    nodeid: str,
    pytest_args: Sequence[str] = (),
    *,
    metrics: Sequence[str] = DEFAULT_METRICS,
    cwd: str | os.PathLike | None = None,
    timeout_s: float = 600,
    clock_control: str = "base",
) -> dict:
    """Profile one benchmark under ncu; the record's ``ncu`` field, or
    ``{"available": False, "reason": ...}`` when it cannot be had."""
    reason = ncu_skip_reason()
    if reason:
        return {"available": False, "reason": reason}
    with tempfile.TemporaryDirectory(prefix="tesserabench-ncu-") as folder:
        log = Path(folder, "ncu.csv")
        command = ncu_command(nodeid, pytest_args, metrics, log_file=log, clock_control=clock_control)
        try:
            done = subprocess.run(
                command,
                cwd=cwd,
                capture_output=True,
                text=True,
                timeout=timeout_s,
                env={**os.environ, NCU_ENV_VAR: "1"},
            )
        except subprocess.TimeoutExpired:
            return {"available": False, "reason": f"ncu run of {nodeid} exceeded {timeout_s} s"}
        text = log.read_text() if log.exists() else done.stdout
        output = text + done.stdout + done.stderr
        problem = _permission_problem(output)
        if problem:
            return {"available": False, "reason": problem}
        try:
            kernels = parse_ncu_csv(text)
            groups = per_benchmark(kernels)
            counted = [k for k in kernels if BENCHMARK_MARKER not in k["name"]]
            result = {**summarize_ncu(counted), "clock_control": clock_control}
            if groups is not None:
                result["per_benchmark"] = [summarize_ncu(group) for group in groups]
            return result
        except NcuError as error:
            tail = (done.stdout + done.stderr)[-400:]
            return {"available": False, "reason": f"{error} (ncu exit {done.returncode}; output ends: {tail!r})"}


# ---- torch.profiler trace ------------------------------------------------------------------


def trace_path(trace_dir: str | os.PathLike, record_id: str) -> Path:
    """A file name for one benchmark's trace: the record id made file-safe."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", record_id).strip("._") or "benchmark"
    if len(safe) > 150:  # keep names legal; the hash keeps long ids apart
        safe = f"{safe[:140]}-{hashlib.sha1(record_id.encode()).hexdigest()[:8]}"
    return Path(trace_dir) / f"{safe}.trace.json"


def trace_call(
    fn: Callable,
    args: Sequence = (),
    kwargs: dict | None = None,
    path: str | os.PathLike = "trace.json",
    calls: int = 3,
) -> Path:
    """Run ``fn`` ``calls`` times under torch.profiler (CPU, plus CUDA when available) and
    write a Chrome trace to ``path``. One untraced call first keeps compilation and autotuning
    out of the trace."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    if calls < 1:
        raise ValueError(f"trace_call(calls=...) must be at least 1, got {calls!r}")
    kwargs = kwargs or {}
    cuda = torch.cuda.is_available()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    fn(*args, **kwargs)
    if cuda:
        torch.cuda.synchronize()
    with profile(activities=activities, record_shapes=True) as profiler:
        for index in range(calls):
            with record_function(f"{NVTX_RANGE}/call{index}"):
                fn(*args, **kwargs)
        if cuda:
            torch.cuda.synchronize()  # GPU work must finish inside the profiled window
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    profiler.export_chrome_trace(str(path))
    return path
