"""The hooks of interleaved passes (``--bench-passes``; by default 4 when saving or comparing),
registered only when the run makes more than one pass (as xdist registers its DSession only under
``-n``): the earlier passes over the benchmark tests before pytest's own loop runs the reported
one, what each earlier pass of a test leaves behind, and the word on a test that failed in an
earlier pass only.

An earlier pass reports nothing: what it measured lives in ``Passes.earlier`` and is pooled with
the reported pass (``measure/passes.py``), so its test's records are taken away once read, and
the session's hooks, which judge and report records, see none.
"""

from __future__ import annotations

import pytest
from _pytest.runner import runtestprotocol

from pytest_tesserabench.measure.passes import Passes, run_earlier


class PassesHooks:
    NAME = "tesserabench-passes"

    def __init__(self, state, bench_key):
        self.state = state
        self.passes: Passes = state.passes
        self.bench_key = bench_key  # where the test's Bench fixture is stashed (plugin.BENCH_KEY)

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtestloop(self, session: pytest.Session) -> None:
        """The passes before the reported one, over the benchmark tests; pytest's own loop then
        runs the last pass, every test included."""
        if session.testsfailed or session.config.option.collectonly:
            return
        items = [item for item in session.items if "bench" in getattr(item, "fixturenames", ())]
        if not items:
            return
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        quiet = reporter is None or session.config.get_verbosity() < 0

        def say(line: str) -> None:
            if not quiet:
                reporter.write_line(line)

        run_earlier(self.passes, items, lambda item, nextitem: runtestprotocol(item, log=False, nextitem=nextitem), say)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item):
        # trylast and registered last: the innermost wrapper, so an earlier pass's records are
        # gone before the session's (and the fresh processes') hooks would use them.
        self.passes.nodeid = item.nodeid  # what bench() measures in this pass belongs to this test
        result = yield  # (the test body raised: pytest reports it; run_earlier notes it)
        if not self.passes.final:
            self._earlier_pass_done(item)
        return result

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if call.when == "call" and self.passes.final and report.passed and item.nodeid in self.passes.failed_earlier:
            # A flaky test (or one that depends on state) must not pass unnoticed because the
            # passes hid its failure.
            item.warn(
                pytest.PytestWarning(
                    f"{item.nodeid} {self.passes.failed_earlier[item.nodeid]}, unreported; the reported run passed. "
                    "A flaky test, or one that depends on state (--bench-passes=1 runs it once)"
                )
            )
        return report

    def _earlier_pass_done(self, item: pytest.Item) -> None:
        """Its centres tell the run-effect model this run's shift before the last pass reaches the
        benchmark; then the records go (an earlier pass is never judged or reported)."""
        fixture = item.stash.get(self.bench_key, None)
        if fixture is None or not fixture.records:
            return
        records = list(fixture.records.values())
        fixture.records.clear()
        if all(r.timer == "interpreter" for r in records):
            self.passes.measure_once(item.nodeid)  # never gated: passes would only cost time
            return
        if self.state.comparison is None:
            return
        memory = self.state.comparison.history.memory
        for record in records:
            # every earlier pass so far, combined as the gate combines passes and corrected for the
            # memory's speed after each (as gate.centres.earlier_passes_centre reads them back)
            earlier = self.passes.earlier.get((item.nodeid, record.name), [])
            readings = [c for m in earlier for c in m.memory_canary]
            centre = memory.passes_centre(
                record.id, [m.rounds_ms for m in earlier], readings if len(readings) == len(earlier) else []
            )
            if centre is not None:
                self.state.measured[record.id] = centre
