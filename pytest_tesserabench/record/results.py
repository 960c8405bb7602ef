"""The benchmark record, its verdict and the run document: one typed home, one JSON form.

``Bench`` creates a ``BenchRecord`` per measured call; the hooks move records (as JSON between
pytest-xdist processes); the gate, the reports and the baselines read their fields. A record is
frozen: what is learnt of it later (its verdict and the fresh processes that measured it too, when
the test is judged; its outcome, when pytest reports the test; Nsight Compute's counters) makes a
new record with ``dataclasses.replace``, in plugin.py, as pyperf's ``Run`` is immutable.

``from_json`` validates the whole document: a file that passes is safe for the gate, the reports
and the CLI, and a file that does not raises ``DocumentError`` naming the field and the fix. A run
file (``--bench-json``) and each entry of a baseline's ``runs`` are a ``RunDocument`` (the schema
of docs/usage.md). Keys this version does not know are kept and written back unchanged, so an
older pytest-tesserabench never drops what a newer one recorded.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields, replace
from typing import Any

from pytest_tesserabench.record.units import format_factor, format_ms

SCHEMA = 1
STATUSES = ("REGRESSED", "IMPOSSIBLE", "INCONCLUSIVE", "IMPROVED", "UNCHANGED", "NEW", "MISSING", "NOT_GATED")
FAILING_STATUSES = ("REGRESSED", "IMPOSSIBLE")
GPU_TIMERS = ("cuda_event", "cuda_graph")
# Times outside this range are not measurements (a clock glitch, a hand edit): refusing them keeps
# ratios and logs finite. 1e-12 ms is a picosecond; 1e9 ms is eleven days.
MIN_TIME_MS, MAX_TIME_MS = 1e-12, 1e9
MAX_COUNT = 10**12


class DocumentError(ValueError):
    """A run, record or verdict that does not fit the schema; the message says where and why."""


# -- validation helpers ---------------------------------------------------------------------------
def _fail(where: str, problem: str) -> DocumentError:
    return DocumentError(f"{where}: {problem}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _number(
    value: Any, where: str, *, nullable: bool = True, low: float | None = None, high: float | None = None
) -> float | None:
    """A finite float in [low, high]; non-finite values in a nullable field read as null (the
    writer writes null for them), anywhere else they are an error."""
    if value is None:
        if nullable:
            return None
        raise _fail(where, "is missing (null); expected a number")
    if not _is_number(value):
        raise _fail(where, f"is {type(value).__name__} {_short(value)}; expected a number")
    try:
        number = float(value)
    except OverflowError:  # an integer literal with hundreds of digits
        raise _fail(where, f"is {_short(value)}, too large for any number here; expected a number") from None
    if not math.isfinite(number):
        if nullable:
            return None
        raise _fail(where, f"is {number}; expected a finite number")
    if (low is not None and number < low) or (high is not None and number > high):
        bounds = " and ".join(
            text
            for text in (f">= {low:g}" if low is not None else "", f"<= {high:g}" if high is not None else "")
            if text
        )
        raise _fail(where, f"is {number:g}; expected a number {bounds}")
    return number


def _count(value: Any, where: str, *, nullable: bool = False) -> int | None:
    if value is None and nullable:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= MAX_COUNT:
        raise _fail(where, f"is {_short(value)}; expected a whole number >= 0")
    return value


def _text(value: Any, where: str, *, nullable: bool = False) -> str | None:
    if value is None and nullable:
        return None
    if not isinstance(value, str):
        raise _fail(where, f"is {type(value).__name__} {_short(value)}; expected a string")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise _fail(where, f"is {_short(value)}; expected true or false")
    return value


def _object(value: Any, where: str, *, nullable: bool = False) -> dict | None:
    if value is None and nullable:
        return None
    if not isinstance(value, dict):
        raise _fail(where, f"is {type(value).__name__} {_short(value)}; expected an object")
    return value


def _json_object(value: Any, where: str, *, nullable: bool = False) -> dict | None:
    """An object whose contents are plain JSON (free-form parts: extra_info, telemetry...)."""
    return _plain_json(_object(value, where, nullable=nullable), where)


def _list(value: Any, where: str) -> list:
    if not isinstance(value, list):
        raise _fail(where, f"is {type(value).__name__} {_short(value)}; expected a list")
    return value


def _times(value: Any, where: str) -> list[float]:
    """Milliseconds: finite, within [MIN_TIME_MS, MAX_TIME_MS], or exactly 0 (a CUDA-graph round
    whose flush-only graph took as long as the work; the gate skips it)."""
    out = []
    for i, item in enumerate(_list(value, where)):
        number = _number(item, f"{where}[{i}]", nullable=False, low=0.0, high=MAX_TIME_MS)
        if 0.0 < number < MIN_TIME_MS:
            raise _fail(f"{where}[{i}]", f"is {number:g} ms, below a picosecond; not a measurement")
        out.append(number)
    return out


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _plain_json(value: Any, where: str, depth: int = 0) -> Any:
    """``value`` if it is plain JSON (dict/list/str/number/bool/None, finite floats); else
    DocumentError naming the first offending key."""
    if depth > 64:
        raise _fail(where, "is nested more than 64 levels deep")
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise _fail(where, f"is {value}, which JSON cannot hold")
        return value
    if isinstance(value, dict):
        for key, item in value.items():
            if not isinstance(key, str):
                raise _fail(where, f"has the key {_short(key)}; JSON keys are strings")
            _plain_json(item, f"{where}.{key}", depth + 1)
        return value
    if isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            _plain_json(item, f"{where}[{i}]", depth + 1)
        return value
    raise _fail(where, f"is {_short(value)} of type {type(value).__name__}, which JSON cannot hold")


def check_plain_json(value: Any, where: str) -> None:
    """DocumentError naming the first key of ``value`` that JSON cannot hold."""
    _plain_json(value, where)


def _finite_or_none(value: Any) -> Any:
    """JSON has no NaN or Infinity: they are written as null."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite_or_none(v) for v in value]
    return value


def _extra_keys(data: dict, known: tuple[str, ...], where: str) -> dict:
    """The keys of ``data`` this version does not read: a newer version wrote them, and a file
    this version rewrites (a baseline it appends to) must give them back unchanged."""
    extra = {k: v for k, v in data.items() if k not in known}
    _plain_json(extra, where)
    return extra


