"""``--bench-confirm``: before a benchmark fails in history mode, measure it again in fresh
processes of the same tree and judge all of them together.

Why: a process carries its own steady bias. Where the interpreter, the allocator and the loader
put things (address-space layout, the environment's size) moves a pure-Python workload by a few
percent for the life of the process, and on the CI VM now and then by much more: in gate_real's
loaded runs, ``w_matmul`` read 2.73-2.95 ms in every pass of one process against 2.40-2.47 ms in
its baseline, while the other benchmarks and the canary of that process did not move (about one
process in eight; 30 fresh processes of the unchanged code spread 2.39-2.55 ms, and 2.52-2.66 ms
with address randomisation off). Passes, the run-effect model and settling all measure inside the
one process, so none of them can see it; that process's draw was the run's only false alarm.
A/B already spreads its measurement over several processes per side for the same reason.

How: each fresh process is a served process (ab/served.py, unpinned, thread pools as in this
session) that collects the test's file, runs the test, warms the suspect call up and measures it
in as many blocks of rounds as this process measured it in passes, so each fresh record reads as a
run of its own. The records join the candidate's in ``gate.compare_runs``, judged as one run
measured in several processes: centred on the median process, with the variance of a median of
that many (gate.compare_runs says why their spread stays out of the between-run noise). A
slowdown of the code slows every process and stays REGRESSED; one process's bias, this one's or a
fresh one's, moves the median nowhere. But a fresh process has run one test, not the suite, and
can draw a state of its own: revised() lets the fresh processes clear a verdict only where they
read the benchmark as its baseline did. A slowdown this process could not decide (INCONCLUSIVE
past the threshold) is measured again too: the processes together may decide it. The run file
keeps each fresh process's rounds (BenchRecord.confirm), so `tesserabench compare` judges the
file as the plugin did. It costs nothing until a benchmark looks slower, then about the test's
own time per process.

A baseline measured in several processes: with --bench-save, every benchmark is measured in
--bench-save-processes fresh processes too (default 2; SaveProcesses: started once per run, each
running every test in turn), and the baseline keeps them; the gate reads
each as a run of its own (with_processes). A baseline of three back-to-back runs of one process each
knows three draws of a process's bias, so its centre carries the bias of the process it happened
to run in (gate_real run Y: unchanged `w_sum` read IMPROVED in 25 of 48 candidate runs, its three
baseline processes all in a slow state), and the between-run noise it learns from two degrees of
freedom needs t > 4.7 at alpha/m (a +10% slowdown of a benchmark with 1.7% run-to-run noise stays
undecided). Three saves of three processes each know nine draws. The fresh processes of a save
run are also the confirmation of a benchmark about to fail in it, measured once.

A slowdown held back because the canary caught the machine slow right before it
(run_conditions.machine_moved) is measured again too, the canary timed before each fresh
measurement: the machine explains the slowdown then only when it was slow before every
measurement, so a slow moment before one of them no longer hides a slowdown the others all see
(gate_real run T: two +10% slowdowns of `w_sieve` read +12-14% held back by a canary +31-33%
slow for a moment).
"""

from __future__ import annotations

import dataclasses
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from pytest_tesserabench.ab.served import Reached, ServedProcess, TestDone, measurement_args
from pytest_tesserabench.ab.worktree import ABError
from pytest_tesserabench.options import Settings
from pytest_tesserabench.results import BenchRecord, RunDocument, Sampling, Stats

# What settles a verdict the processes disagree on: not more rounds in any one of them.
DISAGREE_HINT = (
    "the processes that measured it disagree (see its note): a process's own bias, which more rounds do not "
    "remove; --bench-ab=REF measures it in several processes per side, or more fresh ones (--bench-confirm=4)"
)
MIN_BLOCK_ROUNDS = 3  # a block's median needs a few rounds to be a centre at all


@dataclass
class Confirmation:
    """What the fresh processes measured: per process, the suspects' records (by record id)."""

    processes: list[dict[str, BenchRecord]] = field(default_factory=list)
    seconds: float = 0.0
    problem: str | None = None  # why fewer processes than asked measured (the verdict stands then)


