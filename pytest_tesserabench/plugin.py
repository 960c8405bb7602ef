"""The pytest hooks, and nothing else: options, markers, parametrization, the fixture, reports.

Module-level hooks are the stateless ones (options, markers, the fixture); the hooks that need
the session's state are methods of plugin objects registered per session as pytest-xdist and the
cacheprovider do: ``SessionHooks`` always, and each mode's own only when it is on (passes,
fresh processes, A/B, torchrun: docs/architecture.md). All state lives in the ``BenchSession``
on ``config.stash``; hook bodies only move records and call it. Importing this module stays
cheap (no numpy, scipy, torch or triton): ``pytest`` without ``--bench`` must cost next to
nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_tesserabench import markers, options
from pytest_tesserabench.distributed import launch
from pytest_tesserabench.history.baseline import BaselineError
from pytest_tesserabench.machine import device as machine
from pytest_tesserabench.machine import interpret, profiling, worker_gpus
from pytest_tesserabench.measure import passes
from pytest_tesserabench.measure.precision import Precision
from pytest_tesserabench.measure.sampling import LocalMeasurer
from pytest_tesserabench.record.held_lock import LockWaitTimeout
from pytest_tesserabench.record.results import BenchRecord
from pytest_tesserabench.report.safe_text import printable  # (unicodedata only)
from pytest_tesserabench.session import BenchSession

SESSION_KEY = pytest.StashKey["BenchSession"]()
BENCH_KEY = pytest.StashKey["Bench"]()
INTERPRET_KEY = pytest.StashKey["Switch"]()
WORKER_GPUS_KEY = pytest.StashKey["dict[str, str]"]()  # xdist worker id -> the GPU it was given
FRESH_KEY = pytest.StashKey["Fresh"]()  # a test's fresh processes for the gate (processes/hooks.py)
WORKERINPUT_GPU = "tesserabench_gpu"  # a worker's own GPU, in its workerinput
REPORT_ATTR = "tesserabench"  # extra TestReport attribute; pytest-xdist carries it to the controller


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
    serve = options.AB_SERVE
    group.addoption(serve.flag, action="store", default=None, dest=serve.dest, help=argparse.SUPPRESS)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config, parser: pytest.Parser, args: list[str]) -> None:
    # The first hook a plugin gets, before any conftest or test module imports a kernel:
    # @triton.jit reads TRITON_INTERPRET when a kernel is decorated.
    mode = getattr(early_config.known_args_namespace, "bench_interpret", None) or _ini(early_config, "bench_interpret")
    if mode not in options.INTERPRET_MODES:
        mode = "auto"  # a bad value becomes a usage error in pytest_configure
    early_config.stash[INTERPRET_KEY] = interpret.apply(mode)


def _ini(config: pytest.Config, name: str) -> str:
    try:
        return str(config.getini(name) or "")
    except ValueError:
        return ""


def pytest_configure(config: pytest.Config) -> None:
    for line in markers.MARKERS:
        config.addinivalue_line("markers", line)
    cli = {opt.dest: config.getoption(opt.dest) for opt in (*options.OPTIONS, options.AB_SERVE)}
    ini = {opt.ini: config.getini(opt.ini) for opt in options.OPTIONS + options.INI_ONLY}
    try:
        settings = options.resolve(cli, ini, Path(config.rootpath))
    except options.SettingsError as exc:
        raise pytest.UsageError(str(exc)) from None

    if settings.enabled:  # before the tests allocate: every measuring process in one allocator state
        from pytest_tesserabench.machine import allocator

        allocator.fix_thresholds()
    if settings.enabled and settings.threads is not None:  # before the tests load the libraries
        from pytest_tesserabench.machine import threads

        threads.apply_environment(settings.threads)
    if getattr(config, "cache", None) is not None:
        cache_dir = Path(config.cache.mkdir("tesserabench"))
    else:  # -p no:cacheprovider: the analysis cache and A/B worktrees still need a home
        cache_dir = _fallback_cache_dir(Path(config.rootpath))
    state = BenchSession(
        settings,
        rootdir=Path(config.rootpath),
        cache_dir=cache_dir,
        is_worker=_is_worker(config),
        gpu=getattr(config, "workerinput", {}).get(WORKERINPUT_GPU),  # an xdist worker given its own GPU
    )
    config.stash[SESSION_KEY] = state
    state.instruments.say = _terminal_line(config)
    _choose_measurer(config, state, cache_dir)
    if launch.LAUNCH_VARIABLES[0] in os.environ:  # a torchrun rank: only then import the distributed hooks
        from pytest_tesserabench.distributed import hooks as distributed_hooks

        distributed_hooks.attach(config, state)
    hooks = SessionHooks(state, config)
    config.pluginmanager.register(hooks, SessionHooks.NAME)
    for warning in hooks.check_before_measuring():
        config.issue_config_time_warning(pytest.PytestWarning(warning), stacklevel=2)
    saves_processes = settings.save is not None and settings.save_processes > 0
    if (saves_processes or state.comparison is not None) and state.ab is None:
        from pytest_tesserabench.processes.hooks import FreshProcessHooks  # (before the passes' hooks: outside theirs)

        config.pluginmanager.register(FreshProcessHooks(state, BENCH_KEY, FRESH_KEY), FreshProcessHooks.NAME)
    if state.passes is not None:  # (known once the baselines are open: see _one_pass_when_no_timing_is_compared)
        from pytest_tesserabench.passes_hooks import PassesHooks

        config.pluginmanager.register(PassesHooks(state, BENCH_KEY), PassesHooks.NAME)
    if settings.enabled and not state.is_worker:
        from pytest_tesserabench.report.progress import StatusLine

        state.status = StatusLine.for_terminal(config, quiet=config.get_verbosity() < 0)


def pytest_unconfigure(config: pytest.Config) -> None:
    # Module level: runs even when pytest_configure stopped on a usage error.
    switch = config.stash.get(INTERPRET_KEY, None)
    if switch is not None:
        interpret.restore(switch)
        del config.stash[INTERPRET_KEY]


def _terminal_line(config: pytest.Config):
    """A line for the user while a test runs: pytest captures the test's output, so the capture
    is suspended for it and it goes through the terminal reporter, on a line of its own."""

    def say(line: str) -> None:
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        capture = config.pluginmanager.get_plugin("capturemanager")
        if reporter is None:
            print(line, file=sys.stderr, flush=True)
            return
        with capture.global_and_fixture_disabled() if capture is not None else contextlib.nullcontext():
            if reporter.config.get_terminal_writer().width_of_current_line:
                reporter.write_line("")
            reporter.write_line(line, yellow=True)

    return say


def _fallback_cache_dir(rootdir: Path) -> Path:
    import hashlib
    import tempfile

    digest = hashlib.sha256(str(rootdir.resolve()).encode()).hexdigest()[:16]
    folder = Path(tempfile.gettempdir()) / f"tesserabench-cache-{os.getuid()}" / digest
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _choose_measurer(config: pytest.Config, state, cache_dir: Path | None) -> None:
    """How bench() measures in this process: alone, as the candidate of --bench-ab, or as its
    reference side (the pytest the candidate started in REF's worktree)."""
    settings = state.settings
    if settings.ab_serve:
        from pytest_tesserabench.processes.serve import ServeLoop

        state.measurer = ServeLoop(settings.ab_serve, BENCH_KEY)
        config.pluginmanager.register(state.measurer, ServeLoop.NAME)
    elif settings.ab:
        from pytest_tesserabench.ab.lead import ABLead

        if launch.LAUNCH_VARIABLES[0] in os.environ:
            raise pytest.UsageError(
                f"--bench-ab={settings.ab} under torchrun: A/B runs one process per side; compare collectives "
                "against a recorded baseline instead (--bench-compare)"
            )
        from pytest_tesserabench.processes.served import ProcessError

        try:
            state.ab = state.measurer = ABLead.open(settings, rootdir=Path(config.rootpath), cache_dir=cache_dir)
        except ProcessError as exc:
            raise pytest.UsageError(str(exc)) from None
        state.reference = state.ab.reference
        from pytest_tesserabench.processes.hooks import interrupt_on_sigterm

        state.sigterm = interrupt_on_sigterm()
        from pytest_tesserabench.ab.hooks import ABHooks

        # (registered before the session's hooks: its test wrapper runs inside theirs)
        config.pluginmanager.register(ABHooks(state, BENCH_KEY), ABHooks.NAME)
        if settings.passes is not None and settings.passes > 1:
            state.passes_not_possible = passes.not_possible(xdist=False, ab=True, distributed=False)
    else:
        state.measurer = LocalMeasurer()
        wanted = passes.planned(settings.passes, history=bool(settings.save or settings.compare))
        if settings.enabled and wanted > 1:
            state.passes_not_possible = passes.not_possible(
                xdist=_is_worker(config) or bool(config.getoption("numprocesses", None)),
                ab=False,
                distributed=launch.LAUNCH_VARIABLES[0] in os.environ,
            )
            if state.passes_not_possible is None and not profiling.under_ncu():
                state.passes = passes.Passes(wanted)
                state.measurer = passes.PassesMeasurer(state.passes)


def _one_pass_when_no_timing_is_compared(state) -> None:
    """Interleaved passes steady timings the gate compares with this machine's baseline; against
    another machine's (record on a GPU, gate anywhere) only kernel figures are compared, so a run
    that saves nothing measures once (unless --bench-passes asked for more)."""
    comparison, settings = state.comparison, state.settings
    if state.passes is None or settings.passes is not None or settings.save or comparison is None:
        return
    if comparison.same_machine:
        return
    state.passes, state.measurer = None, LocalMeasurer()
    state.passes_not_possible = "the baseline is another machine's, so no timing is compared (kernel figures only)"


def _refuse_measuring_otherwise(state) -> None:
    """A run measured otherwise than its baseline's runs (in other passes: a run under -n makes one;
    under another --bench-threads) can judge no timing against them, and a save of it leaves a
    baseline whose runs judge none: a usage error now, not minutes of measuring that gate nothing
    and a green CI job over a slowdown."""
    from pytest_tesserabench.history.comparison import measured_otherwise

    settings, comparison = state.settings, state.comparison
    ours = {"passes": state.passes.total if state.passes is not None else 1, "threads": settings.threads or 0}
    one_pass = ours["passes"] == 1 and state.passes_not_possible
    why = f" (one pass: {state.passes_not_possible})" if one_pass else ""

    def notes(found) -> str:
        return "; ".join(note for note, _ in found)

    if comparison is not None and comparison.same_machine:
        found = measured_otherwise(comparison.runs, ours)
        if found:
            raise pytest.UsageError(
                f"--bench-compare={settings.compare}: this run would be {notes(found)}, so no timing could be "
                f"judged against them{why}. To gate: {'; '.join(hint for _, hint in found)}"
            )
    if settings.save:
        found = measured_otherwise(state.save_target.runs, ours) if state.save_target is not None else []
        if found:
            raise pytest.UsageError(
                f"--bench-save={settings.save}: this run would be {notes(found)}, and a baseline of both judges no "
                f"timing{why}. Save as its runs were measured (the same --bench-passes and --bench-threads; a run "
                "under -n makes one pass), or under another name"
            )


def _is_worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


# -- pytest-xdist: one GPU per worker (hooks xdist calls on the controller; absent without it) ---


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_setupnodes(config: pytest.Config, specs: list) -> None:
    state = config.stash.get(SESSION_KEY, None)
    mode = state.settings.gpu_per_worker if state is not None else "auto"
    config.stash[WORKER_GPUS_KEY] = worker_gpus.assign(specs, os.environ, mode)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node) -> None:
    gpu = node.config.stash.get(WORKER_GPUS_KEY, {}).get(node.gateway.id)
    if gpu is not None:
        node.workerinput[WORKERINPUT_GPU] = gpu


