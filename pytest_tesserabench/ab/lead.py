"""The lead of ``--bench-ab`` in one pytest process (the session, or each xdist worker): it starts
the served processes on first need (``processes`` per side: the working tree's and REF's), runs
each benchmark test in all of them at once, has each warm up in turn, interleaves every
``bench()`` call's blocks over the process pairs, and hands the pairs to the gate.

Why the lead does not measure its own side: a process's own state (memory layout, the allocator's
thresholds, which depend on what the process did before) biases its timings by a steady 1-10% on
CPU code, the same in every block, so no interleaving cancels it. Served processes on both sides
are born alike, and several per side turn that bias into noise the rule can see and average
(docs/gate.md, "process bias")."""

from __future__ import annotations

import functools
import time
from dataclasses import replace
from pathlib import Path

import pytest

from pytest_tesserabench.ab import worktree
from pytest_tesserabench.ab.interleave import interleave, measuring_cpu
from pytest_tesserabench.gate import paired
from pytest_tesserabench.measure import sampling
from pytest_tesserabench.options import Settings
from pytest_tesserabench.processes.served import (
    THREAD_POOLS,
    ProcessError,
    Reached,
    ServedProcess,
    TestDone,
    close_all,
    measurement_args,
    served_environment,
)
from pytest_tesserabench.processes.zygote import Zygote, imported_now, preload_for
from pytest_tesserabench.record.results import UNGATED_TIMERS, ABDecision, ABResult


class TestOnBothSides:
    """One test as the served processes see it."""

    def __init__(self, running: list[ServedProcess], on_reference: bool):
        self.running = running  # the served processes whose tree has the test
        self.on_reference = on_reference
        self.finished: dict[ServedProcess, TestDone] = {}  # served tests that ended (before ours)
        self.reference_unpaired: list[str | None] = []

    def why_unpaired(self, reference: ServedProcess) -> str:
        if not self.on_reference:
            return "no such test at the reference"
        done = self.finished.get(reference)
        if done is not None and done.outcome not in ("passed", "skipped"):
            return f"the test {done.outcome} at the reference: {done.error}"
        return "the reference's test does not make this call"


NOTHING_AT_REFERENCE = "tesserabench_nothing_at_reference.py"


