"""The ``Bench`` object behind the ``bench`` fixture.

Without ``--bench`` a call is one plain call of the function. With it, the call is measured:
the first call (its result is returned) runs outside the device lock and captures the Triton
kernels it launches; warm-up and timed rounds run under the lock, so pytest-xdist workers never
measure on the same device at once.
"""

from __future__ import annotations

import difflib
import math
import numbers
import sys
import warnings
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from pytest_tesserabench.machine import device as machine
from pytest_tesserabench.machine import threads
from pytest_tesserabench.measure import integrity, sampling
from pytest_tesserabench.measure.instruments import Instruments
from pytest_tesserabench.measure.precision import Precision, policy_of_dtype
from pytest_tesserabench.measure.time_limit import budget_s, time_limit
from pytest_tesserabench.options import Settings
from pytest_tesserabench.record.results import GPU_TIMERS, BenchRecord, DocumentError, Sampling, Stats, check_plain_json

# A test that takes `bench` loads this module without --bench too, and then only calls its function:
# the timers and profiling (3 modules, ~6 ms) load when measuring, accuracy (numpy, ~120 ms) when checking.

# With --bench-ab, the lead's time limit runs this much longer than its served processes' (which
# started the same call a moment before it): a call that hangs on one side is reported by that side.
SERVED_SPEAK_FIRST_S = 30.0

# A kernel run by Triton's interpreter is timed in this many rounds of one call each, however
# large --bench-min-rounds: its timing is shown, never gated.
INTERPRETED_ROUNDS = 3


class BenchUsageError(TypeError):
    """A bench() call written wrongly; the message says how to write it."""