# -- markers -> parameters ----------------------------------------------------------------------
def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    where = metafunc.definition.nodeid
    try:
        sizes = metafunc.definition.get_closest_marker("bench_sizes")
        if sizes is not None:
            names, points, ids = markers.size_parameters(sizes.args, sizes.kwargs, where, metafunc.fixturenames)
            metafunc.parametrize(names, points, ids=ids)
        mesh = metafunc.definition.get_closest_marker("bench_mesh")
        if mesh is not None:
            from pytest_tesserabench.distributed.mesh import MeshError, mesh_parameters

            if "mesh" not in metafunc.fixturenames:
                raise markers.MarkerError(f"@pytest.mark.bench_mesh on {where}: the test has no `mesh` argument")
            try:
                world_size = int(os.environ.get("WORLD_SIZE") or 1)
                values, ids = mesh_parameters(mesh.args, mesh.kwargs, where, world_size)
            except MeshError as exc:
                raise markers.MarkerError(str(exc)) from None
            metafunc.parametrize("mesh", values, ids=ids, indirect=True)
        precision = metafunc.definition.get_closest_marker("bench_precision")
        if precision is not None:
            policies = markers.precision_parameters(precision.args, where, metafunc.fixturenames)
            metafunc.parametrize("precision", policies, ids=[markers.precision_id(p) for p in policies])
    except markers.MarkerError as exc:
        problem = str(exc)
    else:
        problem = _bench_marker_problem(metafunc)
    if problem:
        # The test that carries it fails (at its setup, before its missing parameters are
        # looked up); failing the collection would stop every healthy test of the file.
        metafunc.config.stash.setdefault(MARKER_PROBLEMS, {})[where] = problem