def _known(cls) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls) if f.name != "other")


def _commit(value: Any, where: str) -> dict:
    """The commit a run was measured at: its known keys are what the reports print and A/B
    checks out, so each has its type; other keys are kept as they are."""
    commit = _json_object(value or {}, where)
    _text(commit.get("sha"), f"{where}.sha", nullable=True)
    _text(commit.get("branch"), f"{where}.branch", nullable=True)
    if commit.get("dirty") is not None:
        _bool(commit["dirty"], f"{where}.dirty")
    return commit


# -- the parts of a record ------------------------------------------------------------------------
@dataclass(frozen=True)
class Stats:
    """Summary of the round medians (raw samples only for min/max); milliseconds."""

    median_ms: float
    ci95_ms: tuple[float, float]
    mean_ms: float
    min_ms: float
    max_ms: float
    iqr_ms: float
    stdev_ms: float
    cv: float
    rounds: int
    samples: int
    outliers: int = 0
    noisy: bool = False
    other: dict[str, Any] = field(default_factory=dict)  # keys a newer version wrote, written back as they were

    @property
    def ci_halfwidth(self) -> float:
        """Half the 95% interval relative to the median (0.01 means +-1%)."""
        lo, hi = self.ci95_ms
        return (hi - lo) / 2 / self.median_ms if self.median_ms > 0 else 0.0

    def to_json(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "other"}
        data["ci95_ms"] = list(self.ci95_ms)
        return {**self.other, **data}

    @classmethod
    def from_json(cls, data: Any, where: str) -> Stats:
        data = _object(data, where)
        ci = _list(data.get("ci95_ms"), f"{where}.ci95_ms")
        if len(ci) != 2:
            raise _fail(f"{where}.ci95_ms", f"has {len(ci)} values; expected [low, high]")

        def time(key: str, value: Any = None) -> float:
            value = data.get(key) if value is None else value
            return _number(value, f"{where}.{key}", nullable=False, low=0.0, high=MAX_TIME_MS)

        return cls(
            median_ms=time("median_ms"),
            ci95_ms=(time("ci95_ms[0]", ci[0]), time("ci95_ms[1]", ci[1])),
            mean_ms=time("mean_ms"),
            min_ms=time("min_ms"),
            max_ms=time("max_ms"),
            iqr_ms=time("iqr_ms"),
            stdev_ms=time("stdev_ms"),
            cv=_number(data.get("cv", 0.0), f"{where}.cv", nullable=False, low=0.0, high=MAX_TIME_MS),
            rounds=_count(data.get("rounds"), f"{where}.rounds"),
            samples=_count(data.get("samples", data.get("rounds")), f"{where}.samples"),
            outliers=_count(data.get("outliers", 0), f"{where}.outliers"),
            noisy=_bool(data.get("noisy", False), f"{where}.noisy"),
            other=_extra_keys(data, _known(cls), where),
        )

    @classmethod
    def of(cls, rounds_ms: list[float], samples_ms: list[float] | None = None, *, noisy: bool = False) -> Stats:
        from pytest_tesserabench.record import stats  # numpy (~120 ms): every pytest run imports this module

        return cls.from_json(stats.summarize(rounds_ms, samples_ms, noisy=noisy), "stats")


def _check_summary(stats: Stats, where: str) -> None:
    """A stats block read from a file must describe a measurement: the reports divide by its
    median and draw its interval around it. (Stats.of always gives such a block, except from
    rounds that are all 0, which the gate skips anyway.)"""
    fix = "delete the stats block (it is recomputed from rounds_ms) or restore the file from version control"
    if stats.median_ms < MIN_TIME_MS:
        raise _fail(f"{where}.median_ms", f"is {stats.median_ms:g} ms, which is not a measurement; {fix}")
    low, high = stats.ci95_ms
    if not low <= stats.median_ms <= high:
        raise _fail(
            f"{where}.ci95_ms",
            f"is [{low:g}, {high:g}], which does not hold the median {stats.median_ms:g} "
            f"(expected [low, high] with low <= median_ms <= high); {fix}",
        )


@dataclass(frozen=True)
class ABDecision:
    """How an A/B benchmark's pairs decided (gate/paired.py's decision, as the run file keeps it)."""

    status: str
    decided: bool
    ratio: float
    ci: tuple[float, float]
    p_value: float
    threshold: float
    pairs: int
    processes: int = 1  # the process pairs it was judged over

    def to_json(self) -> dict:
        return {**asdict(self), "ci": list(self.ci)}

    @classmethod
    def from_json(cls, data: Any, where: str) -> ABDecision:
        data = _object(data, where)
        ci = _list(data.get("ci"), f"{where}.ci")
        if len(ci) != 2:
            raise _fail(f"{where}.ci", f"has {len(ci)} values; expected [low, high]")
        return cls(
            status=_text(data.get("status"), f"{where}.status"),
            decided=_bool(data.get("decided"), f"{where}.decided"),
            ratio=_number(data.get("ratio"), f"{where}.ratio", nullable=False, low=0.0),
            ci=(
                _number(ci[0], f"{where}.ci[0]", nullable=False, low=0.0),
                _number(ci[1], f"{where}.ci[1]", nullable=False, low=0.0),
            ),
            p_value=_number(data.get("p_value"), f"{where}.p_value", nullable=False, low=0.0, high=1.0),
            threshold=_number(data.get("threshold"), f"{where}.threshold", nullable=False, low=0.0),
            pairs=_count(data.get("pairs"), f"{where}.pairs"),
            processes=_count(data.get("processes", 1), f"{where}.processes"),
        )


