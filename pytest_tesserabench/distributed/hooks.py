"""The pytest hooks of a rank of a torchrun session: a plugin object registered only under torchrun
(as pytest-xdist registers its own session object), so plain pytest runs never see them.

- sessionstart: set up the process group (a usage error, not a hang, when it cannot be).
- collection_finish: the ranks compare what they collected (``agreement.selection_problem``).
- runtest_makereport: after each phase the ranks exchange outcomes and agree
  (``agreement.decide``); a desynchronised group stops the session on every rank.
- unconfigure: leave together and destroy the group.
"""

from __future__ import annotations

import pytest

from pytest_tesserabench.distributed import agreement
from pytest_tesserabench.distributed.launch import Launch, LaunchError, choose_backend
from pytest_tesserabench.distributed.world import World, WorldError
from pytest_tesserabench.machine import device as machine
from pytest_tesserabench.machine.ranks import SOLO

WORLD_KEY = pytest.StashKey[World]()


def attach(config: pytest.Config, state) -> World | None:
    """Make this pytest session a rank when torchrun started it; None (and nothing done) otherwise."""
    try:
        launch = Launch.from_env()
    except LaunchError as exc:
        raise pytest.UsageError(str(exc)) from None
    if launch is None:
        return None
    settings = state.settings
    if getattr(config.option, "dist", "no") != "no" or hasattr(config, "workerinput"):
        raise pytest.UsageError(
            "torchrun and pytest-xdist (-n) do not combine: each rank would spread the tests over its own "
            "workers and the ranks' collectives could never meet; drop -n under torchrun"
        )
    if settings.ncu:
        raise pytest.UsageError("--bench-ncu re-runs a test alone under Nsight Compute; it cannot under torchrun")

    try:
        backend = choose_backend(settings.dist_backend, machine.cuda_device_count(), launch.local_rank)
    except LaunchError as exc:
        raise pytest.UsageError(str(exc)) from None
    world = World(launch, backend, settings.dist_timeout, pytest_args=config.invocation_params.args)
    config.stash[WORLD_KEY] = world
    state.is_worker = state.is_worker or launch.rank != 0  # rank 0 alone reports and writes files
    state.context.distributed = world.machine_fields()
    config.pluginmanager.register(DistributedHooks(world, state), DistributedHooks.NAME)
    return world


def session_world(config: pytest.Config, state):
    """The `dist` fixture's body: the torchrun group, or a one-rank group for this session."""
    world = config.stash.get(WORLD_KEY, None)
    if world is not None:
        yield world  # the plugin set it up at session start and destroys it at the end
        return

    try:
        backend = choose_backend(state.settings.dist_backend, machine.cuda_device_count())
        world = World(None, backend, state.settings.dist_timeout, pytest_args=config.invocation_params.args)
        world.start()
    except (LaunchError, WorldError) as exc:
        pytest.fail(f"dist fixture: {exc}", pytrace=False)
    state.instruments.ranks = world.ranks
    try:
        yield world
    finally:
        state.instruments.ranks = SOLO
        world.close()


class DistributedHooks:
    NAME = "tesserabench-distributed"

    def __init__(self, world: World, state):
        self.world = world
        self.state = state

    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionstart(self, session: pytest.Session) -> None:
        world = self.world
        try:
            world.start()
        except (WorldError, RuntimeError, ValueError) as exc:
            raise pytest.UsageError(
                f"torch.distributed: rank {world.rank} of {world.world_size} could not join the {world.backend} "
                f"process group: {exc}"
            ) from None
        self.state.instruments.ranks = world.ranks

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        w = self.world
        nodes = w.launch.nodes if w.launch else 1
        return [
            f"tesserabench: rank {w.rank} of {w.world_size} ({w.backend}, {nodes} node(s), group timeout "
            f"{w.timeout_s:g} s); a round's time is the slowest rank's; rank 0 reports and writes files"
        ]

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        s = self.state.settings
        mine = {
            "ids": [item.nodeid for item in session.items],
            "errors": session.testsfailed,
            "settings": {
                "bench": s.enabled,
                "max_time": s.max_time,
                "min_rounds": s.min_rounds,
                "warmup": s.warmup,
                "target_ci": s.target_ci,
                "timer": s.timer,
            },
        }
        try:
            everyone = self.world.exchange("selection", mine)
        except WorldError as exc:
            raise pytest.UsageError(f"tesserabench: {exc}") from None
        problem = agreement.selection_problem(everyone)
        if problem:
            raise pytest.UsageError(f"tesserabench: {problem}")

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if self.world.world_size == 1:
            return report
        self.world.phases += 1
        exc = call.excinfo.value if call.excinfo is not None and report.failed else None
        skip = report.longrepr if report.skipped and isinstance(report.longrepr, tuple) else None
        if report.skipped and skip is None:
            skip = (str(item.path), 0, "xfail" if hasattr(report, "wasxfail") else "skipped")
        mine = agreement.summarize(report.outcome, call.when, exc, skip)
        try:
            everyone = self.world.exchange(f"outcome/{self.world.phases}", mine)
        except WorldError as exc:
            report.outcome = "failed"
            report.longrepr = f"tesserabench: {exc}"
            item.session.shouldstop = f"tesserabench: {exc}"
            return report
        decision = agreement.decide(everyone, self.world.rank, item.nodeid)
        if decision.outcome == "failed":
            if report.outcome == "failed" and not mine["dist_error"]:
                report.sections.append(("tesserabench: ranks", decision.text))
            elif report.outcome == "failed":  # this rank only timed out waiting: the cause comes first
                crash = getattr(report.longrepr, "reprcrash", None)
                own = crash.message if crash is not None else str(report.longrepr)
                report.longrepr = f"{decision.text}\nthis rank's own error: {own}"
            else:
                report.outcome = "failed"
                report.longrepr = decision.text
        elif decision.outcome == "skipped" and report.outcome != "skipped":
            report.outcome = "skipped"
            report.longrepr = decision.skip
        if decision.stop:
            item.session.shouldstop = decision.stop
        return report

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.world.close()
        config.pluginmanager.unregister(self, self.NAME)
