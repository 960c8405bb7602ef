"""Settings: every option resolved once (command line > ini > default), validated, frozen.

Each option is also an ini key (``--bench-max-time`` <-> ``bench_max_time``). A bad value is a
usage error that names the option, where it came from and what would be accepted.
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pytest_tesserabench.record import files

# A baseline name becomes a folder and a command-line word: it starts with a letter or digit (not
# hidden, not an option), and it holds no '..' and does not end in '.' or '.json' (a path, or a
# file to `tesserabench compare`). Used with fullmatch: '$' alone would accept a trailing newline.
NAME_RE = re.compile(r"(?!.*\.\.)(?!.*\.(?i:json)\Z)[A-Za-z0-9][A-Za-z0-9._-]*(?<!\.)")
NAME_RULE = (
    "start with a letter or digit and hold only letters, digits, '.', '_' and '-', with no '..' and "
    "no '.' or '.json' at the end (a plain name such as 'main' or 'release-1.2')"
)
TIMERS = ("auto", "cpu", "cuda_event", "cuda_graph")


class SettingsError(ValueError):
    """A bad option value; the message names the option, its source and the fix."""


def _float(text: Any, expected: str) -> float:
    try:
        return float(str(text).strip())
    except ValueError:
        raise ValueError(f"must be {expected}") from None


def _bounded_float(text: Any, low: float, high: float, *, allow_low: bool, unit: str = "") -> float:
    expected = f"a number {'from' if allow_low else 'above'} {low:g} up to {high:g}{unit}"
    value = _float(text, expected)
    if not math.isfinite(value) or value > high or value < low or (value == low and not allow_low):
        raise ValueError(f"must be {expected}")
    return value


# Upper bounds say "that is a typo", not "that is slow": an hour per benchmark or a minute of
# warm-up is far beyond any kernel's need, and 1e9 would spin for decades.
MAX_TIME_S, MAX_WARMUP_S, MAX_ROUNDS = 3600.0, 60.0, 100_000


def parse_seconds(text: Any) -> float:
    """A measurement budget in seconds: (0, 3600]."""
    return _bounded_float(text, 0.0, MAX_TIME_S, allow_low=False, unit=" seconds")


def parse_timeout(text: Any) -> float:
    """The time limit of one bench() call in seconds: [0, 86400], 0 for none."""
    return _bounded_float(text, 0.0, 86400.0, allow_low=True, unit=" seconds (0: no limit)")


def parse_warmup(text: Any) -> float:
    """A warm-up time in seconds: [0, 60]."""
    return _bounded_float(text, 0.0, MAX_WARMUP_S, allow_low=True, unit=" seconds")


MAX_LOCK_TIMEOUT_S = 86400.0


def parse_lock_timeout(text: Any) -> float:
    """How long to wait for a lock another process holds, in seconds: (0, 86400]."""
    return _bounded_float(text, 0.0, MAX_LOCK_TIMEOUT_S, allow_low=False, unit=" seconds")


def parse_count(text: Any) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError("must be a whole number") from None
    if not 1 <= value <= MAX_ROUNDS:
        raise ValueError(f"must be a whole number from 1 to {MAX_ROUNDS}")
    return value


def parse_threads(text: Any) -> int:
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError("must be a whole number of threads, e.g. 1") from None
    if not 1 <= value <= 4096:
        raise ValueError("must be a whole number of threads from 1 to 4096")
    return value


def parse_percent(text: Any, *, allow_zero: bool = True, high: float = 1000.0) -> float:
    """'5', '5%', '2.5' -> a fraction (0.05, 0.025). The one parser of percentages: the plugin's
    options, markers and the ``tesserabench`` command all read a threshold the same way."""
    raw = str(text).strip().removesuffix("%")
    lowest = "0" if allow_zero else "above 0"
    expected = f"a percentage from {lowest} up to {high:g}, like 5 or 5%"
    value = _float(raw, expected)
    if not math.isfinite(value) or value < 0 or value > high or (value == 0 and not allow_zero):
        raise ValueError(f"must be {expected}")
    return value / 100.0


def parse_target_ci(text: Any) -> float:
    return parse_percent(text, allow_zero=False, high=100.0)


def parse_fraction(text: Any) -> float:
    value = _float(text, "a number strictly between 0 and 1, like 0.01")
    if not 0 < value < 1:
        raise ValueError("must be a number strictly between 0 and 1, like 0.01")
    return value


MAX_NAME_LENGTH = 100


def is_name(text: str) -> bool:
    return NAME_RE.fullmatch(text) is not None


def parse_name(text: Any) -> str:
    """A baseline name: it becomes a folder name, so plain characters and no paths. The one
    parser of names (options, the ``tesserabench`` command, baseline files)."""
    text = str(text)
    if set(text) == {"."}:
        raise ValueError("is a path, not a name: use a plain name such as 'main'")
    if not is_name(text):
        raise ValueError(f"must {NAME_RULE}")
    if len(text) > MAX_NAME_LENGTH:
        raise ValueError(f"is {len(text)} characters long; at most {MAX_NAME_LENGTH}")
    return text


def _timer(text: str) -> str:
    if text not in TIMERS:
        raise ValueError(f"must be one of {', '.join(TIMERS)}")
    return text


INTERPRET_MODES = ("auto", "always", "never")


def _interpret(text: str) -> str:
    if text not in INTERPRET_MODES:
        raise ValueError("must be auto (Triton's interpreter when no GPU driver is present), always or never")
    return text


UNRESOLVED = ("warn", "fail")


def _unresolved(text: str) -> str:
    if text not in UNRESOLVED:
        raise ValueError("must be warn (an INCONCLUSIVE benchmark passes with a warning) or fail (it fails its test)")
    return text


DIST_BACKENDS = ("auto", "gloo", "nccl")


def _dist_backend(text: str) -> str:
    if text not in DIST_BACKENDS:
        raise ValueError("must be auto (nccl with GPUs, gloo without), gloo or nccl")
    return text


GPU_PER_WORKER = ("auto", "off")


def _gpu_per_worker(text: str) -> str:
    if text not in GPU_PER_WORKER:
        raise ValueError("must be auto (each pytest-xdist worker its own GPU when several are visible) or off")
    return text


def _peaks(text: Any) -> str | Path:
    """table, measure, or the path of a JSON file of declared peaks."""
    text = str(text)
    if text in ("table", "measure"):
        return text
    path = Path(text)
    if path.suffix == ".json" or path.exists():
        return path
    raise ValueError(
        "must be table (datasheet peaks), measure (measured once per machine, cached) or the path "
        "of a JSON file of declared peaks (see docs/usage.md)"
    )


def _path(text: Any) -> Path:
    if not str(text).strip():
        raise ValueError("is empty; give a path")
    return Path(text)


def _git_ref(text: Any) -> str:
    text = str(text).strip()
    if not text or text.startswith("-") or any(c.isspace() for c in text):
        raise ValueError("must name a git ref: a branch, tag or sha, e.g. origin/main")
    return text


MAX_AB_PROCESSES = 64


def parse_ab_processes(text: Any) -> int:
    """Served processes per side of --bench-ab: 1, or 4 to 64 (with 2 or 3 the spread between
    processes cannot be told from a change)."""
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError("must be a whole number") from None
    if value != 1 and not 4 <= value <= MAX_AB_PROCESSES:
        raise ValueError(
            f"must be 1 (pairs are the unit: cheap, blind to the bias of a process) or 4 to {MAX_AB_PROCESSES} "
            "(2 or 3 processes cannot tell the processes' spread from a change)"
        )
    return value


MAX_CONFIRM = 8


def parse_confirm(text: Any) -> int:
    """Fresh processes (--bench-confirm, --bench-save-processes): 0 to 8."""
    try:
        value = int(str(text).strip())
    except ValueError:
        raise ValueError(f"must be a whole number from 0 (never) to {MAX_CONFIRM}") from None
    if not 0 <= value <= MAX_CONFIRM:
        raise ValueError(f"must be a whole number from 0 (never) to {MAX_CONFIRM}")
    return value


def parse_passes(text: Any) -> int | None:
    """Passes over the suite: auto (None) or 1 to 20."""
    # measure.passes and the sampling plan (5 modules, ~6 ms): every `tesserabench` command reads this module
    from pytest_tesserabench.measure.passes import MAX_PASSES

    raw = str(text).strip()
    if raw == "auto":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"must be auto or a whole number from 1 to {MAX_PASSES}") from None
    if not 1 <= value <= MAX_PASSES:
        raise ValueError(f"must be auto or a whole number from 1 to {MAX_PASSES}")
    return value


def parse_settle_time(text: Any) -> float:
    """Extra measuring for an undecided verdict, in seconds: [0, 3600]."""
    return _bounded_float(text, 0.0, MAX_TIME_S, allow_low=True, unit=" seconds")


# The report's columns (report/rows.py draws them), sort keys and grouping keys.
COLUMN_KEYS = (
    "median", "ci", "mean", "stdev", "min", "max", "iqr", "rounds", "timer", "throughput", "bandwidth", "roof",
    "speed", "algbw", "busbw",
)  # fmt: skip
SORT_KEYS = ("id", *(k for k in COLUMN_KEYS if k != "timer"))
GROUP_KEYS = ("group", "test", "call")


def _key_list(text: Any, known: tuple[str, ...], what: str, *, params: bool = False) -> tuple[str, ...]:
    keys = tuple(k.strip() for k in str(text).split(",") if k.strip())
    if not keys:
        raise ValueError(f"must name at least one {what}: {', '.join(known)}")
    for key in keys:
        if key not in known and not (params and key.startswith("param:") and len(key) > len("param:")):
            accepted = ", ".join(known) + (", param:NAME" if params else "")
            raise ValueError(f"has the unknown {what} {key!r}; accepted: {accepted}")
    if len(set(keys)) != len(keys):
        raise ValueError(f"names a {what} twice")
    return keys


def parse_columns(text: Any) -> tuple[str, ...]:
    return _key_list(text, COLUMN_KEYS, "column")


def parse_sort(text: Any) -> str:
    text = str(text).strip()
    if text not in SORT_KEYS:
        raise ValueError(f"must be one of {', '.join(SORT_KEYS)}")
    return text


def parse_group_by(text: Any) -> tuple[str, ...]:
    return _key_list(text, GROUP_KEYS, "grouping", params=True)


def _bool(text: Any) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in ("1", "true", "yes", "on"):
        return True
    if lowered in ("0", "false", "no", "off", ""):
        return False
    raise ValueError("must be true or false")


def _arch_list(text: str) -> tuple[str, ...]:
    # the analyser's own list of targets (inspect.archs, ~2 ms): only for --bench-arch
    from pytest_tesserabench.inspect import parse_archs

    archs = tuple(a.strip().lower() for a in str(text).split(",") if a.strip())
    if not archs:
        raise ValueError("must name at least one target, like sm_90 or sm_90,sm_80")
    return tuple(parse_archs(",".join(archs)))


@dataclass(frozen=True)
class Option:
    """One setting: its command-line flag, ini key, parser and default."""

    dest: str
    flag: str
    help: str
    parse: Callable[[str], Any] | None = None  # None: a boolean flag
    default: Any = None
    metavar: str | None = None

    @property
    def ini(self) -> str:
        return self.dest


def _option(dest: str, help: str, parse=None, metavar: str | None = None) -> Option:
    return Option(dest, "--" + dest.replace("_", "-"), help, parse, metavar=metavar)


OPTIONS: tuple[Option, ...] = (
    _option("bench", "measure benchmarks (without it, bench(fn) calls fn once)"),
    _option("bench_save", "measure and append this run to baseline NAME for this machine", parse_name, "NAME"),
    _option(
        "bench_compare",
        "measure and compare with baseline NAME; a significant slowdown fails its test",
        parse_name,
        "NAME",
    ),
    _option("bench_json", "measure and write the full results of this run, raw samples included", _path, "PATH"),
    _option("bench_dir", "baselines root (default: <rootdir>/baselines)", _path, "DIR"),
    _option("bench_threshold", "smallest slowdown worth failing for, in percent (default 5)", parse_percent, "PCT"),
    _option(
        "bench_work_threshold",
        "fail a kernel whose SASS instruction count (same config and Triton) grew by PCT or more against the "
        "baseline or the A/B reference (default: off, a note; a static count is no measure of speed)",
        parse_percent,
        "PCT",
    ),
    _option(
        "bench_max_time", "measurement budget per benchmark in seconds, after warm-up (default 1.0)", parse_seconds, "S"
    ),
    _option("bench_min_rounds", "fewest rounds per benchmark (default 5)", parse_count, "N"),
    _option("bench_warmup", "warm-up time per benchmark in seconds (default 0.1)", parse_warmup, "S"),
    _option(
        "bench_timeout",
        "fail a bench() call that has not returned after S seconds, first call and measurement together "
        "(default 600; 0: no limit): a hang would hold the machine-wide measurement lock",
        parse_timeout,
        "S",
    ),
    _option(
        "bench_threads",
        "size the torch, OpenMP and BLAS thread pools to N for the benchmarks (default: as the libraries "
        "choose; on a small shared machine 1 keeps a benchmark's threads from waiting for each other)",
        parse_threads,
        "N",
    ),
    _option(
        "bench_target_ci",
        "stop once the 95%% interval of the median is within +-PCT (default 1)",
        parse_target_ci,
        "PCT",
    ),
    _option("bench_timer", "auto (from where the arguments live), cpu, cuda_event or cuda_graph", _timer, "KIND"),
    _option(
        "bench_interpret",
        "run Triton kernels in Triton's CPU interpreter: auto (when no GPU driver is "
        "present, the default), always or never",
        _interpret,
        "MODE",
    ),
    _option(
        "bench_arch",
        "targets for static kernel analysis, e.g. sm_90,sm_80 (default: the live GPU, else sm_90)",
        _arch_list,
        "LIST",
    ),
    _option("bench_ir_dump", "write every IR level of each analysed kernel here", _path, "DIR"),
    _option(
        "bench_peaks",
        "roofline peaks: table (datasheet figures, the default), measure (a large matmul and "
        "a device copy, once per machine, cached) or a JSON file of declared peaks",
        _peaks,
        "SOURCE",
    ),
    _option(
        "bench_ab",
        "measure the working tree against git REF in this job, interleaved (A/B), and gate on "
        "the paired difference; no baseline file needed",
        _git_ref,
        "REF",
    ),
    _option(
        "bench_ab_processes",
        "with --bench-ab: served processes per side (default 8); their timings differ by a steady bias "
        "of each process, which only more processes average out",
        parse_ab_processes,
        "N",
    ),
    _option(
        "bench_settle_time",
        "with --bench-ab: seconds of extra A/B pairs an undecided benchmark may take to settle its verdict (default 2)",
        parse_settle_time,
        "S",
    ),
    _option(
        "bench_confirm",
        "with --bench-compare: before a benchmark fails, or when it is undecided past its threshold, "
        "measure it again in N fresh processes and judge them together, so that one process's own bias "
        "cannot fail it (default 2; 0: never)",
        parse_confirm,
        "N",
    ),
    _option(
        "bench_unresolved",
        "with --bench-compare: what an INCONCLUSIVE benchmark (the run could not judge it at its threshold) "
        "does: warn (default) or fail its test",
        _unresolved,
        "warn|fail",
    ),
    _option(
        "bench_save_processes",
        "with --bench-save: measure every benchmark in N fresh processes too, which the baseline keeps, "
        "so that it knows how processes differ and no one process's bias becomes the baseline (default 2; "
        "0: the session's process only)",
        parse_confirm,
        "N",
    ),
    _option(
        "bench_passes",
        "measure every benchmark in N interleaved passes over the suite, so all of them see the same "
        "states of the machine (default auto: 4 when saving or comparing a baseline, else 1)",
        parse_passes,
        "N",
    ),
    _option("bench_html", "measure and write an HTML report with plots (needs the 'report' extra)", _path, "PATH"),
    _option("bench_md", "measure and write a markdown summary (verdicts, regressions, a table)", _path, "PATH"),
    _option("bench_csv", "measure and write one CSV row per benchmark (units in the header)", _path, "PATH"),
    _option(
        "bench_openmetrics",
        "measure and write the run as metrics for a dashboard: the OpenMetrics text format, or the Prometheus "
        "one for a PATH ending in .prom (node-exporter's textfile collector, a Pushgateway); needs the "
        "'metrics' extra",
        _path,
        "PATH",
    ),
    _option(
        "bench_columns",
        f"columns of the terminal table and the markdown summary, from {', '.join(COLUMN_KEYS)}",
        parse_columns,
        "LIST",
    ),
    _option(
        "bench_sort",
        f"order of a table's rows: {', '.join(SORT_KEYS)} (id: the tests' order; rates: highest first)",
        parse_sort,
        "KEY",
    ),
    _option(
        "bench_group_by",
        "one table per: group (the test function or @pytest.mark.bench(group=), the default), test, call, "
        "param:NAME; several joined by commas",
        parse_group_by,
        "LIST",
    ),
    _option("bench_only", "run only the tests that use the bench fixture (and measure them)"),
    _option("bench_skip", "skip the tests that use the bench fixture"),
    _option("bench_ncu", "GPU only: hardware counters via Nsight Compute"),
    _option(
        "bench_dist_backend",
        "under torchrun: the torch.distributed backend, auto (nccl with GPUs, gloo without), gloo or nccl",
        _dist_backend,
        "NAME",
    ),
    _option(
        "bench_dist_timeout",
        "under torchrun: seconds a collective may wait for its peers before it fails (default 300)",
        parse_seconds,
        "S",
    ),
    _option(
        "bench_gpu_per_worker",
        "under pytest-xdist with several GPUs: auto (each worker its own GPU and measurement lock, "
        "the default) or off (every worker sees every GPU)",
        _gpu_per_worker,
        "MODE",
    ),
    _option("bench_trace", "GPU only: write a Chrome trace per benchmark here", _path, "DIR"),
    _option(
        "bench_lock_timeout",
        "seconds to wait for the machine's measurement lock or a baseline's lock while another process "
        "holds it, before giving up with an error that names the holder (default 600)",
        parse_lock_timeout,
        "S",
    ),
)
# Internal: the reference side of --bench-ab (a pytest the plugin starts in REF's worktree).
AB_SERVE = Option(
    "bench_ab_serve", "--bench-ab-serve", "internal: the reference side of --bench-ab", str, None, "ADDRESS"
)

# Ini-only keys: settings a project fixes once rather than per run.
INI_ONLY: tuple[Option, ...] = (
    Option("bench_history", "", "baseline runs kept per machine (default 10)", parse_count),
    Option("bench_alpha", "", "suite-wide false-alarm rate of the gate (default 0.01)", parse_fraction),
    Option(
        "bench_github_summary",
        "",
        "append the markdown summary to $GITHUB_STEP_SUMMARY when it is set (default true)",
        _bool,
    ),
)


@dataclass(frozen=True)
class Settings:
    enabled: bool = False
    save: str | None = None
    compare: str | None = None
    json_path: Path | None = None
    bench_dir: Path = Path("baselines")
    threshold: float = 0.05
    work_threshold: float | None = None  # --bench-work-threshold: a kernel's SASS growth that fails (None: a note)
    max_time: float = 1.0
    min_rounds: int = 5
    warmup: float = 0.1
    timeout: float = 600.0  # --bench-timeout: seconds a bench() call may take (0: no limit)
    threads: int | None = None  # --bench-threads: the library pools' size; None leaves them as they are
    target_ci: float = 0.01
    timer: str = "auto"
    interpret: str = "auto"
    arch: tuple[str, ...] | None = None
    ir_dump: Path | None = None
    peaks: str | Path = "table"
    ncu: bool = False
    dist_backend: str = "auto"
    dist_timeout: float = 300.0
    gpu_per_worker: str = "auto"
    trace_dir: Path | None = None
    lock_timeout: float = 600.0  # --bench-lock-timeout: the longest wait for a lock another process holds
    ab: str | None = None
    ab_processes: int = 8
    settle_time: float = 2.0
    unresolved: str = "warn"  # what an INCONCLUSIVE verdict does in history mode: warn or fail its test
    confirm: int = 2  # fresh processes that measure a benchmark about to fail again (history mode; processes/fresh.py)
    save_processes: int = 2  # fresh processes that measure every benchmark of a --bench-save run too
    passes: int | None = None  # None: auto (passes.planned)
    ab_serve: str | None = None
    history: int = 10
    alpha: float = 0.01
    html_path: Path | None = None
    md_path: Path | None = None
    csv_path: Path | None = None
    openmetrics_path: Path | None = None
    columns: tuple[str, ...] | None = None  # None: the report's defaults (more with -v)
    sort: str = "id"
    group_by: tuple[str, ...] = ("group",)
    only: bool = False
    skip: bool = False
    github_summary: bool = True
    sources: dict = field(default_factory=dict, compare=False, repr=False)

    @property
    def mode(self) -> str:
        """What this run does, in words, for the report header."""
        if not self.enabled:
            return "off (--bench to measure)"
        parts = ["measuring"]
        if self.ab:
            parts.append(f"A/B against {self.ab}")
        if self.compare:
            parts.append(f"comparing with {self.compare}")
        if self.save:
            parts.append(f"saving to {self.save}")
        return ", ".join(parts)


_FIELD = {
    "bench": "enabled",
    "bench_save": "save",
    "bench_compare": "compare",
    "bench_json": "json_path",
    "bench_dir": "bench_dir",
    "bench_threshold": "threshold",
    "bench_work_threshold": "work_threshold",
    "bench_max_time": "max_time",
    "bench_min_rounds": "min_rounds",
    "bench_warmup": "warmup",
    "bench_timeout": "timeout",
    "bench_threads": "threads",
    "bench_target_ci": "target_ci",
    "bench_timer": "timer",
    "bench_interpret": "interpret",
    "bench_arch": "arch",
    "bench_ir_dump": "ir_dump",
    "bench_peaks": "peaks",
    "bench_ncu": "ncu",
    "bench_dist_backend": "dist_backend",
    "bench_dist_timeout": "dist_timeout",
    "bench_gpu_per_worker": "gpu_per_worker",
    "bench_trace": "trace_dir",
    "bench_lock_timeout": "lock_timeout",
    "bench_ab": "ab",
    "bench_ab_processes": "ab_processes",
    "bench_settle_time": "settle_time",
    "bench_unresolved": "unresolved",
    "bench_confirm": "confirm",
    "bench_save_processes": "save_processes",
    "bench_passes": "passes",
    "bench_ab_serve": "ab_serve",
    "bench_history": "history",
    "bench_alpha": "alpha",
    "bench_html": "html_path",
    "bench_md": "md_path",
    "bench_csv": "csv_path",
    "bench_openmetrics": "openmetrics_path",
    "bench_columns": "columns",
    "bench_sort": "sort",
    "bench_group_by": "group_by",
    "bench_only": "only",
    "bench_skip": "skip",
    "bench_github_summary": "github_summary",
}
# Options that mean "measure" when typed on the command line. In an ini file they only say what
# to do when measuring: a project that keeps bench_json in pyproject.toml must not make every
# plain `pytest` run measure.
_IMPLY_BENCH = (
    "save", "compare", "ncu", "trace_dir", "json_path", "html_path", "md_path", "csv_path", "openmetrics_path",
    "only", "ab", "ab_serve",
)  # fmt: skip
_IMPLY_BENCH_FROM_INI = ("save", "compare", "ab")
_SERVED_IGNORES = (
    "save", "compare", "ab", "json_path", "html_path", "md_path", "csv_path", "openmetrics_path", "ncu", "trace_dir"
)  # fmt: skip


def resolve(cli: dict[str, Any], ini: dict[str, Any], rootdir: Path) -> Settings:
    """Build Settings from command-line values (None: not given) and ini values ('' : not set).

    Relative ini paths are relative to ``rootdir``; relative command-line paths to the current
    directory, as a user typing them expects.
    """
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS + INI_ONLY + (AB_SERVE,):
        raw, source = cli.get(opt.dest), "command line"
        if raw is None or raw is False:
            ini_raw = ini.get(opt.dest)
            if ini_raw not in (None, "", [], False):
                raw, source = ini_raw, f"ini key {opt.ini}"
            elif raw is None:
                continue
        parse = opt.parse or _bool
        try:
            value = parse(raw) if isinstance(raw, Path) or parse is _bool else parse(str(raw))
        except (ValueError, TypeError) as exc:
            raise SettingsError(f"{_display(opt, source)}={raw!r} ({source}): {exc}") from None
        if isinstance(value, Path) and not value.is_absolute() and source != "command line":
            value = rootdir / value
        values[_FIELD[opt.dest]] = value
        sources[_FIELD[opt.dest]] = source
    if values.get("bench_dir") is None:
        values["bench_dir"] = rootdir / "baselines"
    if values.get("ab_serve"):
        # A served process only measures on request: what the project's ini or addopts say about
        # comparing, saving or writing files belongs to the session that started it.
        for name in _SERVED_IGNORES:
            values.pop(name, None)
        values["github_summary"] = False
    for name in _IMPLY_BENCH:
        if values.get(name) and (sources[name] == "command line" or name in _IMPLY_BENCH_FROM_INI):
            values["enabled"] = True
    if values.get("ab") and values.get("compare"):
        raise SettingsError(
            f"--bench-ab={values['ab']} and --bench-compare={values['compare']}: choose one. A/B measures the "
            "reference in this job and gates on the paired difference; --bench-compare gates against a recorded "
            "baseline (pytest-tesserabench's docs/usage.md, 'Which comparison: A/B or history')"
        )
    if values.get("only") and values.get("skip"):
        raise SettingsError(
            f"--bench-only ({sources['only']}) and --bench-skip ({sources['skip']}) exclude each other; keep one"
        )
    settings = Settings(**values, sources=sources)
    _check_outputs(settings)
    return settings


def _display(opt: Option, source: str) -> str:
    return opt.flag if source == "command line" and opt.flag else opt.ini


def _check_outputs(settings: Settings) -> None:
    """Fail before measuring for minutes, not after, when the results cannot be written."""

    if not settings.enabled:
        return
    checks = [
        (name, flag, getattr(settings, name), functools.partial(files.check_writable_file, example=example))
        for name, flag, example in (
            ("json_path", "--bench-json", "results.json"),
            ("html_path", "--bench-html", "report.html"),
            ("md_path", "--bench-md", "summary.md"),
            ("csv_path", "--bench-csv", "results.csv"),
            ("openmetrics_path", "--bench-openmetrics", "bench.prom"),
        )
    ]
    if settings.save:
        checks.append(("bench_dir", "--bench-dir", settings.bench_dir / settings.save, files.check_writable_dir))
    for field_name, flag, path, check in checks:
        if path is None:
            continue
        problem = check(path)
        if problem:
            where = settings.sources.get(field_name, "default")
            what = f"{flag}={path}" if field_name != "bench_dir" else f"baselines folder {path}"
            raise SettingsError(f"{what} ({where}): {problem}")


# Per-test overrides from @pytest.mark.bench(...): name -> parser.
MARKER_KEYS: dict[str, Callable[[Any], Any]] = {
    "group": str,
    "max_time": parse_seconds,
    "min_rounds": parse_count,
    "warmup": parse_warmup,
    "timeout": parse_timeout,
    "target_ci": parse_target_ci,
    "threshold": parse_percent,
    "timer": lambda v: _timer(str(v)),
}


def apply_marker(settings: Settings, kwargs: dict[str, Any], where: str) -> tuple[Settings, str | None]:
    """Settings with a test's ``@pytest.mark.bench(...)`` overrides, and its group (or None)."""
    unknown = sorted(set(kwargs) - set(MARKER_KEYS))
    if unknown:
        raise SettingsError(
            f"@pytest.mark.bench on {where}: unknown argument(s) {', '.join(unknown)}; "
            f"accepted: {', '.join(MARKER_KEYS)}"
        )
    changes: dict[str, Any] = {}
    group = None
    for key, raw in kwargs.items():
        try:
            value = MARKER_KEYS[key](raw)
        except (ValueError, TypeError) as exc:
            raise SettingsError(f"@pytest.mark.bench({key}={raw!r}) on {where}: {exc}") from None
        if key == "group":
            group = value
        else:
            changes[key] = value
    return (replace(settings, **changes) if changes else settings), group
