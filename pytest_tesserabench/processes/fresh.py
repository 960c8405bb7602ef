"""Fresh processes: a benchmark measured again in new pytest processes of the same tree.

Why: a process carries its own steady bias. Where the interpreter, the allocator and the loader
put things moves a workload by a few percent for the life of the process. Passes, the run-effect
model and more rounds all measure inside the one process, so none of them can see it. (A process
that reads a benchmark +50% for its whole life is often one a slow vCPU held: each pass, and each
block here, starts on the next CPU for that, machine/cpu_turns.py.) A/B spreads its
measurement over several processes per side for the same reason.

Two uses, both history mode's (the gate's pipeline, gate/pipeline.py, judges what they measure):

* ``--bench-confirm=N`` (``confirm``): before a benchmark fails, or when it is undecided past its
  threshold, it is measured again in N fresh processes, one at a time, each collecting the test's
  file, running the test and measuring the call in as many blocks of rounds as this process
  measured it in passes, so each fresh record reads as a run of its own; the gate judges them
  with this process as one run (the median process). It costs nothing until a benchmark looks
  slower, then about the test's own time per process.
* ``--bench-save-processes=N`` (``SaveProcesses``): a saving run measures every benchmark in N
  fresh processes too, started once per run, each running every test in turn, and the baseline
  keeps them: a baseline of three back-to-back runs of one process each knows three draws of a
  process's bias; three saves of three processes know nine. A benchmark about to fail in a run
  that also saves is judged on those, measured once.

The run file keeps what each fresh process measured (BenchRecord.confirm), so `tesserabench
compare` judges the file as the plugin did. Each fresh measurement is preceded by the canary (the
machine's speed at that moment, kept beside it).
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from pathlib import Path

from pytest_tesserabench.gate.pipeline import Processes
from pytest_tesserabench.options import Settings
from pytest_tesserabench.processes.served import (
    ProcessError,
    Reached,
    ServedProcess,
    TestDone,
    close_all,
    measurement_args,
)
from pytest_tesserabench.record.results import BenchRecord, FreshProcess, Sampling, Stats

MIN_BLOCK_ROUNDS = 3  # a block's median needs a few rounds to be a centre at all


def blocks_like(record: BenchRecord) -> list[int]:
    """Rounds per block for a fresh process: as many blocks as ``record`` has passes, each of its
    mean pass length, so the gate reads a fresh record's centre as it reads this one's. (Not
    fewer to save time: the lowest of shorter blocks' medians reads lower, a bias of its own
    between the processes; in the simulation half-length blocks cost a fifth of the slowdowns
    the baseline said were detectable.) Its rounds are sized as a pass's: ``pass_share``."""
    sampling = record.sampling
    passes = sampling.pass_rounds if sampling is not None and len(sampling.pass_rounds) > 1 else ()
    if passes:
        size = math.ceil(sum(passes) / len(passes))
        return [max(size, MIN_BLOCK_ROUNDS)] * len(passes)
    return [max(len(record.rounds_ms), MIN_BLOCK_ROUNDS)]


def pass_share(record: BenchRecord) -> float:
    """The share of ``--bench-max-time`` one of ``record``'s passes measured with (each pass
    measures its share, and warm-up sizes a round to a twentieth of it): a fresh process warms up
    for that share, so that its rounds hold as many calls as the record's did. With the whole
    budget its rounds would be as many times longer as there are passes: each block would cost a
    whole measurement, and its round medians, of more calls each, would be a steadier kind of
    reading than the record's."""
    sampling = record.sampling
    passes = len(sampling.pass_rounds) if sampling is not None else 1
    return 1.0 / passes if passes > 1 else 1.0


def fresh_process(
    where: str, test_files: list[str], *, option: str, settings: Settings, rootdir: Path, cache_dir, extra_args
) -> ServedProcess:
    """A served process of this tree (not started), measuring as this session measures, unpinned."""
    return ServedProcess(
        rootdir,
        where=where,
        cwd=rootdir,
        test_files=test_files,
        pytest_args=[*measurement_args(settings), f"--rootdir={rootdir}", *extra_args],
        cache_dir=cache_dir,
        option=option,
        pinned=False,
    )


