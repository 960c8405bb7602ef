"""Simulated runs for the gate's whole pipeline: run documents, as the plugin writes them, judged by
the same code `tesserabench compare` and the plugin use (centres of passes, the run-effect model,
the run's shared shift, fresh processes, run conditions).

The machine, in log time, per benchmark b of a suite (each level a draw, each draw seeded):

* a **run** (one save, or the candidate run) moves every benchmark by a shared shift S, each
  benchmark by its own response to it (beta_b * S: benchmarks do not slow alike under load), plus a
  drift of its own (sd ``run_sd[b]``). Quiet runs: S ~ N(0, 1%); a loaded candidate: S of 30-60%,
  beta_b from 0.7 to 1.3. The candidate run, later than the back-to-back saves, also moves each
  benchmark its own way (sd ``condition_sd[b]``: on the CI VM a quiet candidate ten minutes after
  its baseline read unchanged benchmarks -6% to +10%);
* a **process** adds a steady bias of its own per benchmark (sd ``process_sd[b]``), now and then
  an odd state (with probability ``odd_rate``, +20% to +70% for its whole life); one benchmark of
  the suite is bimodal (each process sits at +8% with probability 0.3: ``two_states``);
* a **pass** of the session's process can catch a slow stretch of the machine (probability
  ``stretch_rate``: +5% to +40% for the benchmarks measured in it); so can the **fresh processes**
  of a benchmark, which measure it one after the other at one moment (``fresh_stretch_rate``, 0
  unless a machine says: the same stretch for all of them, and for that benchmark only, as a
  neighbour contending for the memory slows a memory-bound benchmark and leaves the others be);
* in a candidate run, a benchmark can be **unsteady** (probability ``unsteady_rate``, 0 unless a
  machine says): each pass and each fresh process's block reads it slower by its own 0-40%, as a
  multi-threaded benchmark does while the machine's CPUs come and go (it needs all of them at
  once), a state the back-to-back saves did not draw;
* on a machine with **slow phases** (``slow_phase_rate``, 0 unless a machine says), one benchmark
  of the suite is multi-threaded (its records say it kept 2 CPUs busy) and each run, a save or the
  candidate, is in a slow phase for it with that probability: its level is +15% to +40% for the
  run, and each of the run's processes (the session's, all its passes; each fresh one) is caught in
  it with probability 0.75, as a two-thread benchmark on a 2-vCPU VM reads a slow state of the
  machine for minutes, in saves and compares alike. After each pass the pool canary
  (measure/canary.py) reads the same moment 0.7 to 1.6 times as strongly (a run's draw), with 2%
  noise and now and then (0.1) a burst of +5% to +40% of its own;
* on a machine with **memory stretches** (``memory_rate``, 0 unless a machine says), one benchmark
  of the suite streams memory (it takes 0.7 to 1.2 times, a suite's draw, the machine's memory
  slowness, log on log) and each pass and each fresh block meets the memory at a speed of its
  own: slow (+8% to +25%) with probability 0.2, or 0.8 in a run the machine spends in a slow
  stretch (a run's draw, with probability ``memory_rate``; saves and candidates alike), as a
  shared host's memory reads from one second to the next. After each pass and block the memory
  canary (measure/canary.py) reads the same moment with 1% noise, for every benchmark. With
  ``memory_whole_runs`` a run in a stretch meets it in every pass and fresh block at one level,
  and the canary's noise is ``memory_noise``, as the CI VM's did (its readings scatter 4-8%);
* a **round** adds round noise (sd ``round_sd[b]``) and now and then a spike (+10-50%).

A baseline is ``history`` saves, each the session's process in 4 passes and ``save_processes``
fresh processes in 4 blocks. A candidate run is one session process in 4 passes, with
``confirm`` fresh processes measured for every benchmark and kept in the file (the pipeline
reads them only for the benchmarks it would measure again). One baseline save in ``busy_save``
is timed on a busy machine (+20% to +100% for every benchmark of its session process).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from pytest_tesserabench.gate.pipeline import History
from pytest_tesserabench.record.results import BenchRecord, FreshProcess, RunDocument, Sampling, Stats

PASSES = 4
ROUNDS_PER_PASS = 6
FRESH_ROUNDS = 6  # a fresh process's rounds per block (confirm.blocks_like: as a pass)
CANARY_MS = 2.0
POOL_MS = 0.007  # the pool canary on a quiet machine (torch's two threads)
MEMORY_RATIO = 1.4  # the memory canary (memory against cache) at the machine's fast memory speed


@dataclass(frozen=True)
class Machine:
    """How noisy the simulated machine is (the module's docstring says what each level is)."""

    benchmarks: int = 8
    history: int = 3
    save_processes: int = 2
    confirm: int = 2
    shared_sd: float = 0.01  # quiet runs' shared shift
    loaded: tuple[float, float] | None = None  # the candidate's shared shift range (log-relative), or quiet
    response: tuple[float, float] = (0.7, 1.3)  # beta_b: how much of the shared shift a benchmark takes
    run_sd: tuple[float, float] = (0.002, 0.02)  # range of the benchmarks' own run drift
    condition_sd: tuple[float, float] = (0.005, 0.03)  # range of the candidate's own drift per benchmark
    process_sd: tuple[float, float] = (0.003, 0.03)
    round_sd: tuple[float, float] = (0.005, 0.04)
    odd_rate: float = 0.03
    two_states: tuple[float, float] = (0.08, 0.3)  # the bimodal benchmark's slow state; how often a process is in it
    stretch_rate: float = 0.1
    fresh_stretch_rate: float = 0.0
    unsteady_rate: float = 0.0
    slow_phase_rate: float = 0.0
    memory_rate: float = 0.0
    memory_noise: float = 0.01  # the memory canary's own noise per reading (log sd)
    memory_whole_runs: bool = False  # a run in a slow stretch meets it in every pass and fresh block, at one level
    spike_rate: float = 0.05
    busy_save: float = 0.1  # probability that a baseline save's session process ran on a busy machine


@dataclass(frozen=True)
class Suite:
    """One simulated project: its benchmarks' levels and noise, fixed across its runs."""

    ids: list[str]
    base_ms: np.ndarray
    run_sd: np.ndarray
    condition_sd: np.ndarray
    process_sd: np.ndarray
    round_sd: np.ndarray
    bimodal: int  # index of the benchmark whose processes sit at two levels
    threaded: int | None = None  # index of the multi-threaded benchmark (machines with slow phases)
    streaming: int | None = None  # index of the benchmark that streams memory (machines with memory stretches)
    memory_slope: float = 0.0  # how much of the memory's slowness it takes (log on log)


def make_suite(rng: np.random.Generator, machine: Machine) -> Suite:
    m = machine.benchmarks
    return Suite(
        ids=[f"test_w.py::test_w[b{i}]" for i in range(m)],
        base_ms=np.exp(rng.uniform(math.log(0.1), math.log(20.0), m)),
        run_sd=rng.uniform(*machine.run_sd, m),
        condition_sd=rng.uniform(*machine.condition_sd, m),
        process_sd=rng.uniform(*machine.process_sd, m),
        round_sd=rng.uniform(*machine.round_sd, m),
        bimodal=int(rng.integers(m)),
        # (drawn only where the machine has slow phases: other machines' draws stay as they were)
        threaded=int(rng.integers(m)) if machine.slow_phase_rate > 0 else None,
        **(
            {"streaming": int(rng.integers(m)), "memory_slope": float(rng.uniform(0.7, 1.2))}
            if machine.memory_rate > 0
            else {}
        ),
    )


def _process_levels(rng, suite: Suite, machine: Machine) -> np.ndarray:
    """A process's steady bias per benchmark (log)."""
    m = len(suite.ids)
    bias = rng.normal(0.0, suite.process_sd)
    odd = rng.random(m) < machine.odd_rate
    bias += odd * np.log1p(rng.uniform(0.2, 0.7, m))
    step, rate = machine.two_states
    if rng.random() < rate:
        bias[suite.bimodal] += math.log1p(step)
    return bias


def _rounds(
    rng,
    level: float,
    sd: float,
    machine: Machine,
    stretches: bool,
    rounds: int = ROUNDS_PER_PASS,
    unsteady=False,
    by_pass=None,
):
    """Round medians (ms) of one benchmark in one process: PASSES passes (blocks) of ``rounds``;
    ``by_pass``: more (log) for each pass."""
    out = []
    for index in range(PASSES):
        pass_level = level + (by_pass[index] if by_pass is not None else 0.0)
        if stretches and rng.random() < machine.stretch_rate:
            pass_level += math.log1p(rng.uniform(0.05, 0.4))
        if unsteady:
            pass_level += math.log1p(rng.uniform(0.0, 0.4))
        noise = rng.normal(0.0, sd, rounds)
        spikes = (rng.random(rounds) < machine.spike_rate) * np.log1p(rng.uniform(0.1, 0.5, rounds))
        out.append(np.exp(pass_level + noise + spikes))
    return np.concatenate(out)


def _record(
    bench_id: str,
    rounds_ms: np.ndarray,
    canary_ms: float | None,
    fresh: list | None,
    cpus: float | None = None,
    pool: tuple[float, ...] = (),
    memory: tuple[float, ...] = (),
) -> BenchRecord:
    nodeid = bench_id
    rounds = [float(r) for r in rounds_ms]
    cpu = {"own_cpu_s": cpus, "others_wall_s": 1.0} if cpus is not None else {}  # (own_cpus(): cpus)
    cpu = {**cpu, "pool_canary_ms": pool} if pool else cpu
    cpu = {**cpu, "memory_canary": memory} if memory else cpu
    return BenchRecord(
        nodeid=nodeid,
        name=None,
        group="test_w.py::test_w",
        timer="cpu",
        rounds_ms=rounds,
        stats=Stats.of(rounds),
        sampling=Sampling(passes=PASSES, pass_rounds=(ROUNDS_PER_PASS,) * PASSES, **cpu),
        canary_ms=canary_ms,
        confirm=tuple(fresh) if fresh else None,
    )


def make_run(
    rng: np.random.Generator,
    suite: Suite,
    machine: Machine,
    *,
    fresh: int,
    slowdown: np.ndarray | None = None,
    loaded: bool = False,
    busy: bool = False,
) -> RunDocument:
    """One run of the suite: its session process (in passes) and ``fresh`` fresh processes kept in
    each record (``confirm``)."""
    m = len(suite.ids)
    if loaded and machine.loaded is not None:
        shift = rng.uniform(*machine.loaded)
        response = rng.uniform(*machine.response, m)
    else:
        shift, response = rng.normal(0.0, machine.shared_sd), np.ones(m)
    run_level = np.log(suite.base_ms) + response * shift + rng.normal(0.0, suite.run_sd)
    if loaded:  # (the candidate: later than the saves, under conditions of its own)
        run_level = run_level + rng.normal(0.0, suite.condition_sd)
    if slowdown is not None:
        run_level = run_level + np.log1p(slowdown)
    session = run_level + _process_levels(rng, suite, machine)
    if busy:
        session = session + np.log1p(rng.uniform(0.2, 1.0)) * rng.uniform(0.5, 1.5, m)
    processes = [run_level + _process_levels(rng, suite, machine) for _ in range(fresh)]
    unsteady = np.zeros(m, dtype=bool)  # (drawn only where the machine has them, as below)
    if loaded and machine.unsteady_rate > 0:
        unsteady = rng.random(m) < machine.unsteady_rate
    canary = CANARY_MS * math.exp(shift * rng.uniform(*machine.response))
    moment = np.zeros(m)  # (drawn only where the machine has them: other machines' draws stay as they were)
    if machine.fresh_stretch_rate > 0:
        moment = (rng.random(m) < machine.fresh_stretch_rate) * np.log1p(rng.uniform(0.05, 0.4, m))
    slow = np.zeros(1 + fresh)  # (the session's process, then each fresh one: drawn only on such machines)
    pool: tuple[float, ...] = ()
    if suite.threaded is not None:
        if rng.random() < machine.slow_phase_rate:
            slow = (rng.random(1 + fresh) < 0.75) * math.log1p(rng.uniform(0.15, 0.4))
        bursts = (rng.random(PASSES) < 0.1) * np.log1p(rng.uniform(0.05, 0.4, PASSES))
        noise = rng.normal(0.0, 0.02, PASSES) + bursts
        pool = tuple(float(p) for p in POOL_MS * np.exp(rng.uniform(0.7, 1.6) * slow[0] + noise))
    memory = None  # (drawn only on machines with memory stretches) per benchmark, process and pass: log
    if suite.streaming is not None:
        if machine.memory_whole_runs:
            stretch = rng.random() < machine.memory_rate
            memory = np.full((m, 1 + fresh, PASSES), stretch * math.log1p(rng.uniform(0.08, 0.25)))
        else:
            slow_rate = 0.8 if rng.random() < machine.memory_rate else 0.2
            slow_now = rng.random((m, 1 + fresh, PASSES)) < slow_rate
            memory = slow_now * np.log1p(rng.uniform(0.08, 0.25, (m, 1 + fresh, PASSES)))
        readings = MEMORY_RATIO * np.exp(memory + rng.normal(0.0, machine.memory_noise, memory.shape))

    def memory_of(b: int, k: int):
        """(the memory's move for benchmark b's passes in process k: what it takes; the canary's readings)"""
        if memory is None:
            return None, ()
        takes = memory[b, k] * (suite.memory_slope if b == suite.streaming else 0.0)
        return takes, tuple(float(r) for r in readings[b, k])

    records = {}
    for b, bench_id in enumerate(suite.ids):
        phase = slow if b == suite.threaded else np.zeros(1 + fresh)
        kept = [
            FreshProcess(
                tuple(
                    float(r)
                    for r in _rounds(
                        rng,
                        process[b] + moment[b] + phase[1 + k],
                        suite.round_sd[b],
                        machine,
                        False,
                        FRESH_ROUNDS,
                        unsteady[b],
                        memory_of(b, 1 + k)[0],
                    )
                ),
                (FRESH_ROUNDS,) * PASSES,
                canary,
                memory_of(b, 1 + k)[1],
            )
            for k, process in enumerate(processes)
        ]
        takes, read = memory_of(b, 0)
        rounds = _rounds(
            rng, session[b] + phase[0], suite.round_sd[b], machine, True, unsteady=unsteady[b], by_pass=takes
        )
        cpus = None if suite.threaded is None else 2.0 if b == suite.threaded else 1.0
        pool_read = pool if b == suite.threaded else ()
        records[bench_id] = _record(bench_id, rounds, canary, kept or None, cpus, pool_read, read)
    return RunDocument(
        benchmarks=records,
        machine={"key": "sim"},
        canary_ms=[canary] * 40,
        measured_order=list(suite.ids),
    )


def make_baseline(rng, suite: Suite, machine: Machine) -> list[RunDocument]:
    return [
        make_run(rng, suite, machine, fresh=machine.save_processes, busy=rng.random() < machine.busy_save)
        for _ in range(machine.history)
    ]


def without_fresh(run: RunDocument) -> RunDocument:
    """The run as one process alone measured it (no fresh processes kept)."""
    return dataclasses.replace(
        run, benchmarks={i: dataclasses.replace(r, confirm=None) for i, r in run.benchmarks.items()}
    )


def suite_rule(config):
    """``suite_fails`` for simulate: whether the suite-wide rule fails a run, as the plugin decides
    it at the end of the run (History.suite_shift with the run's canary)."""

    def fails(candidate: RunDocument, baseline: list[RunDocument]) -> bool:
        canary = math.log(float(np.median(candidate.canary_ms))) if candidate.canary_ms else None
        shift = History.of(baseline, config).suite_shift(candidate.benchmarks.values(), canary)
        return bool(shift is not None and shift.failed)

    return fails


@dataclass
class Tally:
    """Outcomes per kind of benchmark-run: unchanged, and each slowdown."""

    counts: dict

    @classmethod
    def empty(cls) -> Tally:
        return cls(counts={})

    def add(self, kind: str, status: str, detectable: float | None = None) -> None:
        row = self.counts.setdefault(kind, {"n": 0})
        row["n"] += 1
        row[status] = row.get(status, 0) + 1
        if detectable is not None and kind != "unchanged":
            size = float(kind.strip("+%")) / 100
            where = "detectable" if detectable <= size else "not detectable"
            row[f"n {where}"] = row.get(f"n {where}", 0) + 1
            row[f"{status} {where}"] = row.get(f"{status} {where}", 0) + 1

    def rate(self, kind: str, status: str = "REGRESSED", where: str | None = None) -> float:
        """The share of ``kind``'s outcomes that are ``status`` (among those the baseline said are
        ``where``: "detectable" or "not detectable")."""
        row = self.counts.get(kind, {"n": 0})
        n = row.get("n" if where is None else f"n {where}", 0)
        found = row.get(status if where is None else f"{status} {where}", 0)
        return found / n if n else float("nan")


def simulate(
    judge,
    machine: Machine,
    *,
    suites: int,
    seed: int,
    slowdowns=(0.0, 0.05, 0.10, 0.20),
    slowed: int = 2,
    detectable=None,
    suite_fails=None,
):
    """Judge ``suites`` simulated projects, each with a fresh baseline and one candidate run per
    slowdown (its first ``slowed`` benchmarks slower by it): ``judge(candidate, baseline_runs)`` ->
    {id: Verdict}; ``detectable(baseline_runs)`` -> {id: the smallest slowdown the baseline says
    the gate catches} (None: not known). Returns the Tally: kinds "unchanged" (every benchmark
    not slowed), "nothing slower" (those of the runs that slow none: the others' median is then
    no help against a false alarm) and "+5%"....

    ``suite_fails(candidate, baseline_runs)`` -> whether the suite-wide rule fails the run: tallied
    as "suite, nothing slower" (a false alarm: FAILED) and, for one more candidate per project
    whose every benchmark is 20% slower, "suite, all +20%" (caught: FAILED)."""
    tally = Tally.empty()
    for index in range(suites):
        rng = np.random.default_rng([seed, index])
        suite = make_suite(rng, machine)
        baseline = make_baseline(rng, suite, machine)
        said = detectable(baseline) if detectable is not None else {}
        for size in slowdowns:
            slow = np.zeros(len(suite.ids))
            slow[:slowed] = size
            candidate = make_run(rng, suite, machine, fresh=machine.confirm, slowdown=slow, loaded=True)
            verdicts = judge(candidate, baseline)
            for b, bench_id in enumerate(suite.ids):
                kind = "unchanged" if slow[b] == 0 else f"+{size * 100:.0f}%"
                tally.add(kind, verdicts[bench_id].status, said.get(bench_id))
                if size == 0:  # (a pull request that slows nothing: the common case, and the hardest)
                    tally.add("nothing slower", verdicts[bench_id].status)
            if suite_fails is not None and size == 0:
                tally.add("suite, nothing slower", "FAILED" if suite_fails(candidate, baseline) else "passed")
        if suite_fails is not None:  # (drawn apart: the figures above stay those of the same draws)
            other = np.random.default_rng([seed, index, 1])
            everything = make_run(
                other, suite, machine, fresh=machine.confirm, slowdown=np.full(len(suite.ids), 0.2), loaded=True
            )
            tally.add("suite, all +20%", "FAILED" if suite_fails(everything, baseline) else "passed")
    return tally