@dataclass(frozen=True)
class ABResult:
    """--bench-ab: one benchmark's reference side and its pairs. ab/lead.py makes it while
    measuring; ab/hooks.py adds the reference's record and outcome when the test ends."""

    ref: str
    sha: str | None = None
    unpaired: str | None = None  # why the call was measured here alone (no decision then)
    decision: ABDecision | None = None
    log_ratios: tuple[float, ...] = ()  # candidate / reference, one per pair of blocks
    processes: tuple[int, ...] = ()  # the process pair each pair of blocks came from
    reference_rounds_ms: tuple[float, ...] = ()
    reference_run_queue_wait_s: float = 0.0
    settle_s: float = 0.0  # extra pairs measured to settle an undecided comparison
    alpha_per_test: float | None = None
    reference: dict | None = None  # the reference side's record, as its process sent it
    reference_outcome: str | None = None
    reference_error: str | None = None
    other: dict = field(default_factory=dict)  # keys a newer version wrote

    def to_json(self) -> dict:
        data = {
            "ref": self.ref,
            "sha": self.sha,
            "unpaired": self.unpaired,
            "decision": self.decision.to_json() if self.decision else None,
            "log_ratios": list(self.log_ratios),
            "processes": list(self.processes),
            "reference_rounds_ms": list(self.reference_rounds_ms),
            "reference_run_queue_wait_s": self.reference_run_queue_wait_s,
            "settle_s": self.settle_s,
            "alpha_per_test": self.alpha_per_test,
            "reference": self.reference,
            "reference_outcome": self.reference_outcome,
            "reference_error": self.reference_error,
        }
        return {**{k: v for k, v in data.items() if v is not None}, **self.other}

    @classmethod
    def from_json(cls, data: Any, where: str) -> ABResult | None:
        data = _json_object(data, where, nullable=True)
        if data is None:
            return None
        log_ratios = _list(data.get("log_ratios", []), f"{where}.log_ratios")
        processes = _list(data.get("processes", []), f"{where}.processes")
        return cls(
            ref=_text(data.get("ref"), f"{where}.ref"),
            sha=_text(data.get("sha"), f"{where}.sha", nullable=True),
            unpaired=_text(data.get("unpaired"), f"{where}.unpaired", nullable=True),
            decision=ABDecision.from_json(data["decision"], f"{where}.decision") if data.get("decision") else None,
            log_ratios=tuple(
                _number(v, f"{where}.log_ratios[{i}]", nullable=False, low=-50.0, high=50.0)
                for i, v in enumerate(log_ratios)
            ),
            processes=tuple(_count(v, f"{where}.processes[{i}]") for i, v in enumerate(processes)),
            reference_rounds_ms=tuple(_times(data.get("reference_rounds_ms", []), f"{where}.reference_rounds_ms")),
            reference_run_queue_wait_s=_number(
                data.get("reference_run_queue_wait_s", 0.0),
                f"{where}.reference_run_queue_wait_s",
                nullable=False,
                low=0.0,
                high=1e9,
            ),  # fmt: skip
            settle_s=_number(data.get("settle_s", 0.0), f"{where}.settle_s", nullable=False, low=0.0, high=1e9),
            alpha_per_test=_number(data.get("alpha_per_test"), f"{where}.alpha_per_test", low=0.0, high=1.0),
            reference=_object(data.get("reference"), f"{where}.reference", nullable=True),
            reference_outcome=_text(data.get("reference_outcome"), f"{where}.reference_outcome", nullable=True),
            reference_error=_text(data.get("reference_error"), f"{where}.reference_error", nullable=True),
            other=_extra_keys(data, _known(cls), where),
        )


@dataclass(frozen=True)
class Sampling:
    """How the measurement went: warm-up, calibration, why it stopped."""

    warmup_calls: int = 0
    inner_loops: int = 1
    samples_per_round: int = 1
    stop: str = ""
    elapsed_s: float = 0.0
    settle_s: float = 0.0  # extra measuring an INCONCLUSIVE verdict took to settle
    confirm_s: float = 0.0  # measuring it again in fresh processes before failing took (processes/fresh.py)
    run_queue_wait_s: float = 0.0  # the timing thread waited this long for a CPU; not in the samples
    others_cpu_s: float = 0.0  # CPU time other processes used while the rounds were timed (neighbours)
    others_wall_s: float = 0.0  # the wall time of those rounds
    own_cpu_s: float = 0.0  # CPU time the benchmark's process (all threads) used in those rounds
    passes: int = 1  # interleaved passes over the suite the rounds were taken in
    pass_rounds: tuple[int, ...] = ()  # rounds per pass, in order (several passes; settling adds to the last)
    threads: int = 0  # the --bench-threads the rounds were taken under (0: thread pools as the process had them)
    pool_canary_ms: tuple[float, ...] = ()  # torch's thread pool timed after each pass (measure/canary.py)
    blas_canary_ms: tuple[float, ...] = ()  # numpy's BLAS threads instead, in a process without torch
    memory_canary: tuple[float, ...] = ()  # the machine's memory speed timed after each pass (measure/canary.py)
    other: dict[str, Any] = field(default_factory=dict)  # keys a newer version wrote, written back as they were

    def to_json(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "other"}
        data["pass_rounds"] = list(self.pass_rounds)
        data["pool_canary_ms"] = list(self.pool_canary_ms)
        data["blas_canary_ms"] = list(self.blas_canary_ms)
        data["memory_canary"] = list(self.memory_canary)
        return {**self.other, **data}

    @classmethod
    def from_json(cls, data: Any, where: str) -> Sampling:
        data = _object(data, where)
        return cls(
            warmup_calls=_count(data.get("warmup_calls", 0), f"{where}.warmup_calls"),
            inner_loops=_count(data.get("inner_loops", 1), f"{where}.inner_loops"),
            samples_per_round=_count(data.get("samples_per_round", 1), f"{where}.samples_per_round"),
            stop=_text(data.get("stop", ""), f"{where}.stop"),
            elapsed_s=_number(data.get("elapsed_s", 0.0), f"{where}.elapsed_s", nullable=False, low=0.0, high=1e9),
            settle_s=_number(data.get("settle_s", 0.0), f"{where}.settle_s", nullable=False, low=0.0, high=1e9),
            confirm_s=_number(data.get("confirm_s", 0.0), f"{where}.confirm_s", nullable=False, low=0.0, high=1e9),
            run_queue_wait_s=_number(
                data.get("run_queue_wait_s", 0.0), f"{where}.run_queue_wait_s", nullable=False, low=0.0, high=1e9
            ),
            others_cpu_s=_number(
                data.get("others_cpu_s", 0.0), f"{where}.others_cpu_s", nullable=False, low=-1e9, high=1e9
            ),
            others_wall_s=_number(
                data.get("others_wall_s", 0.0), f"{where}.others_wall_s", nullable=False, low=0.0, high=1e9
            ),
            own_cpu_s=_number(data.get("own_cpu_s", 0.0), f"{where}.own_cpu_s", nullable=False, low=0.0, high=1e9),
            passes=_count(data.get("passes", 1), f"{where}.passes"),
            pass_rounds=_pass_rounds(data.get("pass_rounds", []), f"{where}.pass_rounds"),
            threads=_count(data.get("threads", 0), f"{where}.threads"),
            pool_canary_ms=tuple(_times(data.get("pool_canary_ms", []), f"{where}.pool_canary_ms")),
            blas_canary_ms=tuple(_times(data.get("blas_canary_ms", []), f"{where}.blas_canary_ms")),
            memory_canary=tuple(_times(data.get("memory_canary", []), f"{where}.memory_canary")),
            other=_extra_keys(data, _known(cls), where),
        )


