"""Settings: every option resolved once (command line > ini > default), validated, frozen.

Each option is also an ini key (``--bench-max-time`` <-> ``bench_max_time``). A bad value is a
usage error that names the option, where it came from and what would be accepted.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

NAME_RE = re.compile(r"^[A-Za-z0-9._-]+$")
TIMERS = ("auto", "cpu", "cuda_event", "cuda_graph")


class SettingsError(ValueError):
    """A bad option value; the message names the option, its source and the fix."""


def _float(text: str, expected: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"must be {expected}") from None


def _positive_float(text: str) -> float:
    value = _float(text, "a positive number")
    if not math.isfinite(value) or value <= 0:
        raise ValueError("must be a positive number")
    return value


def _non_negative_float(text: str) -> float:
    value = _float(text, "zero or a positive number")
    if not math.isfinite(value) or value < 0:
        raise ValueError("must be zero or a positive number")
    return value


def _positive_int(text: str) -> int:
    try:
        value = int(str(text))
    except ValueError:
        raise ValueError("must be a whole number") from None
    if value < 1:
        raise ValueError("must be at least 1")
    return value


def _percent(text: str) -> float:
    """'5', '5%' or '2.5' -> a fraction (0.05, 0.025)."""
    value = _float(str(text).strip().rstrip("%"), "a percentage between 0 and 100, like 5 or 5%")
    if not math.isfinite(value) or value <= 0 or value >= 100:
        raise ValueError("must be a percentage between 0 and 100, like 5 or 5%")
    return value / 100.0


def _fraction(text: str) -> float:
    value = _float(text, "a number strictly between 0 and 1, like 0.01")
    if not 0 < value < 1:
        raise ValueError("must be a number strictly between 0 and 1, like 0.01")
    return value


def _baseline_name(text: str) -> str:
    if not NAME_RE.match(text) or text in (".", ".."):
        raise ValueError("must match [A-Za-z0-9._-]+ (a plain name such as 'main', no paths)")
    return text


def _timer(text: str) -> str:
    if text not in TIMERS:
        raise ValueError(f"must be one of {', '.join(TIMERS)}")
    return text


def _peaks(text: str) -> str:
    if text not in ("table", "measure"):
        raise ValueError("must be table (datasheet peaks) or measure (measured once per machine, cached)")
    return text


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
    from pytest_tesserabench.inspect import parse_archs  # the analyser's own list of targets

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


OPTIONS: tuple[Option, ...] = (
    Option("bench", "--bench", "measure benchmarks (without it, bench(fn) calls fn once)"),
    Option(
        "bench_save",
        "--bench-save",
        "measure and append this run to baseline NAME for this machine",
        _baseline_name,
        metavar="NAME",
    ),
    Option(
        "bench_compare",
        "--bench-compare",
        "measure and compare with baseline NAME; a significant slowdown fails its test",
        _baseline_name,
        metavar="NAME",
    ),
    Option(
        "bench_json", "--bench-json", "write the full results of this run, raw samples included", Path, metavar="PATH"
    ),
    Option("bench_dir", "--bench-dir", "baselines root (default: <rootdir>/baselines)", Path, metavar="DIR"),
    Option(
        "bench_threshold",
        "--bench-threshold",
        "smallest slowdown worth failing for, in percent (default 5)",
        _percent,
        0.05,
        "PCT",
    ),
    Option(
        "bench_max_time",
        "--bench-max-time",
        "measurement budget per benchmark in seconds, after warm-up (default 1.0)",
        _positive_float,
        1.0,
        "S",
    ),
    Option("bench_min_rounds", "--bench-min-rounds", "fewest rounds per benchmark (default 5)", _positive_int, 5, "N"),
    Option(
        "bench_warmup",
        "--bench-warmup",
        "warm-up time per benchmark in seconds (default 0.1)",
        _non_negative_float,
        0.1,
        "S",
    ),
    Option(
        "bench_target_ci",
        "--bench-target-ci",
        "stop once the 95%% interval of the median is within +-PCT (default 1)",
        _percent,
        0.01,
        "PCT",
    ),
    Option(
        "bench_timer",
        "--bench-timer",
        "auto (from where the arguments live), cpu, cuda_event or cuda_graph",
        _timer,
        "auto",
        "KIND",
    ),
    Option(
        "bench_arch",
        "--bench-arch",
        "targets for static kernel analysis, e.g. sm_90,sm_80 (default: the live GPU, else sm_90)",
        _arch_list,
        metavar="LIST",
    ),
    Option(
        "bench_ir_dump", "--bench-ir-dump", "write every IR level of each analysed kernel here", Path, metavar="DIR"
    ),
    Option(
        "bench_peaks",
        "--bench-peaks",
        "roofline peaks: table (datasheet figures, the default) or "
        "measure (a large bf16 matmul and a device copy, once per machine, cached)",
        _peaks,
        "table",
        "SOURCE",
    ),
    Option("bench_ncu", "--bench-ncu", "GPU only: hardware counters via Nsight Compute"),
    Option("bench_trace", "--bench-trace", "GPU only: write a Chrome trace per benchmark here", Path, metavar="DIR"),
)
# Ini-only keys: settings a project fixes once rather than per run.
INI_ONLY: tuple[Option, ...] = (
    Option("bench_history", "", "baseline runs kept per machine (default 10)", _positive_int, 10),
    Option("bench_alpha", "", "suite-wide false-alarm rate of the gate (default 0.01)", _fraction, 0.01),
    Option("bench_canary_normalize", "", "divide comparisons by the canary's drift (default false)", _bool, False),
)


@dataclass(frozen=True)
class Settings:
    enabled: bool = False
    save: str | None = None
    compare: str | None = None
    json_path: Path | None = None
    bench_dir: Path = Path("baselines")
    threshold: float = 0.05
    max_time: float = 1.0
    min_rounds: int = 5
    warmup: float = 0.1
    target_ci: float = 0.01
    timer: str = "auto"
    arch: tuple[str, ...] | None = None
    ir_dump: Path | None = None
    peaks: str = "table"
    ncu: bool = False
    trace_dir: Path | None = None
    history: int = 10
    alpha: float = 0.01
    canary_normalize: bool = False
    sources: dict = field(default_factory=dict, compare=False, repr=False)


_FIELD = {
    "bench": "enabled",
    "bench_save": "save",
    "bench_compare": "compare",
    "bench_json": "json_path",
    "bench_dir": "bench_dir",
    "bench_threshold": "threshold",
    "bench_max_time": "max_time",
    "bench_min_rounds": "min_rounds",
    "bench_warmup": "warmup",
    "bench_target_ci": "target_ci",
    "bench_timer": "timer",
    "bench_arch": "arch",
    "bench_ir_dump": "ir_dump",
    "bench_peaks": "peaks",
    "bench_ncu": "ncu",
    "bench_trace": "trace_dir",
    "bench_history": "history",
    "bench_alpha": "alpha",
    "bench_canary_normalize": "canary_normalize",
}


def resolve(cli: dict[str, Any], ini: dict[str, Any], rootdir: Path) -> Settings:
    """Build Settings from command-line values (None: not given) and ini values ('' : not set).

    Relative ini paths are relative to ``rootdir``; relative command-line paths to the current
    directory, as a user typing them expects.
    """
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for opt in OPTIONS + INI_ONLY:
        raw, source = cli.get(opt.dest), "command line"
        if raw is None or raw is False:
            ini_raw = ini.get(opt.dest)
            if ini_raw not in (None, "", [], False):
                raw, source = ini_raw, f"ini key {opt.ini}"
            elif raw is None:
                continue
        if opt.parse is None:
            try:
                value = _bool(raw)
            except ValueError as exc:
                raise SettingsError(f"{_display(opt, source)}={raw!r} ({source}): {exc}") from None
        else:
            try:
                value = opt.parse(str(raw)) if not isinstance(raw, Path) else opt.parse(raw)
            except (ValueError, TypeError) as exc:
                raise SettingsError(f"{_display(opt, source)}={raw!r} ({source}): {exc}") from None
            if isinstance(value, Path) and not value.is_absolute() and source != "command line":
                value = rootdir / value
        values[_FIELD[opt.dest]] = value
        sources[_FIELD[opt.dest]] = source
    if values.get("bench_dir") is None:
        values["bench_dir"] = rootdir / "baselines"
    if values.get("save") or values.get("compare"):
        values["enabled"] = True  # --bench-save and --bench-compare imply --bench
    if values.get("ncu") or values.get("trace_dir"):
        values["enabled"] = True
    settings = Settings(**values, sources=sources)
    _check_json_path(settings)
    return settings


def _display(opt: Option, source: str) -> str:
    return opt.flag if source == "command line" and opt.flag else opt.ini


def _check_json_path(settings: Settings) -> None:
    """Fail before measuring for minutes, not after, when the results cannot be written."""
    path = settings.json_path
    if path is None:
        return
    where = settings.sources.get("json_path", "command line")
    if path.is_dir():
        raise SettingsError(f"--bench-json={path} ({where}): is a directory; give a file path like results.json")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise SettingsError(f"--bench-json={path} ({where}): folder {parent} does not exist; create it first")
    if not os.access(parent, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise SettingsError(f"--bench-json={path} ({where}): not writable; choose another path")


# Per-test overrides from @pytest.mark.bench(...): name -> parser.
MARKER_KEYS: dict[str, Callable[[Any], Any]] = {
    "group": str,
    "max_time": lambda v: _positive_float(str(v)),
    "min_rounds": lambda v: _positive_int(str(v)),
    "warmup": lambda v: _non_negative_float(str(v)),
    "target_ci": lambda v: _percent(str(v)),
    "threshold": lambda v: _percent(str(v)),
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
