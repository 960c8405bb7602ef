"""The hooks of fresh processes in history mode, registered only when a run saves with
``--bench-save-processes`` or compares against a baseline (never under ``--bench-ab``, whose
served processes measure every benchmark, nor across torchrun ranks): a save measures each
benchmark in fresh processes too, which the baseline keeps; a comparison hands the gate a way to
measure a benchmark again in fresh processes (stage 4 of gate/pipeline.py), or the processes the
save measured it in already.

After a test's body, they leave a ``Fresh`` on the item (under the key the plugin gives them) for
the session's hooks, which judge it.
"""

from __future__ import annotations

import signal
import threading
from dataclasses import dataclass, replace

import pytest

from pytest_tesserabench.gate.pipeline import Processes
from pytest_tesserabench.processes.fresh import ProcessPool, as_kept


@dataclass(frozen=True)
class Fresh:
    """What the gate gets for a test: ``measure_again(records) -> Processes`` (None: measure
    nothing again) and how many processes that is."""

    measure_again: object
    processes: int


class FreshProcessHooks:
    NAME = "tesserabench-fresh-processes"

    def __init__(self, state, bench_key, fresh_key):
        self.state = state
        self.settings = state.settings
        self.bench_key = bench_key  # where the test's Bench fixture is stashed (plugin.BENCH_KEY)
        self.fresh_key = fresh_key  # where a test's Fresh goes (plugin.FRESH_KEY)

    @pytest.hookimpl(wrapper=True, trylast=True)
    def pytest_runtest_call(self, item: pytest.Item):
        # trylast: inside the session's wrapper, which judges the test with what is left here;
        # registered before the passes' hooks, so outside theirs (pluggy calls the trylast wrapper
        # registered last innermost): an earlier pass has no records left.
        result = yield  # the test body raised: nothing is measured again
        fixture = item.stash.get(self.bench_key, None)
        if fixture is None or not fixture.records or fixture.json_problem():
            return result
        if self.state.instruments.ranks.size > 1:  # (known once torchrun's ranks have joined)
            return result
        saved = self._measure_for_save(item, list(fixture.records.values()))
        again = len(saved.measured) if saved is not None else self.settings.confirm
        item.stash[self.fresh_key] = Fresh(self._measure_again(item, saved), again)
        return result

    def pytest_keyboard_interrupt(self, excinfo) -> None:
        """Ctrl-C (or CI's SIGTERM): the fresh processes stop now, before the session's summaries,
        which would otherwise share the CPUs with them."""
        if self.state.process_pool is not None:
            self.state.process_pool.close(interrupted=True)

    def pytest_unconfigure(self, config: pytest.Config) -> None:
        if self.state.process_pool is not None:
            self.state.process_pool.close()
        config.pluginmanager.unregister(self, self.NAME)

    def _measure_for_save(self, item: pytest.Item, records):
        """With --bench-save: every gated benchmark measured in --bench-save-processes fresh
        processes too, which the baseline keeps (processes/fresh.py, "A baseline measured in several
        processes"); the records keep them (BenchRecord.confirm). The processes, or None."""
        state = self.state
        if self.settings.save is None or self.settings.save_processes <= 0:
            return None
        # (timings the gate never compares, the interpreter's, are not worth a process each; nor
        # a benchmark whose baseline holds enough process draws already: baseline.SAVE_DRAWS)
        measured = [r for r in records if r.timing_gated and state.lacks_process_draws(r.id)]
        if not measured:
            return None
        with state.instruments.measurement_lock():  # under xdist no other worker measures meanwhile
            pool = self._process_pool(item, self.settings.save_processes, "--bench-save-processes")
            processes = pool.measure(measured, state.instruments.local_canary)
        self._keep_processes(item, measured, processes)
        if processes.problem:
            item.warn(
                pytest.PytestWarning(
                    f"{item.nodeid}: saved as measured in {len(processes.measured)} of "
                    f"{self.settings.save_processes} fresh processes: {processes.problem}"
                )
            )
        return processes

    def _measure_again(self, item: pytest.Item, saved):
        """History mode's stage 4 (gate.pipeline): measures a test's records again in fresh
        processes, or hands over those a save measured them in already; None when not comparing,
        or with --bench-confirm=0 and nothing saved."""
        state = self.state
        if state.comparison is None:
            return None

        def measured_by_the_save(again) -> Processes | None:
            if saved is None or not saved.measured or any(r.id not in saved.measured[0] for r in again):
                return None  # (a benchmark whose baseline held enough draws was not measured again)
            return Processes(
                [{r.id: p[r.id] for r in again if r.id in p} for p in saved.measured],
                saved.seconds,
                saved.problem,
                "fresh process(es) of this save",
            )

        if self.settings.confirm <= 0:
            if saved is None:
                return None
            return lambda again: measured_by_the_save(again) or Processes([])

        def measure_again(again):
            kept = measured_by_the_save(again)
            if kept is not None:
                return kept
            pool = self._process_pool(item, self.settings.confirm, "--bench-confirm")
            with state.instruments.measurement_lock():  # under xdist no other worker measures meanwhile
                processes = pool.measure(again, state.instruments.local_canary)
            self._keep_processes(item, again, processes)
            return processes

        return measure_again

    def _process_pool(self, item: pytest.Item, count: int, option: str) -> ProcessPool:
        """This run's fresh processes: a save's, or --bench-confirm's; made at the first test that
        needs them, collecting the files of every benchmark test of this run."""
        state = self.state
        if state.process_pool is None:
            benchmarks = (i.nodeid for i in item.session.items if "bench" in getattr(i, "fixturenames", ()))
            state.process_pool = ProcessPool(
                count,
                option=option,
                settings=self.settings,
                rootdir=state.context.rootdir,
                cache_dir=state.instruments.cache_dir,
                extra_args=["-c", str(item.config.inipath)] if item.config.inipath else [],  # its ini file too
                test_files=list(dict.fromkeys(nodeid.split("::", 1)[0] for nodeid in benchmarks)),
            )
            if state.sigterm is None:  # (--bench-ab took it already)
                state.sigterm = interrupt_on_sigterm()
        return state.process_pool

    def _keep_processes(self, item: pytest.Item, records, processes) -> None:
        """The run file keeps what fresh processes measured of each record (BenchRecord.confirm):
        the test's records are made again with them."""
        ours = item.stash[self.bench_key].records
        for record in records:
            current = ours[record.name]
            sampling = current.sampling
            if sampling is not None:
                sampling = replace(sampling, confirm_s=processes.seconds / len(records))
            confirm = tuple(as_kept(p[record.id]) for p in processes.measured if record.id in p) or None
            ours[record.name] = replace(current, confirm=confirm, sampling=sampling)


def interrupt_on_sigterm():
    """CI cancels a job with SIGTERM, which would kill the session outright and leave the A/B
    worktree and the served processes' folders behind (--bench-ab's, and the fresh processes of a
    save or --bench-confirm): take it as Ctrl-C instead, so pytest unwinds and cleans up, and an
    interrupted save writes nothing. Returns the handler it replaced (None: left alone)."""
    if threading.current_thread() is not threading.main_thread() or signal.getsignal(signal.SIGTERM) not in (
        signal.SIG_DFL,
        None,
    ):
        return None

    def interrupt(signum, frame):
        raise KeyboardInterrupt("SIGTERM")

    return signal.signal(signal.SIGTERM, interrupt)
