"""The hooks of ``--bench-ab``, registered only when it is on (as xdist registers its DSession only
under ``-n``): they tell the lead what this session collected, run each benchmark test in the
served processes while it runs here, join the reference's records to ours, and turn the calls and
tests the reference has and this tree does not into MISSING verdicts.

The measuring itself is the lead's (``lead.ABLead``, the fixture's measurer); judging and
reporting stay with the session's hooks, which see A/B records like any other.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from pytest_tesserabench.ab.worktree import remove
from pytest_tesserabench.processes.served import ProcessError
from pytest_tesserabench.record.results import BenchRecord, Verdict

MISSING_KEY = pytest.StashKey[list]()  # a test's MISSING verdicts (as JSON), for its report
MISSING_ATTR = "tesserabench_missing"  # extra TestReport attribute: pytest-xdist carries it to the controller


class ABHooks:
    NAME = "tesserabench-ab"

    def __init__(self, state, bench_key):
        self.state = state
        self.lead = state.ab
        self.bench_key = bench_key  # where the test's Bench fixture is stashed (plugin.BENCH_KEY)
        self.deselected: set[str] = set()  # a deselected test is not a deleted one

    # -- collection --------------------------------------------------------------------------------
    def pytest_deselected(self, items) -> None:
        self.deselected.update(item.nodeid for item in items)

    def pytest_collection_finish(self, session: pytest.Session) -> None:
        config = session.config
        named_single_tests = any("::" in arg for arg in config.args)
        known_here = None if named_single_tests else {item.nodeid for item in session.items} | self.deselected
        selection = [f"-k={config.option.keyword}"] if config.option.keyword else []
        selection += [f"-m={config.option.markexpr}"] if config.option.markexpr else []
        self.lead.collected(
            [item.nodeid for item in session.items if "bench" in item.fixturenames],
            known_here=known_here,
            selection=selection,
            search_paths=[config.invocation_params.dir / arg for arg in config.args],
            file_patterns=config.getini("python_files"),
        )

    # -- a test ------------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_call(self, item: pytest.Item):
        # Registered before the session's hooks, so this wrapper runs inside theirs: the test runs
        # on both sides and the reference's records join ours before the session judges them.
        if "bench" not in item.fixturenames:
            return (yield)
        problem = None
        try:
            self.lead.begin_test(item.nodeid)
        except ProcessError as exc:
            problem = str(exc)
        if problem is not None:  # (raised outside the except: the message once, not chained to itself)
            pytest.fail(problem, pytrace=False)
        try:
            result = yield
        except (KeyboardInterrupt, SystemExit):
            raise  # the session ends here: the served processes are stopped at unconfigure
        except BaseException:
            self._end_test(item)
            raise
        self._end_test(item)
        return result

    def _end_test(self, item: pytest.Item) -> None:
        """The reference finished the test too: its records join ours; its calls we never made
        are MISSING."""
        try:
            ended = self.lead.end_test()
        except ProcessError as exc:
            pytest.fail(str(exc), pytrace=False)
        reference_only = [self._deleted_here(nodeid) for nodeid in self.lead.reference_only()]
        item.stash[MISSING_KEY] = reference_only
        if ended is None or ended[1] is None:
            return
        test, at_reference = ended
        fixture = item.stash.get(self.bench_key, None)
        ours = fixture.records if fixture is not None else {}
        theirs = {data.get("name"): data for data in at_reference.records}
        for name, record in ours.items():
            if record.ab is not None:
                ab = replace(
                    record.ab,
                    reference=theirs.get(name),
                    reference_outcome=at_reference.outcome,
                    reference_error=at_reference.error,
                )
                ours[name] = replace(record, ab=ab)
        missing = []
        group = next(iter(ours.values())).group if ours else item.nodeid
        for name in dict.fromkeys([*test.reference_unpaired, *at_reference.unpaired]):
            if name not in ours:
                record_id = item.nodeid if name is None else f"{item.nodeid}::{name}"
                why = f"measured at {self.lead.reference.ref}, not made by this test"
                verdict = Verdict(id=record_id, status="MISSING", notes=(why,)).to_json()
                missing.append(verdict | {"id": record_id, "nodeid": item.nodeid, "name": name, "group": group})
        item.stash[MISSING_KEY] = [*reference_only, *missing]

    def _deleted_here(self, nodeid: str) -> dict:
        """The MISSING verdict (as JSON) of a benchmark test REF has and this tree does not."""
        reference = self.lead.reference
        why = (
            f"a benchmark test at {reference.ref} ({reference.sha[:10]}), not in the working tree (deleted or renamed)"
        )
        group = nodeid.split("[", 1)[0]  # as a parametrized test's records are grouped
        verdict = Verdict(id=nodeid, status="MISSING", notes=(why,)).to_json()
        return verdict | {"id": nodeid, "nodeid": nodeid, "name": None, "group": group}

    # -- reports -----------------------------------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        report = yield
        if call.when == "call" and item.stash.get(MISSING_KEY, None):
            setattr(report, MISSING_ATTR, item.stash[MISSING_KEY])
        return report

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        # Runs on the xdist controller for every worker's report, and in-process without xdist.
        if report.when != "call":
            return
        for data in getattr(report, MISSING_ATTR, None) or ():
            verdict = Verdict.from_json(data["id"], data, f"the MISSING verdict of {data['id']}")
            self.state.ab_missing[verdict.id] = verdict
            # A stand-in record, so the reports group it under its test.
            self.state.ab_missing_records[verdict.id] = BenchRecord(
                nodeid=data["nodeid"], name=data["name"], group=data["group"], timer="-", rounds_ms=[], stats=None
            )

    # -- the end -----------------------------------------------------------------------------------
    def pytest_terminal_summary(self, terminalreporter) -> None:
        if self.lead.start_note is not None:  # (an xdist worker's lead has no terminal)
            terminalreporter.write_line(f"tesserabench: A/B: {self.lead.start_note}")

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        """Ctrl-C (or CI's SIGTERM): the served processes stop now, before the session's
        summaries, which would otherwise share the CPUs with them (unconfigure's close then has
        nothing left to do)."""
        self.lead.close(interrupted=True)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        self.lead.close()
        if not self.state.is_worker:  # the controller (or the only process) owns the worktree
            remove(self.lead.reference)
        config.pluginmanager.unregister(self, self.NAME)