def _pass_rounds(value: Any, where: str) -> tuple[int, ...]:
    if not isinstance(value, list):
        raise _fail(where, f"is {type(value).__name__} {_short(value)}; expected a list of round counts")
    return tuple(_count(count, f"{where}[{i}]") for i, count in enumerate(value))


def _pct(ratio: float, as_factor: bool | None = None) -> str:
    """A change as a percentage; past 3x either way as a factor ('12.4x', '0.05x'), which reads
    better than +1140.0% or -95.0%. ``as_factor`` forces one form (an interval and its point
    share one)."""
    if as_factor is None:
        as_factor = _past_factor(ratio)
    if as_factor:
        return format_factor(ratio)
    return f"{(ratio - 1.0) * 100:+.1f}%"


def _past_factor(ratio: float) -> bool:
    return ratio >= 3 or 0 < ratio <= 1 / 3


@dataclass(frozen=True)
class Verdict:
    """The judgement of one benchmark: against a baseline (the gate) or against the roofline."""

    id: str
    status: str
    baseline_ms: float | None = None
    candidate_ms: float | None = None
    ratio: float | None = None
    ci: tuple[float, float] | None = None
    p_value: float | None = None  # one-sided, for "slower"
    severity: str | None = None  # failing verdicts only: "mild" | "moderate" | "severe"
    reasons: tuple[str, ...] = ()  # why it failed without statistics (kernel figures, roofline)
    notes: tuple[str, ...] = ()  # informational: kernel changes, short history, timer
    threshold: float | None = None  # theta actually used (relative)
    noise: float | None = None  # run-to-run noise of one run's centre (relative sd)
    history: int = 0  # baseline runs that measured this benchmark
    alpha_per_test: float | None = None  # alpha / m
    hint_text: str | None = None  # what would settle an INCONCLUSIVE verdict
    # What set the status: "rule", "shift" (the run's shared shift dominated), "processes" (they
    # disagreed), "conditions", "kernel figures", "untimed", "paired", "roofline", "missing"
    stage: str | None = None
    detectable: float | None = None  # the smallest slowdown this comparison could catch (relative)
    shift: float | None = None  # the run's shared shift removed from the change (relative)
    processes: int = 1  # the candidate's processes judged (this run's and fresh ones measured again)

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise DocumentError(f"verdict of {self.id}: status {self.status!r} is not one of {', '.join(STATUSES)}")

    @property
    def failed(self) -> bool:
        return self.status in FAILING_STATUSES

    def change_text(self) -> str:
        """'+15.1% [+12.0%, +18.3%]', or '-' when there is no timing comparison."""
        if self.ratio is None:
            return "-"
        factor = any(_past_factor(r) for r in (self.ratio, *(self.ci or ())))  # one form for all three
        text = _pct(self.ratio, factor)
        if self.ci is not None:
            text += f" [{_pct(self.ci[0], factor)}, {_pct(self.ci[1], factor)}]"
        return text

    def head(self) -> str:
        """The status as a row shows it: with its severity, or "UNCHANGED (faster)" where the
        interval lies below 1 (UNCHANGED claims no slowdown; a speed-up is IMPROVED only at
        alpha / m, and a bare "UNCHANGED 0.18x" reads as a contradiction)."""
        if self.severity is not None:
            return f"{self.status} ({self.severity})"
        if self.status == "UNCHANGED" and self.ci is not None and self.ci[1] < 1:
            return "UNCHANGED (faster)"
        return self.status

    def line(self) -> str:
        """One line for the test report: old and new median, change, interval, p, severity."""

        parts = [self.head()]
        if self.ratio is not None:
            parts.append(f"{format_ms(self.baseline_ms)} -> {format_ms(self.candidate_ms)}, {self.change_text()}")
            if self.p_value is not None and self.status not in ("IMPROVED", "UNCHANGED"):
                p = f"p={self.p_value:.2g}"  # (the p-value is for "slower")
                # undecided though the printed 95% interval may clear the threshold: the suite's
                # alpha split over its benchmarks is the bar, and the line says which
                needs = self.alpha_per_test
                if self.status == "INCONCLUSIVE" and needs is not None and self.p_value >= needs:
                    p += (
                        f" (needs < {needs:.2g}, alpha split over the benchmarks compared: "
                        "a bar past the 95% interval shown)"
                    )
                parts.append(p)
            if self.threshold is not None:
                parts.append(f"threshold {_pct(1 + self.threshold).lstrip('+')}")
            if self.status == "INCONCLUSIVE" and self.detectable is not None and self.threshold is not None:
                if self.detectable > self.threshold:
                    parts.append(f"could detect {_pct(1 + self.detectable).lstrip('+')} or more")
            if self.head() == "UNCHANGED (faster)":
                parts.append("short of the bar for IMPROVED (alpha split over the benchmarks compared)")
            if self.shift_text():
                parts.append(f"this run's shared shift {self.shift_text()} removed")
        text = ", ".join(parts)
        extra = list(self.reasons) or ([] if self.ratio is not None else list(self.notes[:1]))
        if extra:
            text += "; " + "; ".join(extra)
        return text

    def shift_text(self) -> str | None:
        """The run's shared shift removed from the change ('+20.6%'), when big enough to say: the
        change is then not ``now`` over ``baseline``, and a reader must see why."""
        return _pct(1 + self.shift) if self.shift is not None and abs(self.shift) >= 0.01 else None

    def hint(self) -> str | None:
        """For INCONCLUSIVE: what would settle it. ``hint_text`` names a cause of its own (the run's
        shift, processes that disagree, a short baseline...); without one, the noise left the
        interval wider than the threshold."""
        if self.status != "INCONCLUSIVE":
            return None
        if self.hint_text is None and self.detectable is not None and self.threshold is not None:
            if self.detectable > self.threshold:
                return (
                    f"on this machine the gate can catch slowdowns of {self.detectable:.0%} or more here, not "
                    f"{self.threshold:.0%}: --bench-ab=REF (both sides in one job), more saves of the baseline, "
                    "or a quieter runner"
                )
        return self.hint_text

    def to_json(self) -> dict:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "id"}
        data["ci"] = list(self.ci) if self.ci is not None else None
        data["reasons"], data["notes"] = list(self.reasons), list(self.notes)
        return _finite_or_none(data)

    @classmethod
    def from_json(cls, record_id: str, data: Any, where: str) -> Verdict:
        data = _object(data, where)
        status = _text(data.get("status"), f"{where}.status")
        if status not in STATUSES:
            raise _fail(f"{where}.status", f"is {status!r}; expected one of {', '.join(STATUSES)}")
        ci = data.get("ci")
        if ci is not None:
            ci = _list(ci, f"{where}.ci")
            if len(ci) != 2:
                raise _fail(f"{where}.ci", "expected [low, high]")
            ci = tuple(_number(v, f"{where}.ci[{i}]", nullable=False, low=0.0) for i, v in enumerate(ci))

        def texts(key: str) -> tuple[str, ...]:
            items = _list(data.get(key, []), f"{where}.{key}")
            return tuple(_text(v, f"{where}.{key}[{i}]") for i, v in enumerate(items))

        return cls(
            id=record_id,
            status=status,
            baseline_ms=_number(data.get("baseline_ms"), f"{where}.baseline_ms", low=0.0),
            candidate_ms=_number(data.get("candidate_ms"), f"{where}.candidate_ms", low=0.0),
            ratio=_number(data.get("ratio"), f"{where}.ratio", low=0.0),
            ci=ci,
            p_value=_number(data.get("p_value"), f"{where}.p_value", low=0.0, high=1.0),
            severity=_text(data.get("severity"), f"{where}.severity", nullable=True),
            reasons=texts("reasons"),
            notes=texts("notes"),
            threshold=_number(data.get("threshold"), f"{where}.threshold", low=0.0),
            noise=_number(data.get("noise"), f"{where}.noise", low=0.0),
            history=_count(data.get("history", 0), f"{where}.history"),
            alpha_per_test=_number(data.get("alpha_per_test"), f"{where}.alpha_per_test", low=0.0, high=1.0),
            hint_text=_text(data.get("hint_text"), f"{where}.hint_text", nullable=True),
            stage=_text(data.get("stage"), f"{where}.stage", nullable=True),
            detectable=_number(data.get("detectable"), f"{where}.detectable", low=0.0),
            shift=_number(data.get("shift"), f"{where}.shift", low=-1.0),
            processes=_count(data.get("processes", 1), f"{where}.processes"),
        )