class Bench:
    """Measure functions inside a test: ``bench(fn, *args, flops=, bytes=, name=, **kwargs)``."""

    def __init__(
        self,
        *,
        instruments: Instruments,
        measurer,
        nodeid: str,
        params: dict,
        group: str,
        settings: Settings,
        status=None,  # report.progress.StatusLine on a terminal, else None
        test_name: str = "",
    ):
        self._instruments = instruments
        self._measurer = measurer  # sampling.LocalMeasurer, or a side of --bench-ab
        self._status = status
        self._test_name = test_name or nodeid
        self._nodeid = nodeid
        self._params = params
        self._group = group
        self._settings = settings
        self.enabled = settings.enabled
        self._extra_info: dict[str, Any] = {}
        self.records: dict[str | None, BenchRecord] = {}  # label (None for the unlabelled call) -> record
        self._results: dict[int, str | None] = {}  # id(returned object) -> label, for check_accuracy
        self._names: set[str | None] = set()  # the calls made so far (each needs its own name)

    # -- measuring -------------------------------------------------------------------------
    def __call__(
        self,
        fn: Callable,
        *args,
        flops=None,
        bytes=None,
        name: str | None = None,
        comm_bytes=None,
        bus_factor=None,
        allow=None,
        **kwargs,
    ):
        __tracebackhide__ = True  # a user's error shows in their code, not in the plugin's frames
        # The same usage rules with or without --bench: a test that passes plainly must not fail
        # only once it is measured. A call is counted once its arguments are accepted.
        if not callable(fn):
            raise BenchUsageError(_not_callable(fn))
        if name is not None and (not isinstance(name, str) or not name or "::" in name):
            raise BenchUsageError(f"bench(name={name!r}): a name is a non-empty string without '::'")
        for label, value in (("flops", flops), ("bytes", bytes)):
            if value is not None and (not isinstance(value, numbers.Real) or value < 0 or not math.isfinite(value)):
                raise BenchUsageError(f"bench({label}={value!r}): expected a non-negative number of {label}")
        comm = _communication(comm_bytes, bus_factor)
        try:
            allowed = integrity.parse_allow(allow)
        except ValueError as exc:
            raise BenchUsageError(str(exc)) from None
        if name in self._names:
            raise BenchUsageError(
                f"bench() was already called with name={name!r} in this test; give each measured "
                f"call its own name=, e.g. bench(torch.matmul, a, b, name='torch')"
            )
        self._names.add(name)
        if not self.enabled:
            try:
                return fn(*args, **kwargs)
            except TypeError as exc:
                _typo_hint(exc, kwargs)
                raise
        label = _function_name(fn)
        limit, budget = self._settings.timeout, budget_s(self._settings)
        if limit:  # under A/B the served processes' own limits fire first: they name the side that hung
            limit += budget + (SERVED_SPEAK_FIRST_S if self._settings.ab else 0.0)
        what = f"bench({label}{'' if name is None else f', name={name!r}'})"
        with time_limit(limit, what, self._settings.timeout, budget):
            return self._measure(fn, args, kwargs, flops=flops, nbytes=bytes, name=name, comm=comm, allowed=allowed)

    @property
    def extra_info(self) -> dict[str, Any]:
        """Free-form facts saved with this test's records (a dict of JSON values)."""
        return self._extra_info

    @extra_info.setter
    def extra_info(self, value: dict[str, Any]) -> None:
        __tracebackhide__ = True
        # Refused here, in the test that assigned it: found later, a non-dict broke the session's
        # hooks (every record shares this dict) instead of failing this one test.
        if not isinstance(value, dict):
            raise BenchUsageError(
                f"bench.extra_info = {value!r:.60}: extra_info is a dict; set keys on it instead, "
                f"e.g. bench.extra_info['note'] = {value!r:.60}"
            )
        self._extra_info = value
        # the records made so far share the new dict too
        self.records = {label: replace(record, extra_info=value) for label, record in self.records.items()}

    def json_problem(self) -> str | None:
        """What makes ``extra_info`` unsavable (with or without --bench), or None."""

        try:
            check_plain_json(self.extra_info, f"{self._nodeid}: bench.extra_info")
        except DocumentError as exc:
            return f"{exc}; store numbers, strings, lists or dicts of them"
        return None

    def _measure(self, fn, args, kwargs, *, flops, nbytes, name, comm=None, allowed=frozenset()):
        __tracebackhide__ = True
        from pytest_tesserabench.machine import profiling
        from pytest_tesserabench.measure import timing

        if profiling.under_ncu():
            # The child pytest that --bench-ncu runs under Nsight Compute: one warm call (compiles,
            # autotunes) outside the profiled NVTX range, one call inside it, nothing timed.
            fn(*args, **kwargs)
            with profiling.ncu_region():
                profiling.mark_benchmark()
                return fn(*args, **kwargs)
        instruments = self._instruments
        if self._settings.threads is not None:  # (torch caps what it reads at load to the cores)
            threads.apply_torch(self._settings.threads)
        label = _label(fn, name)
        try:
            with instruments.capture_kernels() as launches:
                result = fn(*args, **kwargs)
        except BaseException as exc:  # the test fails with the function's own exception
            _typo_hint(exc, kwargs)
            _explain(exc, fn, name, "its first call")
            raise
        interpreted = bool(launches) and any(getattr(launch, "interpreted", False) for launch in launches)
        _refuse(label, integrity.check_first_call(fn, result, allowed))
        after_first = integrity.Snapshot(args, kwargs) if "inplace" not in allowed else None
        if {"alias", "cached"} - allowed and not interpreted:  # (interpreted timings are never gated)
            _refuse(label, integrity.check_perturbed(fn, args, kwargs, result, allowed))
        call = _bind(fn, args, kwargs)
        timer = timing.make_timer(self._settings.timer, call, args, kwargs, interpreted=interpreted, result=result)
        settings = self._settings
        if interpreted:
            # The interpreter is ~1000x slower than the device it emulates and its timings are never
            # gated: a few rounds of one call show it works; a budget would buy nothing the gate
            # uses (on a GPU-less runner the static figures are what it judges, and they need none).
            rounds = min(settings.min_rounds, INTERPRETED_ROUNDS)
            budget = sampling.Budget(max_time=0.0, min_rounds=rounds, warmup=0.0, target_ci=settings.target_ci)
        else:
            budget = sampling.Budget(
                max_time=settings.max_time,
                min_rounds=settings.min_rounds,
                warmup=settings.warmup,
                target_ci=settings.target_ci,
            )
        kept = getattr(self._measurer, "keeps_record", True)  # (an earlier pass's record is not: passes.py)
        status = self._status
        on_round = status.start(self._test_name + ("" if name is None else f" · {name}")) if status else None
        try:
            with instruments.measurement_lock(), instruments.telemetry(timer) as telemetry:
                # the machine's speed right now (when comparing), where this call's record is kept
                canary = instruments.local_canary() if kept else None
                measurement, ab = self._measurer.measure(
                    timer, budget, name=name, threshold=self._settings.threshold, on_round=on_round,
                    ranks=instruments.ranks,
                )  # fmt: skip
                telemetry.calls = measurement.calls
        except BaseException as exc:
            _explain(exc, fn, name, "measurement (it passed its first call)")
            raise
        finally:
            if status:
                status.stop()
        if after_first is not None and after_first.complete:
            changed = after_first.changed()
            if changed:
                _refuse(
                    label,
                    f"the calls change {', '.join(changed)} in place: after the timed calls it differs from what "
                    "the first call left, so each timed call worked on different data. Give the calls inputs they "
                    "do not change, or pass allow=('inplace',) for a kernel that is in place by design",
                )
        if "async" not in allowed and timer.name in GPU_TIMERS:
            _refuse(label, integrity.check_async(call, timer.torch, timer.device))
        record = self._record(name, measurement, flops, nbytes, _storage_of(self._params, args, kwargs))
        trace = None
        if self._settings.trace_dir is not None and kept:
            path = profiling.trace_path(self._settings.trace_dir, record.id)
            trace = str(profiling.trace_call(fn, args, kwargs, path))
        self.records[name] = replace(
            record,
            function=_function_name(fn),
            ab=ab,
            canary_ms=canary,
            distributed=_distributed_block(instruments.ranks, comm, record.median_ms),
            telemetry=telemetry.result,
            kernels=instruments.analyse_kernels(launches, record_id=record.id),
            trace=trace,
        )
        self._results[id(result)] = name
        return result

    def _record(self, name, m, flops, nbytes, storage: str | None) -> BenchRecord:
        # No rounds: a reference-side call the candidate never paired (--bench-ab).
        stats = Stats.of(m.rounds_ms, m.samples_ms, noisy=m.noisy) if m.rounds_ms else None
        median_s = stats.median_ms / 1e3 if stats else 0.0
        return BenchRecord(
            nodeid=self._nodeid,
            name=name,
            group=self._group,
            params=self._params,
            dtype=storage,
            timer=m.timer,
            rounds_ms=m.rounds_ms,
            samples_ms=m.samples_ms,
            stats=stats,
            sampling=Sampling(
                warmup_calls=m.warmup_calls,
                inner_loops=m.inner_loops,
                samples_per_round=m.samples_per_round,
                stop=m.stop_reason,
                elapsed_s=m.elapsed_s,
                run_queue_wait_s=m.run_queue_wait_s,
                others_cpu_s=m.others_cpu_s,
                others_wall_s=m.others_wall_s,
                own_cpu_s=m.own_cpu_s,
                passes=m.passes,
                pass_rounds=tuple(m.pass_rounds),
                threads=self._settings.threads or 0,
                pool_canary_ms=tuple(m.pool_canary_ms),
                blas_canary_ms=tuple(m.blas_canary_ms),
                memory_canary=tuple(m.memory_canary),
            ),
            flops=flops,
            bytes=nbytes,
            tflops=flops / median_s / 1e12 if flops and median_s > 0 else None,
            gbps=nbytes / median_s / 1e9 if nbytes and median_s > 0 else None,
            roofline=self._instruments.roofline(
                timer=m.timer, flops=flops, nbytes=nbytes, median_ms=stats.median_ms, storage=storage
            )
            if stats
            else None,
            extra_info=self.extra_info,  # the same dict: keys added later in the test still land
        )

    # -- checks ------------------------------------------------------------------------------
    def check_accuracy(self, actual, expected, precision: Precision | str) -> dict:
        """Assert ``actual`` is within the policy's tolerances of ``expected``; record the error.

        Runs with or without ``--bench``: a benchmark doubles as a correctness test.
        """
        __tracebackhide__ = True  # a failed check shows at the test's line, not in the plugin's frames
        from pytest_tesserabench.measure import accuracy

        result = accuracy.compare(actual, expected, precision)
        label = self._results.get(id(actual), next(iter(self.records), None))
        if label in self.records:
            error = {k: result[k] for k in ("max_abs", "max_rel", "mismatched", "precision")}
            self.records[label] = replace(self.records[label], accuracy=error)
            tf32 = _tf32_kernels(self.records[label], precision)
            if tf32:
                warnings.warn(
                    pytest.PytestWarning(
                        f"check_accuracy({precision!s}): {', '.join(tf32)} multiplies fp32 inputs on TF32 tensor cores "
                        "(tl.dot's default input_precision), whose 10-bit mantissa does not hold fp32's tolerance on a "
                        "GPU (Triton's interpreter computes in fp32, so the check passes there). Pass "
                        "input_precision='ieee' (or 'tf32x3') to tl.dot, or check against 'tf32'"
                    ),
                    stacklevel=2,
                )
        if not result["ok"]:
            raise accuracy.AccuracyError(accuracy.failure_message(result))
        return result

    def require(self, at_least: float, relative_to: str, *, name: str | None = None, metric: str = "speed") -> None:
        """A performance target, checked only where both calls were timed on a GPU.

        metric "speed": time(relative_to) / time(name) >= at_least (name None: the first call);
        "gbps" / "tflops": throughput(name) / throughput(relative_to) >= at_least.
        """
        if metric not in ("speed", "gbps", "tflops"):
            raise BenchUsageError(f"bench.require(metric={metric!r}): choose speed, gbps or tflops")
        if not self.enabled:
            return
        for label in (name, relative_to):
            if label not in self.records:
                raise BenchUsageError(
                    f"bench.require(): no measured call named {label!r} in this test; measure it first "
                    f"with bench(fn, ..., name={label!r})"
                )
        mine, theirs = self.records[name], self.records[relative_to]
        if metric == "speed":
            ratio = theirs.median_ms / mine.median_ms
        else:
            if not getattr(mine, metric) or not getattr(theirs, metric):
                raise BenchUsageError(f"bench.require(metric={metric!r}) needs flops=/bytes= on both calls")
            ratio = getattr(mine, metric) / getattr(theirs, metric)
        checked = mine.timer in GPU_TIMERS and theirs.timer in GPU_TIMERS
        target = {
            "relative_to": relative_to,
            "metric": metric,
            "at_least": at_least,
            "ratio": ratio,
            "checked": checked,
            "met": ratio >= at_least,
        }
        self.records[name] = replace(mine, targets=[*mine.targets, target])
        if checked and ratio < at_least:
            pytest.fail(
                f"performance target missed: {metric} of {mine.id} is {ratio:.3f}x that of "
                f"{relative_to!r}, below the required {at_least}x",
                pytrace=False,
            )

    @property
    def threshold(self) -> float:
        """The smallest slowdown worth failing this test for (option, ini, or its marker)."""
        return self._settings.threshold

    @property
    def on_gpu(self) -> bool:
        return machine.cuda_capability() is not None


