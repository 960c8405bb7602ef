"""The pytest hooks, and nothing else: options, markers, parametrization, the fixture, reports.

All state lives in the ``BenchSession`` on ``config.stash``. Importing this module stays cheap
(no numpy, scipy, torch or triton): ``pytest`` without ``--bench`` must cost next to nothing.
"""

from __future__ import annotations

import itertools
import warnings
from pathlib import Path

import pytest

from pytest_tesserabench import options
from pytest_tesserabench.precision import Precision, PrecisionError

SESSION_KEY = pytest.StashKey["BenchSession"]()
BENCH_KEY = pytest.StashKey["Bench"]()
REPORT_ATTR = "tesserabench"  # extra TestReport attribute; pytest-xdist carries it to the controller

MARKERS = (
    "bench_sizes(**axes) or bench_sizes([{...}, ...]): parametrize a benchmark over sizes; "
    "the cartesian product of the axes, or explicit points",
    "bench_precision(*policies): parametrize the argument `precision` with Precision policies, "
    "grammar <storage>[@accum(<accum>)], e.g. 'bf16', 'fp8_e4m3@accum(fp32)'",
    "bench(group=, max_time=, min_rounds=, warmup=, target_ci=, threshold=, timer=): per-test measurement overrides",
)


# -- options ------------------------------------------------------------------------------------
def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("tesserabench", "kernel benchmarking (pytest-tesserabench)")
    for opt in options.OPTIONS:
        if opt.parse is None:
            group.addoption(opt.flag, action="store_true", default=None, dest=opt.dest, help=opt.help)
        else:
            group.addoption(opt.flag, action="store", default=None, dest=opt.dest, metavar=opt.metavar, help=opt.help)
        parser.addini(opt.ini, opt.help, default="")
    for opt in options.INI_ONLY:
        parser.addini(opt.ini, opt.help, default="")


def pytest_configure(config: pytest.Config) -> None:
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    cli = {opt.dest: config.getoption(opt.dest) for opt in options.OPTIONS}
    ini = {opt.ini: config.getini(opt.ini) for opt in options.OPTIONS + options.INI_ONLY}
    try:
        settings = options.resolve(cli, ini, Path(config.rootpath))
    except options.SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None

    from pytest_tesserabench.session import BenchSession

    cache_dir = None
    if getattr(config, "cache", None) is not None:  # absent under -p no:cacheprovider
        cache_dir = Path(config.cache.mkdir("tesserabench"))
    state = BenchSession(
        settings, rootdir=Path(config.rootpath), cache_dir=cache_dir, is_worker=hasattr(config, "workerinput")
    )
    config.stash[SESSION_KEY] = state
    config.pluginmanager.register(SessionHooks(state), "tesserabench-session")
    if settings.enabled:
        from pytest_tesserabench.baseline import BaselineError

        try:
            problem = state.check_baselines()
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        if problem and not state.is_worker:
            config.issue_config_time_warning(pytest.PytestWarning(problem), stacklevel=2)
    if settings.ncu and not state.is_worker:
        from pytest_tesserabench import profiling

        reason = profiling.ncu_skip_reason()
        if reason:
            config.issue_config_time_warning(
                pytest.PytestWarning(f"--bench-ncu: hardware counters skipped: {reason}"), stacklevel=2
            )


def _kernel_section(records: dict) -> list[str]:
    from pytest_tesserabench.inspect import format_kernel_lines

    lines = []
    for record_id, record in records.items():
        if record.get("kernels"):
            lines.append(record_id)
            lines.extend(f"  {line}" for line in format_kernel_lines(record["kernels"]))
    return lines


def _session(config: pytest.Config):
    return config.stash[SESSION_KEY]


# -- markers -> parameters ----------------------------------------------------------------------
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    where = metafunc.definition.nodeid
    sizes = metafunc.definition.get_closest_marker("bench_sizes")
    if sizes is not None:
        names, points = _size_points(sizes, where)
        missing = [n for n in names if n not in metafunc.fixturenames]
        if missing:
            pytest.fail(
                f"@pytest.mark.bench_sizes on {where}: {', '.join(missing)} "
                f"{'is not an argument' if len(missing) == 1 else 'are not arguments'} of the test; "
                f"add {'it' if len(missing) == 1 else 'them'} to its signature or remove from the marker",
                pytrace=False,
            )
        ids = ["-".join(f"{n}={v}" for n, v in zip(names, point)) for point in points]
        metafunc.parametrize(names, points, ids=ids)

    precision = metafunc.definition.get_closest_marker("bench_precision")
    if precision is not None:
        if "precision" not in metafunc.fixturenames:
            pytest.fail(
                f"@pytest.mark.bench_precision on {where}: the test has no `precision` argument; "
                f"add one to its signature",
                pytrace=False,
            )
        if not precision.args:
            pytest.fail(
                f"@pytest.mark.bench_precision on {where}: name at least one policy, e.g. 'bf16'", pytrace=False
            )
        try:
            policies = [Precision.parse(p) for p in precision.args]
        except PrecisionError as exc:
            pytest.fail(f"@pytest.mark.bench_precision on {where}: {exc}", pytrace=False)
        metafunc.parametrize("precision", policies, ids=[str(p) for p in policies])