# What a baseline keeps of a kernel entry: its identity (name, arch, config) and its figures.
BASELINE_KERNEL_KEYS = (
    "name", "arch", "source", "spec_id", "signature", "config", "constexprs", "num_warps", "num_stages", "num_ctas",
    "registers", "spill_bytes", "spill_stores", "spill_loads", "shared_bytes", "occupancy", "limiter",
    "blocks_per_sm", "active_warps", "tensor_core_instructions", "error", "notes",
)  # fmt: skip


# The work a kernel holds, by level, as (label, path into the kernel entry): kept in a baseline
# too, for the gate's notes on what changed (gate.kernels.work_changes), and nothing more of
# the per-level counts (the run file has them all).
KERNEL_WORK = (
    ("SASS instructions", ("sass_instructions",)),
    ("tensor-core instructions", ("tensor_core_instructions",)),
    ("TTIR dot", ("ttir", "dot")),
    ("TTIR load", ("ttir", "load")),
    ("TTIR store", ("ttir", "store")),
    ("TTIR math", ("ttir", "math")),
    ("PTX sfu", ("instructions", "sfu")),
)


def analysed_kernels(records) -> set[tuple[str, str]]:
    """(name, arch) of every kernel whose static figures ``records`` hold (not one that failed to
    compile): what a comparison gates exactly, without statistics."""
    return {(str(k.get("name")), str(k.get("arch"))) for r in records for k in r.kernels if not k.get("error")}


def kernels_text(kernels: set[tuple[str, str]]) -> str:
    """'3 kernel(s) on sm_80, sm_90' for analysed_kernels' pairs."""
    return f"{len({name for name, _ in kernels})} kernel(s) on {', '.join(sorted({arch for _, arch in kernels}))}"


def _baseline_kernel(kernel: dict) -> dict:
    kept = {k: kernel[k] for k in BASELINE_KERNEL_KEYS if k in kernel}
    for _, path in KERNEL_WORK:
        *outer, key = path
        source = kernel.get(outer[0]) if outer else kernel
        if isinstance(source, dict) and key in source:
            (kept.setdefault(outer[0], {}) if outer else kept)[key] = source[key]
    return kept


# The kernel figures the gate compares; every other key of a kernel entry is only shown.
_KERNEL_NUMBERS = ("registers", "spill_bytes", "shared_bytes", "occupancy", "num_warps", "num_stages")