BENCH_KEYWORDS = ("flops", "bytes", "name", "comm_bytes", "bus_factor")


def _typo_hint(exc: BaseException, kwargs: dict) -> None:
    """bench(fn, flop=...) passes ``flop`` on to fn, which refuses it: say which of bench's own
    keywords was probably meant."""

    if not isinstance(exc, TypeError) or not hasattr(exc, "add_note"):
        return
    for key in kwargs:
        close = difflib.get_close_matches(key, BENCH_KEYWORDS, n=1, cutoff=0.75)
        if close and f"'{key}'" in str(exc):
            exc.add_note(
                f"tesserabench: {key}= was passed on to the function; did you mean bench(..., {close[0]}=...)?"
            )


def _function_name(fn) -> str:
    """How a user calls ``fn``: its qualified name, or for a builtin bound on a private class
    (torch's ``_VariableFunctionsClass.mul``) its module's (``torch.mul``)."""
    qualname = getattr(fn, "__qualname__", None)
    if qualname is None:
        return repr(fn)
    if qualname.startswith("_") and "." in qualname and getattr(fn, "__module__", None):
        return f"{fn.__module__}.{getattr(fn, '__name__', qualname.rsplit('.', 1)[-1])}"
    return qualname


def _label(fn, name: str | None) -> str:
    return f"bench({_function_name(fn)}{'' if name is None else f', name={name!r}'})"