def blocks_like(record: BenchRecord) -> list[int]:
    """Rounds per block for a fresh process: as many blocks as ``record`` has passes, each of its
    mean pass length, so the gate reads a fresh record's centre as it reads this one's."""
    sampling = record.sampling
    passes = sampling.pass_rounds if sampling is not None and len(sampling.pass_rounds) > 1 else ()
    if passes:
        size = math.ceil(sum(passes) / len(passes))
        return [max(size, MIN_BLOCK_ROUNDS)] * len(passes)
    return [max(len(record.rounds_ms), MIN_BLOCK_ROUNDS)]


def confirm(
    suspects: list[BenchRecord],
    *,
    processes: int,
    settings: Settings,
    rootdir: Path,
    cache_dir: Path | None,
    extra_args: list[str] = (),
    canary: Callable[[], float | None] = lambda: None,
) -> Confirmation:
    """Measure ``suspects`` (records of one test) again in ``processes`` fresh processes, one at a
    time, ``canary()`` timed (here) right before each measurement, as before any other. Never
    raises for the processes' sake: what went wrong is ``problem``."""
    nodeid = suspects[0].nodeid
    start = time.perf_counter()
    result = Confirmation()
    for index in range(processes):
        process = ServedProcess(
            rootdir,
            where=f"fresh process {index + 1} of {processes} for {nodeid}",
            cwd=rootdir,
            test_files=[nodeid.split("::", 1)[0]],
            pytest_args=[*measurement_args(settings), f"--rootdir={rootdir}", *extra_args],
            cache_dir=cache_dir,
            option="--bench-confirm",
            pinned=False,
        )
        try:
            process.launch()
            process.connect()
            records = _measure_in(process, nodeid, suspects, canary)
        except ABError as exc:
            result.problem = str(exc)
            break
        finally:
            process.close()
        if isinstance(records, str):
            result.problem = f"--bench-confirm: {process.where}: {records}"
            break
        result.processes.append(records)
    result.seconds = time.perf_counter() - start
    return result


class SaveProcesses:
    """--bench-save-processes' fresh processes: started once, at the first test a saving run
    measures again, each collecting every test file of the run, and kept until the run ends; each
    measures every test's calls in turn (``measure``).

    Why not a process per test, as --bench-confirm starts: that paid pytest's start-up and
    collection once per test and process (about 2.8 s per test on the CI VM, more where the tests
    import torch or create a CUDA context), on every save. And a process that runs the suite, as
    the session's does, is the kind of process the baseline speaks for; the k-th of them is then
    one process for every benchmark, as the run-effect model reads it (a run of its own). A process
    that dies is replaced at the next test; the test it died in is saved without it."""

    def __init__(
        self, count: int, *, settings: Settings, rootdir: Path, cache_dir: Path | None, extra_args, test_files
    ):
        self.settings, self.rootdir, self.cache_dir = settings, rootdir, cache_dir
        self.extra_args, self.test_files = list(extra_args), list(test_files)
        self.slots: list[ServedProcess | None] = [None] * count
        self.started = 0  # processes started in all (more than ``count`` where one was replaced)
        self.cannot_start: str | None = None  # why a process did not start: not tried again

    def measure(self, records: list[BenchRecord], canary: Callable[[], float | None] = lambda: None) -> Confirmation:
        """``records`` (of one test) measured in each process; never raises for the processes' sake."""
        start = time.perf_counter()
        result = Confirmation()
        problem = self._start_missing()
        for index, process in enumerate(self.slots):
            if process is None:  # (it cannot start: said once per test below)
                continue
            try:
                measured = _measure_in(process, records[0].nodeid, records, canary)
            except ABError as exc:
                process.close()
                self.slots[index] = None
                problem = problem or str(exc)
                continue
            if isinstance(measured, str):
                problem = problem or f"--bench-save-processes: {process.where}: {measured}"
                continue
            result.processes.append(measured)
        result.problem = problem if len(result.processes) < len(self.slots) else None
        result.seconds = time.perf_counter() - start
        return result

    def _start_missing(self) -> str | None:
        """Start every empty slot's process (collecting at once); why one could not start. One
        that could not start once (the tests do not collect there) is not tried again."""
        if self.cannot_start is not None:
            return self.cannot_start
        missing = [index for index, process in enumerate(self.slots) if process is None]
        for index in missing:
            replacing = self.started >= len(self.slots)
            self.started += 1
            self.slots[index] = ServedProcess(
                self.rootdir,
                where=f"fresh process {index + 1} of {len(self.slots)}" + (" (a replacement)" if replacing else ""),
                cwd=self.rootdir,
                test_files=self.test_files,
                pytest_args=[*measurement_args(self.settings), f"--rootdir={self.rootdir}", *self.extra_args],
                cache_dir=self.cache_dir,
                option="--bench-save-processes",
                pinned=False,
            )
            self.slots[index].launch()
        for index in missing:
            try:
                self.slots[index].connect()
            except ABError as exc:
                self.slots[index].close()
                self.slots[index] = None
                self.cannot_start = self.cannot_start or str(exc)
        return self.cannot_start

    def close(self) -> None:
        for process in self.slots:
            if process is not None:
                process.close()
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
        moment = canary()  # the machine's speed now: run_conditions.machine_moved reads it
        process.warm_up(None)
        blocks = [process.block(rounds) for rounds in blocks_like(record)]
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
    )
    return dataclasses.replace(
        record, rounds_ms=rounds, samples_ms=samples, stats=Stats.of(rounds, samples), sampling=sampling, verdict=None
    )