def _kernel(data: Any, where: str) -> dict:
    data = _object(data, where)
    _text(data.get("name"), f"{where}.name")
    _text(data.get("arch"), f"{where}.arch")
    for key in _KERNEL_NUMBERS:
        if data.get(key) is not None:
            _number(data[key], f"{where}.{key}", nullable=False, low=0.0, high=1e12)
    if data.get("occupancy") is not None and data["occupancy"] > 1:
        raise _fail(f"{where}.occupancy", f"is {data['occupancy']}; expected a fraction in [0, 1]")
    _object(data.get("config"), f"{where}.config", nullable=True)
    _object(data.get("constexprs"), f"{where}.constexprs", nullable=True)
    _text(data.get("error"), f"{where}.error", nullable=True)
    for i, note in enumerate(_list(data.get("notes") or [], f"{where}.notes")):
        _text(note, f"{where}.notes[{i}]")
    _plain_json(data, where)
    return data


# -- the record -----------------------------------------------------------------------------------
# Runs imported from pytest-benchmark (history/imported.py): another tool's timings, never ours.
IMPORTED_TIMER = "pytest-benchmark"


def is_imported(run: RunDocument) -> bool:
    """A run another tool measured (``tesserabench import``): every record of its timer."""
    return bool(run.benchmarks) and all(r.timer == IMPORTED_TIMER for r in run.benchmarks.values())


UNGATED_TIMERS = ("interpreter", IMPORTED_TIMER)  # timers whose timings are shown and never gated


@dataclass(frozen=True)
class FreshProcess:
    """What one fresh process measured of a record (processes/fresh.py), as the run file keeps it:
    its rounds, in blocks of ``pass_rounds`` (read as the session's passes are), and the canary
    right before it."""

    rounds_ms: tuple[float, ...] = ()
    pass_rounds: tuple[int, ...] = ()
    canary_ms: float | None = None
    memory_canary: tuple[float, ...] = ()  # after each block (Sampling.memory_canary)
    other: dict[str, Any] = field(default_factory=dict)  # keys a newer version wrote, kept as they are

    def to_json(self) -> dict:
        data = {"rounds_ms": list(self.rounds_ms), "pass_rounds": list(self.pass_rounds), "canary_ms": self.canary_ms}
        if self.memory_canary:
            data["memory_canary"] = list(self.memory_canary)
        return {**data, **self.other}

    @classmethod
    def from_json(cls, data: Any, where: str) -> FreshProcess:
        data = _object(data, where)
        return cls(
            rounds_ms=tuple(_times(data.get("rounds_ms", []), f"{where}.rounds_ms")),
            pass_rounds=_pass_rounds(data.get("pass_rounds", []), f"{where}.pass_rounds"),
            canary_ms=_number(data.get("canary_ms"), f"{where}.canary_ms", low=0.0, high=MAX_TIME_MS),
            memory_canary=tuple(_times(data.get("memory_canary", []), f"{where}.memory_canary")),
            other=_extra_keys(data, ("rounds_ms", "pass_rounds", "canary_ms", "memory_canary"), where),
        )