def _bench_marker_problem(metafunc: pytest.Metafunc) -> str | None:
    """@pytest.mark.bench(...) checked at collection, where a usage error belongs."""
    marker = metafunc.definition.get_closest_marker("bench")
    if marker is None:
        return None
    where = metafunc.definition.nodeid
    if marker.args:
        return f"@pytest.mark.bench on {where}: takes keyword arguments only, e.g. bench(max_time=2)"
    try:
        options.apply_marker(options.Settings(), marker.kwargs, where)
    except options.SettingsError as exc:
        return str(exc)
    return None


MARKER_PROBLEMS = pytest.StashKey[dict[str, str]]()  # a test's node id (no parameters) -> its bad marker


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    problem = item.config.stash.get(MARKER_PROBLEMS, {}).get(item.nodeid.split("[")[0])
    if problem:
        pytest.fail(problem, pytrace=False)
    callspec = getattr(item, "callspec", None)
    policy = callspec.params.get("precision") if callspec is not None else None
    if isinstance(policy, Precision) and policy.min_capability > (0, 0):
        reason = policy.unsupported_reason(machine.cuda_capability())
        if reason:
            pytest.skip(reason)


# -- the fixture --------------------------------------------------------------------------------
@pytest.fixture
def bench(request: pytest.FixtureRequest):
    """Measure a function: ``bench(fn, *args, flops=None, bytes=None, name=None, **kwargs)``;
    a collective adds ``comm_bytes=S, bus_factor=F`` (algorithm and bus bandwidth, nccl-tests').

    Without ``--bench`` it calls ``fn`` once and returns the result.
    """
    from pytest_tesserabench.measure.fixture import Bench

    state = request.config.stash[SESSION_KEY]
    item = request.node
    settings, group = state.settings, None
    marker = item.get_closest_marker("bench")
    if marker is not None:  # (checked at collection already: see _bench_marker_problem)
        settings, group = options.apply_marker(settings, marker.kwargs, item.nodeid)
    callspec = getattr(item, "callspec", None)
    module = item.nodeid.split("::", 1)[0]
    fixture = Bench(
        instruments=state.instruments,
        measurer=state.measurer,
        nodeid=item.nodeid,
        params=markers.record_params(callspec.params) if callspec else {},
        group=group or f"{module}::{getattr(item, 'originalname', item.name)}",
        settings=settings,
        status=state.status,
        test_name=item.name,
    )
    item.stash[BENCH_KEY] = fixture
    return fixture