def _size_points(marker: pytest.Mark, where: str) -> tuple[list[str], list[tuple]]:
    if marker.args and marker.kwargs:
        pytest.fail(
            f"@pytest.mark.bench_sizes on {where}: give either axes (M=[...], N=[...]) or a list "
            f"of points ([{{'M': 1, 'N': 2}}, ...]), not both",
            pytrace=False,
        )
    if marker.kwargs:
        names = list(marker.kwargs)
        axes = []
        for name in names:
            values = marker.kwargs[name]
            values = list(values) if isinstance(values, (list, tuple, range)) else [values]
            if not values:
                pytest.fail(f"@pytest.mark.bench_sizes on {where}: axis {name} has no values", pytrace=False)
            axes.append(values)
        return names, list(itertools.product(*axes))
    if (
        len(marker.args) == 1
        and isinstance(marker.args[0], (list, tuple))
        and marker.args[0]
        and all(isinstance(p, dict) for p in marker.args[0])
    ):
        points = marker.args[0]
        names = list(points[0])
        for i, point in enumerate(points):
            if set(point) != set(names):
                pytest.fail(
                    f"@pytest.mark.bench_sizes on {where}: point {i} has keys {sorted(point)}, "
                    f"point 0 has {sorted(names)}; every point needs the same keys",
                    pytrace=False,
                )
        return names, [tuple(p[n] for n in names) for p in points]
    pytest.fail(
        f"@pytest.mark.bench_sizes on {where}: expected axes like bench_sizes(M=[1024, 4096]) "
        f"or points like bench_sizes([{{'M': 1024}}, ...]), got {marker.args!r}",
        pytrace=False,
    )


def pytest_runtest_setup(item: pytest.Item) -> None:
    callspec = getattr(item, "callspec", None)
    policy = callspec.params.get("precision") if callspec is not None else None
    if isinstance(policy, Precision) and policy.min_capability > (0, 0):
        from pytest_tesserabench import machine

        reason = policy.unsupported_reason(machine.cuda_capability())
        if reason:
            pytest.skip(reason)


# -- the fixture --------------------------------------------------------------------------------
@pytest.fixture
def bench(request: pytest.FixtureRequest):
    """Measure a function: ``bench(fn, *args, flops=None, bytes=None, name=None, **kwargs)``.

    Without ``--bench`` it calls ``fn`` once and returns the result.
    """
    from pytest_tesserabench.fixture import Bench

    session = _session(request.config)
    item = request.node
    settings, group = session.settings, None
    marker = item.get_closest_marker("bench")
    if marker is not None:
        if marker.args:
            pytest.fail(
                f"@pytest.mark.bench on {item.nodeid}: takes keyword arguments only, e.g. bench(max_time=2)",
                pytrace=False,
            )
        try:
            settings, group = options.apply_marker(settings, marker.kwargs, item.nodeid)
        except options.SettingsError as exc:
            pytest.fail(str(exc), pytrace=False)
    callspec = getattr(item, "callspec", None)
    params = {k: (str(v) if isinstance(v, Precision) else v) for k, v in callspec.params.items()} if callspec else {}
    params = {k: v if isinstance(v, (int, float, str, bool, type(None))) else repr(v) for k, v in params.items()}
    module = item.nodeid.split("::", 1)[0]
    fixture = Bench(
        session=session,
        nodeid=item.nodeid,
        params=params,
        group=group or f"{module}::{getattr(item, 'originalname', item.name)}",
        settings=settings,
    )
    item.stash[BENCH_KEY] = fixture
    return fixture


# -- outcomes -----------------------------------------------------------------------------------
def pytest_collection_finish(session: pytest.Session) -> None:
    _session(session.config).count_compared([item.nodeid for item in session.items])


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    result = yield  # the test body raised: its own failure stands, nothing is judged
    fixture = item.stash.get(BENCH_KEY, None)
    state = _session(item.config)
    if fixture is None or not fixture.records or state.baseline is None:
        return result
    verdicts = state.judge(list(fixture.records.values()), fixture.threshold)
    failures = []
    for record_id, verdict in verdicts.items():
        fixture.records[_label(record_id, item.nodeid)]["verdict"] = verdict_dict(verdict)
        if verdict.failed:
            failures.append(f"{record_id}: {verdict.line()}")
        elif verdict.status == "INCONCLUSIVE":
            warnings.warn(
                pytest.PytestWarning(f"{record_id}: {verdict.line()}. To settle it: {verdict.hint()}"), stacklevel=2
            )
    if failures:
        pytest.fail("\n".join(failures), pytrace=False)
    return result