@dataclass(frozen=True)
class BenchRecord:
    """One measured call: the unit of every table, file and verdict."""

    nodeid: str
    name: str | None
    group: str
    timer: str
    rounds_ms: list[float]
    stats: Stats | None
    params: dict[str, Any] = field(default_factory=dict)
    dtype: str | None = None  # the storage precision of the work (the test's policy or its tensors)
    samples_ms: list[float] = field(default_factory=list)  # raw samples: --bench-json only
    sampling: Sampling | None = None
    flops: float | None = None
    bytes: float | None = None
    tflops: float | None = None
    gbps: float | None = None
    roofline: dict | None = None
    accuracy: dict | None = None
    kernels: list[dict] = field(default_factory=list)
    targets: list[dict] = field(default_factory=list)
    telemetry: dict | None = None
    trace: str | None = None
    ncu: dict | None = None
    ab: ABResult | None = None  # --bench-ab: the reference side and the pairs
    function: str | None = None  # the measured function as the test named it (bench(fn)): an unlabelled call's row
    canary_ms: float | None = None  # the canary right before this measurement (compared runs)
    # The fresh processes that measured it too (processes/fresh.py): --bench-confirm's, so a file
    # judged again offline is judged on all of them; --bench-save-processes', so a baseline knows
    # how processes differ
    confirm: tuple[FreshProcess, ...] | None = None
    distributed: dict | None = None  # ranks that measured it; a collective's algbw/busbw (fixture.py)
    extra_info: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict | None = None
    outcome: str | None = None
    other: dict[str, Any] = field(default_factory=dict)  # keys a newer version wrote, kept as they are

    @property
    def id(self) -> str:
        """The pytest node id, plus ``::name`` for a labelled call."""
        return self.nodeid if self.name is None else f"{self.nodeid}::{self.name}"

    @property
    def median_ms(self) -> float | None:
        return self.stats.median_ms if self.stats else None

    def cpu_wait(self) -> tuple[float, float]:
        """(seconds the timing thread waited for a CPU, seconds of timed wall clock: the samples
        and that wait, or where a baseline kept no samples the rounds' wall clock); both 0 without
        sampling data or either."""
        if self.sampling is None:
            return 0.0, 0.0
        waited = self.sampling.run_queue_wait_s
        if self.samples_ms:
            return waited, waited + sum(self.samples_ms) * self.sampling.inner_loops / 1e3
        if self.sampling.others_wall_s > 0:  # (a baseline's record: its rounds, not its samples)
            return waited, max(self.sampling.others_wall_s, waited)
        return 0.0, 0.0

    def others_cpus(self) -> float:
        """How many CPUs' worth of other processes' work ran while the rounds were timed (see
        neighbours); 0 where that is unknown."""
        if self.sampling is None or self.sampling.others_wall_s <= 0:
            return 0.0
        return max(self.sampling.others_cpu_s, 0.0) / self.sampling.others_wall_s

    def own_cpus(self) -> float:
        """How many CPUs' worth of work the benchmark's own process did while its rounds were
        timed (all its threads: about 1 for single-threaded code, up to its threads for code that
        runs several); 0 where that is unknown."""
        if self.sampling is None or self.sampling.others_wall_s <= 0:
            return 0.0
        return self.sampling.own_cpu_s / self.sampling.others_wall_s

    def threads_beyond(self, margin: float) -> float | None:
        """The CPUs this benchmark kept busy where that is ``margin`` CPUs or more past the
        --bench-threads its rounds were taken under (GateConfig.crowded_cpus), else None: threads
        the test sizes itself (a ``workers=`` argument, threadpoolctl, a thread pool of its own),
        which the option cannot limit, so the benchmark stays exposed to a slow or shared CPU as the
        option meant it not to be."""
        threads = self.sampling.threads if self.sampling is not None else 0
        cpus = self.own_cpus()
        return cpus if threads and cpus >= threads + margin else None

    @property
    def timing_gated(self) -> bool:
        """Whether the gate may judge this record's timings (not the Triton interpreter's: they
        time Python running the kernel, not the kernel)."""
        return self.timer not in UNGATED_TIMERS

    @property
    def measured_rounds(self) -> list[float]:
        """Round medians the gate can use (positive)."""
        return [r for r in self.rounds_ms if r > 0]

    def to_json(self, *, samples: bool = True) -> dict:
        data = {
            "nodeid": self.nodeid,
            "name": self.name,
            "group": self.group,
            "params": self.params,
            "dtype": self.dtype,
            "timer": self.timer,
            "rounds_ms": list(self.rounds_ms),
            "stats": self.stats.to_json() if self.stats else None,
            "sampling": self.sampling.to_json() if self.sampling else None,
            "flops": self.flops,
            "bytes": self.bytes,
            "tflops": self.tflops,
            "gbps": self.gbps,
            "roofline": self.roofline,
            "accuracy": self.accuracy,
            "kernels": self.kernels,
            "targets": self.targets,
            "telemetry": self.telemetry,
            "extra_info": self.extra_info,
            "outcome": self.outcome,
            "verdict": self.verdict.to_json() if self.verdict else None,
        }
        for key in ("function", "trace", "ncu", "distributed", "canary_ms"):
            if getattr(self, key) is not None:
                data[key] = getattr(self, key)
        if self.confirm is not None:
            data["confirm"] = [process.to_json() for process in self.confirm]
        if self.ab is not None:
            data["ab"] = self.ab.to_json()
        if samples:
            data["samples_ms"] = list(self.samples_ms)
        data.update(self.other)
        return _finite_or_none(data)

    @classmethod
    def from_json(cls, record_id: str, data: Any, where: str | None = None) -> BenchRecord:
        where = where or f"benchmark {record_id!r}"
        data = _object(data, where)
        nodeid = _text(data.get("nodeid", record_id), f"{where}.nodeid")
        name = _text(data.get("name"), f"{where}.name", nullable=True)
        expected_id = nodeid if name is None else f"{nodeid}::{name}"
        if expected_id != record_id:
            raise _fail(where, f"its nodeid and name make the id {expected_id!r}, not the key {record_id!r}")
        rounds = _times(data.get("rounds_ms", []), f"{where}.rounds_ms")
        samples = _times(data.get("samples_ms", []), f"{where}.samples_ms")
        if data.get("stats") is not None:
            stats = Stats.from_json(data["stats"], f"{where}.stats")
            _check_summary(stats, f"{where}.stats")
        else:  # hand-made or older files: the summary follows from the rounds
            stats = Stats.of(rounds, samples) if rounds else None
        params = _object(data.get("params", {}), f"{where}.params")
        for key, value in params.items():
            if not (value is None or isinstance(value, (str, bool, int)) or _is_number(value)):
                raise _fail(f"{where}.params.{key}", f"is {_short(value)}; expected a number, string or null")
            if _is_number(value):  # the plots and tables read a parameter as a float
                _number(value, f"{where}.params.{key}")
        kernel_list = _list(data.get("kernels", []), f"{where}.kernels")
        kernels = [_kernel(k, f"{where}.kernels[{i}]") for i, k in enumerate(kernel_list)]
        targets = _list(data.get("targets", []), f"{where}.targets")
        for i, target in enumerate(targets):
            _object(target, f"{where}.targets[{i}]")
        verdict = data.get("verdict")
        known = tuple(f.name for f in fields(cls)) + ("samples_ms",)
        return cls(
            nodeid=nodeid,
            name=name,
            group=_text(data.get("group", nodeid), f"{where}.group"),
            timer=_text(data.get("timer"), f"{where}.timer"),
            rounds_ms=rounds,
            stats=stats,
            params=_plain_json(params, f"{where}.params"),
            dtype=_text(data.get("dtype"), f"{where}.dtype", nullable=True),
            samples_ms=samples,
            sampling=Sampling.from_json(data["sampling"], f"{where}.sampling") if data.get("sampling") else None,
            flops=_number(data.get("flops"), f"{where}.flops", low=0.0),
            bytes=_number(data.get("bytes"), f"{where}.bytes", low=0.0),
            tflops=_number(data.get("tflops"), f"{where}.tflops", low=0.0),
            gbps=_number(data.get("gbps"), f"{where}.gbps", low=0.0),
            roofline=_roofline(data.get("roofline"), f"{where}.roofline"),
            accuracy=_json_object(data.get("accuracy"), f"{where}.accuracy", nullable=True),
            kernels=kernels,
            targets=_plain_json(targets, f"{where}.targets"),
            telemetry=_json_object(data.get("telemetry"), f"{where}.telemetry", nullable=True),
            function=_text(data.get("function"), f"{where}.function", nullable=True),
            trace=_text(data.get("trace"), f"{where}.trace", nullable=True),
            ncu=_json_object(data.get("ncu"), f"{where}.ncu", nullable=True),
            ab=ABResult.from_json(data.get("ab"), f"{where}.ab"),
            canary_ms=_number(data.get("canary_ms"), f"{where}.canary_ms", low=0.0, high=MAX_TIME_MS),
            distributed=_distributed(data.get("distributed"), f"{where}.distributed"),
            confirm=_confirm(data.get("confirm"), f"{where}.confirm"),
            extra_info=_json_object(data.get("extra_info", {}), f"{where}.extra_info"),
            verdict=Verdict.from_json(record_id, verdict, f"{where}.verdict") if verdict is not None else None,
            outcome=_text(data.get("outcome"), f"{where}.outcome", nullable=True),
            other=_extra_keys(data, known, where),
        )


def _distributed(data: Any, where: str) -> dict | None:
    data = _json_object(data, where, nullable=True)
    if data is None:
        return None
    _count(data.get("world_size", 1), f"{where}.world_size")
    _text(data.get("backend"), f"{where}.backend", nullable=True)
    for key in ("comm_bytes", "bus_factor", "algbw_gbps", "busbw_gbps"):
        _number(data.get(key), f"{where}.{key}", low=0.0)
    return data