def _refuse(label: str, problem: str | None) -> None:
    """Fail the test when a measurement cannot be trusted (measure/integrity.py says why)."""
    __tracebackhide__ = True
    if problem:
        pytest.fail(f"{label}: {problem}", pytrace=False)


def _tf32_kernels(record: BenchRecord, precision) -> list[str]:
    """The kernels of ``record`` whose static analysis found a tl.dot of fp32 inputs on TF32
    tensor cores, where ``precision`` asks for fp32's tolerance; else none."""
    try:
        storage = Precision.parse(precision).storage
    except ValueError:  # (accuracy.compare said so already)
        return []
    if storage != "fp32":
        return []
    found = [k.get("name", "a kernel") for k in record.kernels or () if (k.get("ttir") or {}).get("tf32_dot")]
    return list(dict.fromkeys(found))


def _explain(exc: BaseException, fn, name: str | None, when: str) -> None:
    """Add a note to an exception raised by the measured function: which call, and that nothing
    was recorded; for running out of device memory, what to do."""
    if not hasattr(exc, "add_note") or isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return
    label = _function_name(fn)
    exc.add_note(
        f"tesserabench: raised by {label}{'' if name is None else f' (name={name!r})'} during "
        f"{when}; nothing was recorded for this benchmark"
    )
    if "active drivers" in str(exc):  # (Triton's words for no GPU driver at a kernel's launch)
        exc.add_note(
            "tesserabench: Triton found no GPU driver here; without a GPU, its kernels run in the "
            "interpreter with --bench-interpret=auto (the default) or always, not never"
        )
    if "OutOfMemory" in type(exc).__name__:
        exc.add_note(
            "tesserabench: the device ran out of memory: measure a smaller size, or free tensors "
            "the test keeps alive (the L2 flush buffer needs twice the L2 size on top)"
        )