def as_json(fresh: BenchRecord) -> dict:
    """A fresh process's measurement as the run file keeps it (BenchRecord.confirm)."""
    passes = fresh.sampling.pass_rounds if fresh.sampling is not None else ()
    return {"rounds_ms": list(fresh.rounds_ms), "pass_rounds": list(passes), "canary_ms": fresh.canary_ms}


def fresh_records(record: BenchRecord) -> list[BenchRecord]:
    """The fresh processes a run file kept for ``record`` (BenchRecord.confirm), as records."""
    rebuilt = []
    for process in record.confirm or []:
        rounds, passes = list(process.get("rounds_ms", [])), tuple(process.get("pass_rounds", []))
        sampling = dataclasses.replace(record.sampling or Sampling(), passes=max(len(passes), 1), pass_rounds=passes)
        rebuilt.append(
            dataclasses.replace(
                record,
                rounds_ms=rounds,
                samples_ms=[],
                stats=Stats.of(rounds) if rounds else None,
                sampling=sampling,
                canary_ms=process.get("canary_ms"),
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
        dataclasses.replace(
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


def suspects(records: list[BenchRecord], verdicts: dict) -> list[BenchRecord]:
    """The records to measure again: about to fail on their timing; held back only because the
    canary caught the machine slow right before them (at other moments it may explain nothing);
    or INCONCLUSIVE with the point estimate past the threshold, where this process alone could
    not decide what two more processes and it together can (gate.compare_runs: the median of
    three processes is a centre with about half the between-run variance of one). Such a one
    fails only where the verdict on all of them is REGRESSED, so picking which to measure again
    adds no false alarm beyond that test's own (as far as fresh processes read like the
    baseline's: revised() keeps those that read it faster from clearing anything)."""
    from pytest_tesserabench.run_conditions import MACHINE_MOVED_HINT

    def suspect(verdict) -> bool:
        if verdict is None or verdict.reasons:  # (kernel figures: deterministic, nothing to confirm)
            return False
        if verdict.status == "REGRESSED" or verdict.hint_text == MACHINE_MOVED_HINT:
            return True
        undecided = verdict.status == "INCONCLUSIVE" and verdict.ratio is not None
        return undecided and verdict.ratio >= 1 + (verdict.threshold or 0.0)

    return [record for record in records if suspect(verdicts.get(record.id))]


def revised(first, judged, record: BenchRecord, confirmation: Confirmation, threshold: float):
    """The verdict once the fresh processes measured it. ``first``: this process's own verdict;
    ``judged``: the verdict on every process (gate.compare_runs, the median process).

    The fresh processes speak for the code only where they read the benchmark as a process of
    the baseline would. A fresh process has run one test, not the suite, and on the CI VM that
    alone can move a workload: gate_real run X's quiet `w_dict` read 10-13% faster than in
    the session's process in 5 of 12 fresh processes (a state a process with the suite's heap
    behind it rarely draws: docs/gate.md), so two fast ones turned a +10% slowdown into
    IMPROVED. Hence, with ``limit`` = 1 + the applied threshold and the fresh processes'
    median ratio ``fresh``:

    * fresh >= limit (they read it slower too): confirmed. A REGRESSED of this process stands
      even where the median of all of them lands just short of deciding;
    * fresh <= 1 / limit (they read it faster than its baseline did): they drew a state of their
      own and cannot clear it; this process's verdict stands;
    * between (they read it as the baseline did): the verdict on all of them.
    The note says what each fresh process measured and which of these it was; where this process
    alone read it past the threshold and the verdict is undecided, the hint says that more rounds
    would not settle it."""
    ratios = fresh_ratios(confirmation, record, first.ratio)
    verdict, outcome = settled(first, judged, ratios, threshold)
    said = note(confirmation, ratios, first.ratio, verdict.status, outcome)
    if confirmation.problem:
        said += f"; {confirmation.problem}"
    verdict = dataclasses.replace(verdict, notes=(*verdict.notes, said))
    if verdict.status == "INCONCLUSIVE" and disagree(ratios, first, threshold):
        verdict = dataclasses.replace(verdict, hint_text=DISAGREE_HINT)
    return verdict


def settled(first, judged, ratios: list[float], threshold: float):
    """(the verdict, why this process's own verdict was kept or None): revised()'s rule, also
    applied to a run file judged again offline (run_effect.compare_run)."""
    limit = 1 + (first.threshold if first.threshold is not None else threshold)
    fresh = statistics.median(ratios) if ratios else None
    if fresh is not None and fresh >= limit and first.status == "REGRESSED" and judged.status != "REGRESSED":
        return first, "confirmed: they read it past the threshold too"
    if fresh is not None and fresh <= 1 / limit and first.status != judged.status:
        return first, f"they read it faster than its baseline did, a state of their own: {first.status} stands"
    return judged, None


def fresh_ratios(confirmation: Confirmation, record: BenchRecord, first_ratio: float) -> list[float]:
    """Each fresh process's ratio to the baseline, in the verdict's own terms: this process's
    ratio scaled by how the fresh process's centre stands to this one's."""
    from pytest_tesserabench.gate import log_centre

    first_centre = log_centre(record)
    ratios = []
    for records in confirmation.processes:
        centre = log_centre(records[record.id]) if record.id in records else None
        if centre is not None and first_centre is not None:
            ratios.append(first_ratio * math.exp(centre - first_centre))
    return ratios


def disagree(ratios: list[float], first, threshold: float) -> bool:
    """Whether this process alone read the benchmark past the threshold: the fresh processes'
    median (``ratios``) did not."""
    limit = 1 + (first.threshold if first.threshold is not None else threshold)
    return bool(ratios) and first.ratio > limit and statistics.median(ratios) < limit


def note(
    confirmation: Confirmation, ratios: list[float], first_ratio: float, status: str, outcome: str | None = None
) -> str:
    """The verdict's note: what each fresh process measured, and what judging them all said
    (or ``outcome``, where revised() kept this process's verdict)."""
    changes = [f"{(ratio - 1) * 100:+.1f}%" for ratio in ratios]
    if outcome is None:
        outcome = "judged on all: " + ("confirmed" if status == "REGRESSED" else f"not confirmed, {status}")
    return (
        f"measured again in {len(changes)} fresh process(es): {', '.join(changes)} "
        f"(here {(first_ratio - 1) * 100:+.1f}%; {confirmation.seconds:.1f} s); {outcome}"
    )