def _label(record_id: str, nodeid: str) -> str | None:
    return None if record_id == nodeid else record_id[len(nodeid) + 2 :]


def verdict_dict(verdict) -> dict:
    """A Verdict as plain data: it travels to the xdist controller inside the report."""
    import dataclasses

    data = dataclasses.asdict(verdict)
    data["ci"] = list(verdict.ci) if verdict.ci else None
    data["reasons"], data["notes"] = list(verdict.reasons), list(verdict.notes)
    return data


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    report = yield
    if call.when == "call":
        fixture = item.stash.get(BENCH_KEY, None)
        if fixture is not None and fixture.records:
            records = list(fixture.records.values())
            state = _session(item.config)
            if state.settings.ncu and report.passed:
                from pytest_tesserabench import profiling

                # Re-run this test alone under Nsight Compute; its counters describe the test's
                # first measured call (the kernel under test).
                records[0]["ncu"] = profiling.run_ncu(
                    item.nodeid, ["--bench", f"--rootdir={item.config.rootpath}"], cwd=item.config.invocation_params.dir
                )
            setattr(report, REPORT_ATTR, records)
    return report


class SessionHooks:
    """Hooks that need the session's state, registered as a plugin object per pytest session
    (as pytest-xdist and the cacheprovider do) instead of reaching for module globals."""

    def __init__(self, state):
        self.state = state

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        state = self.state
        # The canary: timed at the start and end of every measuring run, on the controller (or on
        # a worker whose comparisons it normalises), under the device lock like any measurement.
        if state.settings.enabled and (
            not state.is_worker or (state.settings.canary_normalize and state.baseline is not None)
        ):
            state.time_canary()

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the xdist controller for every worker's report, and in-process without xdist.
        if report.when == "call":
            self.state.run_nodeids.add(report.nodeid)
        records = getattr(report, REPORT_ATTR, None)
        if not records or report.when != "call":
            return
        for record in records:
            record["outcome"] = report.outcome
        self.state.add_records(records)

    def pytest_terminal_summary(self, terminalreporter, config: pytest.Config) -> None:
        if self.state.is_worker or not self.state.records:
            return
        from pytest_tesserabench.report.terminal import render_summary

        state = self.state
        width = config.get_terminal_writer().fullwidth
        terminalreporter.write_sep("=", "tesserabench")
        terminalreporter.write(
            render_summary(
                state.records, width=width, color=terminalreporter.hasmarkup, quiet=config.get_verbosity() < 0
            )
        )
        kernel_lines = _kernel_section(state.records)
        if kernel_lines and config.get_verbosity() >= 0:
            terminalreporter.write_sep("-", "static kernel analysis")
            for line in kernel_lines:
                terminalreporter.write_line(line)
        if state.baseline is not None:
            from pytest_tesserabench.gate import canary_ratio
            from pytest_tesserabench.report.comparison import render_comparison, software_differences

            terminalreporter.write_sep("-", f"compared with baseline {state.settings.compare} ({state.baseline_path})")
            runs = state.baseline["runs"]
            terminalreporter.write(
                render_comparison(
                    state.comparison_verdicts(),
                    version_diffs=software_differences(state.machine_info, runs[-1].get("machine")),
                    canary_ratio=canary_ratio([{"canary_ms": state.canary_ms}], runs),
                    width=width,
                    color=terminalreporter.hasmarkup,
                )
            )
            not_run = state.not_run_count()
            if not_run:
                terminalreporter.write_line(
                    f"{not_run} baseline benchmark(s) belong to tests that did not run "
                    f"in this session (deselected or removed)"
                )

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        state = self.state
        if state.is_worker or not state.settings.enabled:
            return
        if state.records:
            state.time_canary()
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")

        def error(message: str) -> None:
            if reporter is not None:
                reporter.write_line(f"ERROR: {message}", red=True)
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

        if state.settings.json_path is not None:
            from pytest_tesserabench.report.json_report import write_json

            try:
                write_json(state.settings.json_path, state.run_document(with_samples=True))
            except (OSError, ValueError) as exc:
                error(f"--bench-json={state.settings.json_path}: cannot write the results: {exc}")
        if state.settings.save:
            from pytest_tesserabench.baseline import BaselineError

            try:
                path, saved = state.save_baseline()
            except (BaselineError, OSError) as exc:
                error(f"--bench-save={state.settings.save}: nothing saved: {exc}")
            else:
                if reporter is not None:
                    skipped = len(state.records) - saved
                    reporter.write_line(
                        f"tesserabench: saved {saved} benchmark(s) to {path}"
                        + (f" ({skipped} from failed tests left out)" if skipped else "")
                        if saved
                        else f"tesserabench: nothing saved to {path}: no passing benchmark"
                    )