class ProcessPool:
    """A run's fresh processes: started once, at the first test that needs them, each collecting
    every benchmark test file of the run, and kept until the run ends; each measures a test's
    calls in turn when asked (``measure``). ``option`` names what they serve in messages.

    Why not a process per test: that paid pytest's start-up and collection once per test and
    process (seconds per test, more where the tests import torch or create a CUDA
    context). And a process that runs the suite, as the session's does, is the kind of process the
    baseline speaks for; the k-th of a save's is then one process for every benchmark, as the
    run-effect model reads it (a run of its own). A process that dies is replaced at the next test;
    the test it died in is measured without it."""

    def __init__(
        self,
        count: int,
        *,
        option: str,
        settings: Settings,
        rootdir: Path,
        cache_dir: Path | None,
        extra_args,
        test_files,
    ):
        self.option = option
        self.settings, self.rootdir, self.cache_dir = settings, rootdir, cache_dir
        self.extra_args, self.test_files = list(extra_args), list(test_files)
        self.slots: list[ServedProcess | None] = [None] * count
        self.started = 0  # processes started in all (more than ``count`` where one was replaced)
        self.cannot_start: str | None = None  # why a process did not start: not tried again

    def measure(self, records: list[BenchRecord], canary: Callable[[], float | None] = lambda: None) -> Processes:
        """``records`` (of one test) measured in each process; never raises for the processes' sake."""
        start = time.perf_counter()
        measured_by: list[dict[str, BenchRecord]] = []
        problem = self._start_missing()
        for index, process in enumerate(self.slots):
            if process is None:  # (it cannot start: said once per test below)
                continue
            try:
                measured = _measure_in(process, records[0].nodeid, records, canary)
            except ProcessError as exc:
                process.close()
                self.slots[index] = None
                problem = problem or str(exc)
                continue
            if isinstance(measured, str):
                problem = problem or f"{self.option}: {process.where}: {measured}"
                continue
            measured_by.append(measured)
        problem = problem if len(measured_by) < len(self.slots) else None
        return Processes(measured_by, time.perf_counter() - start, problem)

    def _start_missing(self) -> str | None:
        """Start every empty slot's process (collecting at once); why one could not start. One
        that could not start once (the tests do not collect there) is not tried again."""
        if self.cannot_start is not None:
            return self.cannot_start
        missing = [index for index, process in enumerate(self.slots) if process is None]
        for index in missing:
            replacing = self.started >= len(self.slots)
            self.started += 1
            self.slots[index] = fresh_process(
                f"fresh process {index + 1} of {len(self.slots)}" + (" (a replacement)" if replacing else ""),
                self.test_files,
                option=self.option,
                settings=self.settings,
                rootdir=self.rootdir,
                cache_dir=self.cache_dir,
                extra_args=self.extra_args,
            )
            self.slots[index].launch()
        for index in missing:
            try:
                self.slots[index].connect()
            except ProcessError as exc:
                self.slots[index].close()
                self.slots[index] = None
                self.cannot_start = self.cannot_start or str(exc)
        return self.cannot_start

    def close(self, *, interrupted: bool = False) -> None:
        close_all([process for process in self.slots if process is not None], interrupted=interrupted)
        self.slots = [None] * len(self.slots)


def _measure_in(
    process: ServedProcess, nodeid: str, suspects: list[BenchRecord], canary
) -> dict[str, BenchRecord] | str:
    """The suspects measured in ``process`` (record id -> record), or why not."""
    wanted = {(record.name, record.timer): record for record in suspects}
    if not process.run_test(nodeid):
        return "the test is not collected there"
    measured: dict[str, BenchRecord] = {}
    while True:
        message = process.next_call()
        if isinstance(message, TestDone):
            break
        record = wanted.get((message.name, message.timer)) if isinstance(message, Reached) else None
        if record is None or record.id in measured:
            process.skip()
            continue
        moment = canary()  # the machine's speed now, kept beside the measurement
        process.warm_up(None, share=pass_share(record))
        blocks = [process.block(rounds, turn=k, memory=True) for k, rounds in enumerate(blocks_like(record))]
        process.done()
        measured[record.id] = dataclasses.replace(_fresh_record(record, blocks), canary_ms=moment)
    if message.outcome != "passed":
        said = f"the test {message.outcome} there" + (f": {message.error}" if message.error else "")
        if message.outcome == "skipped":  # (it reads the ini file and addopts, and this run's measuring options)
            said += "; options given on this run's command line do not reach a fresh process"
        return said
    if len(measured) < len(wanted):
        return "the test did not make the same bench() calls there"
    return measured


def _fresh_record(record: BenchRecord, blocks) -> BenchRecord:
    """``record`` as the fresh process measured it: its rounds, one pass per block."""
    rounds = [r for block in blocks for r in block.rounds_ms]
    samples = [s for block in blocks for s in block.samples_ms]
    sampling = record.sampling or Sampling()
    sampling = dataclasses.replace(
        sampling,
        passes=len(blocks),
        pass_rounds=tuple(len(block.rounds_ms) for block in blocks),
        settle_s=0.0,
        run_queue_wait_s=sum(block.run_queue_wait_s for block in blocks),
        others_cpu_s=0.0,
        others_wall_s=0.0,
        own_cpu_s=0.0,
        memory_canary=tuple(block.memory_canary for block in blocks if block.memory_canary is not None),
    )
    return dataclasses.replace(
        record, rounds_ms=rounds, samples_ms=samples, stats=Stats.of(rounds, samples), sampling=sampling, verdict=None
    )


def as_kept(fresh: BenchRecord) -> FreshProcess:
    """A fresh process's measurement as the run file keeps it (BenchRecord.confirm)."""
    passes = fresh.sampling.pass_rounds if fresh.sampling is not None else ()
    memory = fresh.sampling.memory_canary if fresh.sampling is not None else ()
    return FreshProcess(tuple(fresh.rounds_ms), tuple(passes), fresh.canary_ms, tuple(memory))