@pytest.fixture(scope="session")
def dist(request: pytest.FixtureRequest):
    """The torch.distributed process group: ``rank``, ``world_size``, ``backend``, ``device``,
    ``group``, ``mesh(shape)``, ``require(world_size=N)``.

    Under torchrun, the run's group (gloo without GPUs, NCCL with them); in a plain pytest run, a
    one-rank group of the same backend, destroyed at the end of the session.
    """
    from pytest_tesserabench.distributed import hooks as distributed_hooks

    yield from distributed_hooks.session_world(request.config, request.config.stash[SESSION_KEY])


@pytest.fixture
def mesh(request: pytest.FixtureRequest, dist):
    """The DeviceMesh a ``@pytest.mark.bench_mesh`` test runs on (one per shape and session)."""
    from pytest_tesserabench.distributed.mesh import MeshError

    shape = getattr(request, "param", None)
    if shape is None:
        pytest.fail("the mesh fixture needs @pytest.mark.bench_mesh('dp', 'tp') or bench_mesh(dp=2, tp=-1)")
    try:
        return dist.mesh(shape)
    except MeshError as exc:
        hint = f"; run it with: {dist.torchrun_command(exc.needed)}" if exc.needed else ""
        pytest.skip(f"{exc}{hint}")


# -- the session's hooks ------------------------------------------------------------------------
class SessionHooks:
    """Hooks that need the session's state, registered as a plugin object per pytest session
    (as pytest-xdist and the cacheprovider do) instead of reaching for module globals."""

    NAME = "tesserabench-session"

    def __init__(self, state, config: pytest.Config):
        self.state = state
        self.config = config

    def check_before_measuring(self) -> list[str]:
        """Usage errors for what would fail only after minutes of measuring; warnings to show."""
        state, settings = self.state, self.state.settings
        warnings_: list[str] = []
        if not settings.enabled:
            return warnings_
        from pytest_tesserabench.machine.roofline import RooflineError

        if settings.timer in ("cuda_event", "cuda_graph") and machine.cuda_capability() is None:
            raise pytest.UsageError(
                f"--bench-timer={settings.timer}: no CUDA GPU is usable here; use --bench-timer=auto (CPU timer for "
                "CPU data) or run on a GPU machine"
            )
        try:
            state.instruments.check_peaks()
        except RooflineError as exc:
            raise pytest.UsageError(f"--bench-peaks: {exc}") from None
        try:
            problem = state.open_baselines()
        except BaselineError as exc:
            raise pytest.UsageError(str(exc)) from None
        if state.not_compared and settings.unresolved == "fail":
            raise pytest.UsageError(
                f"{state.not_compared}. With --bench-unresolved=fail a run that can judge nothing is refused "
                "before it measures"
            )
        if problem and not state.is_worker:
            warnings_.append(problem)
        _one_pass_when_no_timing_is_compared(state)
        if not state.is_worker:
            _refuse_measuring_otherwise(state)
        if settings.html_path is not None:
            from pytest_tesserabench.report.plots import missing_dependency

            missing = missing_dependency()
            if missing:
                raise pytest.UsageError(f"--bench-html={settings.html_path}: {missing}")
        if settings.openmetrics_path is not None:
            from pytest_tesserabench.report import openmetrics

            missing = openmetrics.missing_dependency()
            if missing:
                raise pytest.UsageError(f"--bench-openmetrics={settings.openmetrics_path}: {missing}")
        if settings.ncu and not state.is_worker:
            reason = profiling.ncu_skip_reason()
            if reason:
                warnings_.append(f"--bench-ncu: hardware counters skipped: {reason}")
        return warnings_

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        from pytest_tesserabench.report.terminal import header_lines

        return header_lines(self.state, config.stash.get(INTERPRET_KEY, None))

    def pytest_report_collectionfinish(self, config: pytest.Config) -> list[str]:
        from pytest_tesserabench.report.terminal import triton_lines

        if config.option.verbose < 0 or config.option.no_header:  # (where pytest leaves the header out)
            return []
        return triton_lines(self.state, config.stash.get(INTERPRET_KEY, None))

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        state = self.state
        # The canary: timed at the start and end of every measuring run, on the controller (or on
        # a worker whose comparisons it normalises), under the device lock like any measurement.
        if state.settings.ab_serve:
            return
        # Workers time it too when comparing: the run-effect model reads this run's canary.
        if state.settings.enabled and (not state.is_worker or state.comparison is not None):
            try:
                state.context.time_canary(state.instruments.device_lock)
            except LockWaitTimeout as exc:
                pytest.exit(f"tesserabench: {exc}", returncode=pytest.ExitCode.INTERRUPTED)

    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        settings = self.state.settings
        if not (settings.only or settings.skip):
            return
        # --bench-only keeps the tests that use the bench fixture, --bench-skip the others.
        keep = [item for item in items if ("bench" in getattr(item, "fixturenames", ())) == settings.only]
        if len(keep) < len(items):
            kept = set(keep)
            config.hook.pytest_deselected(items=[item for item in items if item not in kept])
            items[:] = keep

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        if self.state.comparison is not None:
            self.state.comparison.count([item.nodeid for item in session.items])

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        result = yield  # the test body raised: its own failure stands, nothing is judged
        fixture = item.stash.get(BENCH_KEY, None)
        if fixture is None:
            return result
        problem = fixture.json_problem()
        if problem:
            fixture.records.clear()  # nothing of this test is recorded; every other test's is
            pytest.fail(problem, pytrace=False)
        if not fixture.records:
            return result
        fresh = item.stash.get(FRESH_KEY, None)  # (left by processes/hooks.py when saving or comparing)
        verdicts = self.state.judge(
            list(fixture.records.values()),
            fixture.threshold,
            fresh.measure_again if fresh is not None else None,
            fresh.processes if fresh is not None else self.state.settings.confirm,
        )
        failures = []
        unresolved_fails = self.state.settings.unresolved == "fail" and self.state.comparison is not None
        elsewhere = self.state.timings_elsewhere() if unresolved_fails else None
        for label, record in fixture.records.items():  # (with the fresh processes kept meanwhile)
            verdict = verdicts.get(record.id)
            if verdict is None:
                continue
            fixture.records[label] = replace(record, verdict=verdict)  # the one place a verdict is attached
            # The test's own id heads its failure already: only a labelled call names itself.
            said = verdict.line()
            line = said if record.name is None else f"[{printable(record.name)}] {said}"
            if verdict.failed:
                failures.append(line)
            elif verdict.status == "INCONCLUSIVE" and unresolved_fails:
                failures.append(f"{line}. To settle it: {verdict.hint()} (--bench-unresolved=fail)")
            elif elsewhere and record.timing_gated and record.measured_rounds:
                failures.append(f"{line}. Its timing was not judged: {elsewhere} (--bench-unresolved=fail)")
            # (an INCONCLUSIVE one passes: its row, a line under the comparison saying what would settle
            # it, and the summary's line naming every one say it, once each, not a warning apiece)
        from pytest_tesserabench.report.junit import properties

        # <property> entries of its JUnit test case
        item.user_properties.extend(properties(list(fixture.records.values())))
        if failures:
            pytest.fail("\n".join(failures), pytrace=False)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        fixture = item.stash.get(BENCH_KEY, None)
        if call.when == "call" and fixture is not None and fixture.records:
            if self.state.settings.ncu and report.passed:
                # Re-run this test alone under Nsight Compute; each record gets its own call's kernels.
                counters = self.state.instruments.ncu_counters(
                    item.nodeid, rootdir=item.config.rootpath, cwd=item.config.invocation_params.dir
                )
                records = list(fixture.records.items())
                for (key, record), ncu in zip(records, profiling.ncu_for_records(counters, len(records))):
                    if ncu is not None:
                        fixture.records[key] = replace(record, ncu=ncu)
            records = list(fixture.records.values())
            # As JSON: pytest-xdist carries plain data from a worker to the controller.
            setattr(report, REPORT_ATTR, [record.to_json(samples=True) for record in records])
        if call.excinfo is not None and call.excinfo.errisinstance(LockWaitTimeout):
            # The holder will still hold the lock for the next test: each would wait as long again.
            item.session.shouldstop = f"tesserabench: {call.excinfo.value}"
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the xdist controller for every worker's report, and in-process without xdist.
        if report.when != "call":
            return
        self.state.ran.add(report.nodeid)
        records = []
        for data in getattr(report, REPORT_ATTR, None) or ():
            record = BenchRecord.from_json(_record_id(data), data)
            records.append(replace(record, outcome=report.outcome))  # the one place an outcome is attached
        self.state.add(records)

    def pytest_terminal_summary(self, terminalreporter, config: pytest.Config) -> None:
        if self.state.is_worker or not self.state.records:
            return
        from pytest_tesserabench.report.terminal import write_summary

        write_summary(terminalreporter, self.state, verbosity=config.get_verbosity())

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        state = self.state
        if state.is_worker or not state.settings.enabled:
            return
        from pytest_tesserabench.outputs import write_outputs

        if state.records:
            try:
                state.context.time_canary(state.instruments.device_lock)
            except LockWaitTimeout as exc:  # the run's measurements are kept; only the closing canary is missing
                state.instruments.say(f"tesserabench: no closing canary: {exc}")
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        state.suite = state.suite_shift()  # (before the reports, which say it too)
        failed = write_outputs(state, reporter, interrupted=exitstatus == pytest.ExitCode.INTERRUPTED)
        if failed or (state.suite is not None and state.suite.failed):
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        state = self.state
        if state.sigterm is not None:
            import signal

            signal.signal(signal.SIGTERM, state.sigterm)
            state.sigterm = None
        if state.status is not None:
            state.status.close()
        config.pluginmanager.unregister(self, self.NAME)


def _record_id(data: dict) -> str:
    return data["nodeid"] if data.get("name") is None else f"{data['nodeid']}::{data['name']}"