def _confirm(data: Any, where: str) -> tuple[FreshProcess, ...] | None:
    if data is None:
        return None
    return tuple(FreshProcess.from_json(process, f"{where}[{i}]") for i, process in enumerate(_list(data, where)))


def _roofline(data: Any, where: str) -> dict | None:
    data = _object(data, where, nullable=True)
    if data is None:
        return None
    for key in ("peak_tflops", "peak_gbps", "attainable_tflops", "efficiency", "intensity"):
        if data.get(key) is not None:
            _number(data[key], f"{where}.{key}", nullable=False, low=0.0)
    for key in ("bound", "precision", "source"):
        _text(data.get(key), f"{where}.{key}", nullable=True)
    return _plain_json(data, where)


# -- the run --------------------------------------------------------------------------------------
@dataclass
class RunDocument:
    """One run of the suite: what ``--bench-json`` writes and a baseline keeps a history of."""

    benchmarks: dict[str, BenchRecord]
    machine: dict[str, Any] = field(default_factory=dict)
    commit: dict[str, Any] = field(default_factory=dict)
    started: str | None = None
    canary_ms: list[float] = field(default_factory=list)
    # The ids in the order their measurements ended (the file's keys are sorted): history mode's
    # shift for a benchmark comes from those measured before it, so judging the file again needs it.
    measured_order: list[str] = field(default_factory=list)
    other: dict[str, Any] = field(default_factory=dict)

    def to_json(self, *, samples: bool = True) -> dict:
        data = {
            "schema": SCHEMA,
            "machine": self.machine,
            "commit": self.commit,
            "started": self.started,
            "canary_ms": list(self.canary_ms),
            "benchmarks": {i: r.to_json(samples=samples) for i, r in self.benchmarks.items()},
        }
        if self.measured_order:
            data["measured_order"] = list(self.measured_order)
        data.update(self.other)
        return _finite_or_none(data)

    def to_text(self, *, samples: bool = True) -> str:
        """Sorted keys, two-space indent: a diff of a committed file reads well in review."""
        return json.dumps(self.to_json(samples=samples), sort_keys=True, indent=2, allow_nan=False) + "\n"

    def for_baseline(self) -> RunDocument:
        """A copy for a baseline's history: no raw samples, no verdicts, no A/B reference side, and
        kernels reduced to what identifies them, the figures the gate compares and the work it
        notes (KERNEL_WORK; compile times change a committed file at every save without saying
        anything a review needs, and the full mix of every level is the run file's). The fresh
        processes a record was measured in stay (``confirm``: with --bench-save, every benchmark's;
        with_processes reads them as runs of the history)."""
        benchmarks = {
            i: replace(r, samples_ms=[], verdict=None, ab=None, kernels=[_baseline_kernel(k) for k in r.kernels])
            for i, r in self.benchmarks.items()
        }
        return replace(self, benchmarks=benchmarks, measured_order=[])  # (a history's runs are not judged again)

    @classmethod
    def from_json(cls, data: Any, where: str = "the run") -> RunDocument:
        data = _object(data, where)
        if data.get("schema", SCHEMA) != SCHEMA:
            raise _fail(
                where,
                f"has schema {data.get('schema')!r}, this pytest-tesserabench reads schema {SCHEMA}; "
                "use the matching pytest-tesserabench version or re-record it",
            )
        benchmarks = _object(data.get("benchmarks"), f"{where}.benchmarks")
        records = {}
        for record_id, record in benchmarks.items():
            records[record_id] = BenchRecord.from_json(record_id, record, f"{where}, benchmark {record_id!r}")
        canary = _times(data.get("canary_ms", []), f"{where}.canary_ms")
        order = data.get("measured_order") or []  # (absent, or null, in older files and in baselines)
        if order and (not isinstance(order, list) or sorted(map(str, order)) != sorted(records)):
            raise _fail(f"{where}.measured_order", "expected a list of the file's benchmark ids, each once")
        known = ("schema", "benchmarks", "machine", "commit", "started", "canary_ms", "measured_order")
        return cls(
            benchmarks=records,
            machine=_json_object(data.get("machine") or {}, f"{where}.machine"),
            commit=_commit(data.get("commit"), f"{where}.commit"),
            started=_text(data.get("started"), f"{where}.started", nullable=True),
            canary_ms=canary,
            measured_order=list(order),
            other=_extra_keys(data, known, where),
        )


# -- the processes a run was measured in ----------------------------------------------------------
def fresh_records(record: BenchRecord) -> list[BenchRecord]:
    """The fresh processes a run file kept for ``record`` (BenchRecord.confirm), as records."""
    rebuilt = []
    for process in record.confirm or ():
        rounds, passes = list(process.rounds_ms), process.pass_rounds
        sampling = replace(
            record.sampling or Sampling(),
            passes=max(len(passes), 1),
            pass_rounds=passes,
            memory_canary=process.memory_canary,
        )
        rebuilt.append(
            replace(
                record,
                rounds_ms=rounds,
                samples_ms=[],
                stats=Stats.of(rounds) if rounds else None,
                sampling=sampling,
                canary_ms=process.canary_ms,
                confirm=None,
                verdict=None,
            )
        )
    return rebuilt


def fresh_runs(candidate: RunDocument) -> list[RunDocument]:
    """The fresh processes a run file kept, as runs (the k-th process of every benchmark that
    was measured again), to judge the file again as the plugin judged it."""
    fresh = {i: fresh_records(r) for i, r in candidate.benchmarks.items() if r.confirm}
    count = max((len(records) for records in fresh.values()), default=0)
    return [
        replace(
            candidate,
            benchmarks={i: records[k] for i, records in fresh.items() if k < len(records)},
            measured_order=[],
        )
        for k in range(count)
    ]


def with_processes(runs: list[RunDocument]) -> list[RunDocument]:
    """A baseline's runs as the gate reads them: each saved run, then the fresh processes it was
    measured in too (--bench-save-processes), each as a run of its own."""
    return [each for run in runs for each in (run, *fresh_runs(run))]