def _communication(comm_bytes, bus_factor) -> tuple[float, float] | None:
    """(message bytes, bus factor) of a communication benchmark, checked; None for any other."""
    for label, value in (("comm_bytes", comm_bytes), ("bus_factor", bus_factor)):
        if value is not None and (not isinstance(value, numbers.Real) or value < 0 or not math.isfinite(value)):
            raise BenchUsageError(f"bench({label}={value!r}): expected a non-negative number")
    if comm_bytes is None:
        if bus_factor is not None:
            raise BenchUsageError(
                "bench(bus_factor=...) needs comm_bytes=, the message size S its bandwidths divide by, e.g. "
                "bench(op, comm_bytes=op.nbytes, bus_factor=op.bus_factor)"
            )
        return None
    return float(comm_bytes), 1.0 if bus_factor is None else float(bus_factor)


def _distributed_block(ranks, comm: tuple[float, float] | None, median_ms: float | None) -> dict | None:
    """The record's ``distributed`` block: the ranks that measured it and, for a collective, its
    algorithm and bus bandwidth as nccl-tests defines them (algbw = S / t, busbw = algbw x factor)."""
    if ranks.size == 1 and comm is None:  # one process, no communication: nothing to say
        return None
    block = {"world_size": ranks.size, "backend": ranks.backend, "time": "slowest rank"}
    if comm is not None:
        comm_bytes, factor = comm
        algbw = comm_bytes / (median_ms / 1e3) / 1e9 if median_ms else None
        block.update(
            comm_bytes=comm_bytes,
            bus_factor=factor,
            algbw_gbps=algbw,
            busbw_gbps=None if algbw is None else algbw * factor,
        )
    return block


def _storage_of(params: dict, args: tuple, kwargs: dict) -> str | None:
    """The precision a roofline is drawn for: the test's policy, else the first float tensor's or
    numpy array's dtype (as a policy names it: fp32, bf16, fp64...; else numpy's name: complex64)."""
    if "precision" in params:
        return str(params["precision"]).split("@")[0]

    torch, numpy = sys.modules.get("torch"), sys.modules.get("numpy")  # (never imported here for this)
    for value in (*args, *kwargs.values()):
        if torch is not None and isinstance(value, torch.Tensor) and value.is_floating_point():
            name = str(value.dtype).removeprefix("torch.")
        elif numpy is not None and isinstance(value, numpy.ndarray) and numpy.issubdtype(value.dtype, numpy.floating):
            name = str(value.dtype)
        else:
            continue
        return policy_of_dtype(name) or name  # as a marker names it, so the two read alike
    return None


def _bind(fn, args, kwargs) -> Callable[[], Any]:
    if kwargs:
        return lambda: fn(*args, **kwargs)
    if args:
        return lambda: fn(*args)
    return fn


def _not_callable(fn) -> str:
    return (
        f"bench() expects a function to measure as its first argument, got {type(fn).__name__} "
        f"{fn!r:.60}; write bench(fn, *args), not bench(fn(*args))"
    )