class ABLead:
    def __init__(self, settings: Settings, *, reference: worktree.Reference, rootdir: Path, cache_dir: Path | None):
        self.settings = settings
        self.reference = reference
        self.rootdir = rootdir
        self.cache_dir = cache_dir
        self.candidates: list[ServedProcess] = []  # the working tree's served processes
        self.references: list[ServedProcess] = []  # REF's, one per candidate
        self.test_files: list[str] = []
        self.selected = 0  # benchmark tests selected: m of alpha/m
        self.known_here: set[str] | None = set()  # every test collected here, deselected ones too (None: not all)
        self._reference_only_told = False
        self.search_paths: list[Path] = []  # what this session collected from (its arguments)
        self.file_patterns: list[str] = []  # pytest's python_files
        self.selection: list[str] = []
        self.test: TestOnBothSides | None = None
        self.failed: ProcessError | None = None  # the served processes could not start
        self.zygote: Zygote | None = None  # what forks the served processes (zygote.py), if anything
        self.start_note: str | None = None  # how the served processes started, and how long it took
        self.collection_imported: dict = {}  # the PRELOAD modules imported once the tests were collected

    @classmethod
    def open(cls, settings: Settings, *, rootdir: Path, cache_dir: Path) -> ABLead:
        reference = worktree.checkout(rootdir, settings.ab, cache_dir, results=settings.bench_dir)
        return cls(settings, reference=reference, rootdir=rootdir, cache_dir=cache_dir)

    def describe(self) -> str:
        return self.reference.describe()

    # -- the session -------------------------------------------------------------------------------
    def collected(
        self,
        nodeids: list[str],
        *,
        known_here: set[str] | None,
        selection: list[str] = (),
        search_paths: list[Path] = (),
        file_patterns: list[str] = (),
    ) -> None:
        """The benchmark tests selected here; ``known_here``: every test this session collected,
        deselected ones included (None when the command line named single tests, so that the
        reference's other tests in those files cannot be told from deleted ones);
        ``search_paths`` and ``file_patterns``: where this session looked for test files, and
        which names it took, so that REF's test files deleted here can be found."""
        self.test_files = sorted({nodeid.split("::", 1)[0] for nodeid in nodeids})
        self.selected = len(nodeids)
        self.known_here = known_here
        self.selection = list(selection)  # -k/-m: the served processes select as this session did
        self.search_paths, self.file_patterns = list(search_paths), list(file_patterns)
        # What collecting the tests imported, which every served process imports again (what the
        # lead imports later to judge, a served process never does).
        self.collection_imported = imported_now()

    def reference_only(self) -> list[str]:
        """Benchmark tests REF has and this tree does not (deleted or renamed here, or in a test
        file deleted or renamed here): MISSING. Told once per process (the first test that ran on both sides
        carries them to the report); empty before the served processes started."""
        if self._reference_only_told or not self.references or self.known_here is None:
            return []
        self._reference_only_told = True
        return [nodeid for nodeid in self.references[0].benchmarks if nodeid not in self.known_here]

    def _served(self) -> list[ServedProcess]:
        """Every served process, started (all collect at once) on first need. A failure to start
        stops them all, and every later test fails at once with the same message."""
        if self.failed is not None:
            raise self.failed
        if not self.references:
            try:
                self._start()
            except ProcessError as exc:
                self.close()
                self.failed = exc
                raise
        return self._all()

    def _start(self) -> None:
        relative = self.rootdir.resolve().relative_to(self.reference.repo.resolve())
        ref = f"{self.reference.ref} at {self.reference.sha[:10]}"
        at_reference = self._reference_files(self.reference.path / relative)
        for i in range(self.settings.ab_processes):
            for tree, where, group, files in (
                (self.reference.repo, "the working tree's served process", self.candidates, (self.test_files, [])),
                (self.reference.path, f"the reference side ({ref})", self.references, at_reference),
            ):
                group.append(
                    ServedProcess(
                        tree,
                        where=f"{where} #{i + 1}" if self.settings.ab_processes > 1 else where,
                        cwd=tree / relative,
                        test_files=files[0],
                        reference_only_files=files[1],
                        pytest_args=[*measurement_args(self.settings), *self.selection],
                        cache_dir=self.cache_dir,
                    )
                )
        started = time.monotonic()
        environment = served_environment(pinned=True)
        self.zygote, why = Zygote.start(
            environment,
            preload_for(self.collection_imported, [self.reference.repo, self.reference.path], relative),
            self.candidates[0].log_path.with_name("zygote.log"),
        )
        for process in self._all():
            process.launch(self.zygote)
        for process in self._all():
            process.connect()
        count = len(self._all())
        if self.zygote is not None:
            how = f"forked from one process that imported {', '.join(self.zygote.preloaded)}"
        else:
            how = f"each a Python of its own ({why})"
        self.start_note = f"{count} served processes started in {time.monotonic() - started:.1f} s, {how}"
        # A pool the user sized (a conftest may, after the header's line was written) runs so on the
        # one CPU the served processes measure on: said where the figures are read.
        sized = [f"{pool}={environment[pool]}" for pool in THREAD_POOLS if environment.get(pool) != "1"]
        if sized:
            self.start_note += f"; thread pools as this session set them: {', '.join(sized)}"

    def _reference_files(self, root: Path) -> tuple[list[str], list[str]]:
        """What REF's served processes collect (``root``: REF's rootdir): this session's test files
        that exist at REF (a file new here has only NEW tests: naming it there would stop pytest),
        and REF's test files deleted here (only to list their tests MISSING)."""
        existing = [name for name in self.test_files if (root / name).is_file()]
        deleted_here = []
        if self.known_here is not None:
            deleted_here = worktree.deleted_test_files(
                self.reference, self.rootdir, self.search_paths, self.file_patterns
            )
        if not existing and not deleted_here:
            # Without a file argument pytest would collect the whole tree; an empty module
            # collects nothing (the worktree is ours and goes with it).
            (root / NOTHING_AT_REFERENCE).write_text("# none of this session's test files exists at REF\n")
            existing = [NOTHING_AT_REFERENCE]
        return existing, deleted_here

    def _all(self) -> list[ServedProcess]:
        return [*self.candidates, *self.references]

    def close(self, *, interrupted: bool = False) -> None:
        close_all(self._all(), interrupted=interrupted)
        self.candidates, self.references = [], []
        if self.zygote is not None:
            self.zygote.close()
            self.zygote = None

    # -- a test ------------------------------------------------------------------------------------
    def begin_test(self, nodeid: str) -> None:
        running = [process for process in self._served() if process.run_test(nodeid)]
        self.test = TestOnBothSides(running, on_reference=all(p in running for p in self.references))

    def end_test(self) -> tuple[TestOnBothSides, TestDone | None] | None:
        """The test is over here; the served tests finish theirs. The test as the sides saw it,
        and how it ended at the reference (None: not there)."""
        test, self.test = self.test, None
        if test is None:
            return None
        for process in test.running:
            if process not in test.finished:
                test.finished[process] = process.end_test()
        return test, test.finished.get(self.references[0])

    def _reached(self, process: ServedProcess, name: str | None) -> Reached | None:
        """Wait until ``process`` reaches the same ``bench()`` call (None: it never will)."""
        test = self.test
        if test is None or process not in test.running or process in test.finished:
            return None
        while True:
            message = process.next_call()
            if isinstance(message, TestDone):
                test.finished[process] = message
                return None
            if message.name == name:
                return message
            if process is self.references[0]:
                test.reference_unpaired.append(message.name)
            process.skip()

    # -- the measurer ------------------------------------------------------------------------------
    def measure(self, timer, budget: sampling.Budget, *, name: str | None, threshold: float, on_round=None, ranks=None):
        __tracebackhide__ = True  # a user's error shows in their code, not in the plugin's frames
        info = ABResult(ref=self.reference.ref, sha=self.reference.sha)
        test = self.test
        reached = {process: self._reached(process, name) for process in self._all()} if test else {}
        unpaired = self._why_unpaired(test, reached, timer.name)
        if unpaired is None and timer.name in UNGATED_TIMERS:
            # the gate never judges these timings (the interpreter's: Python emulating a GPU), so
            # interleaving them over every served process would only cost: the kernel figures of
            # both sides are still compared (ab.verdicts)
            unpaired = f"timed by the {timer.name} timer, whose timings are never judged"
        if unpaired is not None:  # measured here alone: nothing to compare with
            for process, message in reached.items():
                if message is not None:
                    process.skip()
            return sampling.measure(timer, budget, plan=sampling.warm_up(timer, budget)), replace(
                info, unpaired=unpaired
            )
        alpha = self.settings.alpha / max(self.selected, 1)
        count = len(self.candidates)
        cpu = measuring_cpu()
        try:
            # one at a time; each side's first process warms up and sizes the rounds for its side,
            # the others warm up briefly and take its plan (sampling.warm_up_like)
            leaders = [side[0].warm_up(cpu) for side in (self.candidates, self.references)]
            for side, leader in zip((self.candidates, self.references), leaders, strict=True):
                for process in side[1:]:
                    process.warm_up(cpu, like=leader)
            candidate = sampling.start_measurement(timer, leaders[0])  # the first candidate's plan
            result = interleave(
                list(zip(self.candidates, self.references, strict=True)),
                candidate,
                functools.partial(_decide, threshold=threshold, alpha=alpha, process_pairs=count),
                max_time=budget.max_time,
                settle_time=self.settings.settle_time,
                min_pairs=paired.PROCESS_LOOKS[0] * count if count > 1 else paired.PAIRED_LOOKS[0],
                cpu=cpu,
            )
        except ProcessError as exc:  # the message says it all: the plugin's frames would only hide it
            pytest.fail(str(exc), pytrace=False)
        for process in self._all():
            process.done()
        decision = result.decision
        return result.candidate, replace(
            info,
            log_ratios=tuple(result.log_ratios),
            processes=tuple(result.processes),
            reference_rounds_ms=tuple(result.reference_rounds_ms),
            reference_run_queue_wait_s=result.reference_run_queue_wait_s,
            settle_s=result.settle_s,
            alpha_per_test=alpha,
            decision=ABDecision(
                status=decision.status,
                decided=decision.decided,
                ratio=decision.ratio,
                ci=tuple(decision.ci),
                p_value=decision.p_value,
                threshold=decision.threshold,
                pairs=decision.pairs,
                processes=decision.processes,
            ),
        )

    def _why_unpaired(self, test: TestOnBothSides | None, reached: dict, timer_name: str) -> str | None:
        if test is None:
            return "not a test run on both sides"
        if None in (reached[p] for p in self.references):
            return test.why_unpaired(self.references[0])
        if None in (reached[p] for p in self.candidates):
            first = next(p for p in self.candidates if reached[p] is None)
            done = test.finished.get(first)
            how = f": {done.outcome}, {done.error}" if done is not None and done.error else ""
            return f"the working tree's test did not make this call in {first.where}{how}"
        timers = {message.timer for message in reached.values()}
        if timers != {timer_name}:
            ours = reached[self.candidates[0]].timer
            theirs = reached[self.references[0]].timer
            return f"timers differ ({theirs} at the reference, {ours} here)"
        return None


def _decide(log_ratios, processes, final, *, threshold, alpha, process_pairs):
    if process_pairs > 1:
        return paired.process_decision(log_ratios, processes, threshold=threshold, alpha=alpha, final=final)
    return paired.paired_decision(log_ratios, threshold=threshold, alpha=alpha, final=final)
