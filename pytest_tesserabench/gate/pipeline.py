"""History mode's gate as one pipeline: the plugin calls it while it measures, and `tesserabench
compare` calls it on a run file, with the same stages in the same order.

1. **untimed** — a benchmark whose timings cannot be compared (a baseline from another machine,
   the Triton interpreter, another timer, no rounds) is judged on its kernel figures alone;
2. **rule** — the change, less this run's shared shift (model.py), judged by the rule (rule.py),
   which may itself leave it INCONCLUSIVE because the shift dominates (stage ``shift``) or the
   processes disagree (stage ``processes``); kernel figures that regressed fail it whatever the
   timing says (stage ``kernel figures``);
3. **conditions** — the run's conditions may soften a verdict, never make one (conditions.py);
4. **measured again** — a benchmark about to fail, or undecided past its threshold where more
   processes could decide it, is measured in fresh processes (the caller's ``measure_again``:
   the plugin starts them, the CLI reads those the run file kept) and judged again by stages 1-3
   on all of its processes as one run.

Stages only move one way: a later stage adds measurements and re-runs the same rule, or softens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import NamedTuple

import numpy as np

from pytest_tesserabench.gate import conditions, memory
from pytest_tesserabench.gate.centres import (
    MEDIAN_VARIANCE_FACTOR,
    earlier_passes_centre,
    log_centre,
    record_summary,
    robust_sd,
)
from pytest_tesserabench.gate.config import GateConfig
from pytest_tesserabench.gate.kernels import compare_kernels, severity_of
from pytest_tesserabench.gate.model import (
    BaselineModel,
    Shift,
    SuiteShift,
    canary_centre,
    candidate_shift,
    fit,
    records_suite_shift,
)
from pytest_tesserabench.gate.rule import (
    PROCESSES,
    RULE,
    SHIFT,
    concat_components,
    decide,
    noise_components,
    pct,
    suite_prior,
    worse,
)
from pytest_tesserabench.record.results import (
    BenchRecord,
    RunDocument,
    Verdict,
    fresh_runs,
    is_imported,
    with_processes,
)
from pytest_tesserabench.record.units import format_ms

MIN_RECOMMENDED_HISTORY = 3
UNTIMED, KERNEL_FIGURES = "untimed", "kernel figures"
IMPORTED_ONLY = (
    "the baseline has it only in runs imported from pytest-benchmark, whose timings are shown, never compared with "
    "this plugin's; --bench-save runs of your own to judge it"
)
LEFT_OUT_NOTE = "left out of the baseline, far from its other processes (a busy machine, or an odd state)"


@dataclass(frozen=True)
class Processes:
    """What fresh processes measured of some benchmarks: per process, record id -> its record."""

    measured: list[dict[str, BenchRecord]]
    seconds: float = 0.0
    problem: str | None = None  # why fewer processes than asked measured (the verdict stands then)
    source: str = "fresh process(es)"


MeasureAgain = Callable[[list[BenchRecord]], Processes]
PROCESSES_AGAIN = 2  # the fresh processes a benchmark is measured again in, by default (--bench-confirm)


class LeftOut(NamedTuple):
    """A benchmark's baseline processes left out, slower than the others (History.left_out_times)."""

    times: list[float]  # ms, each process's
    typical: float  # ms: the median of the processes kept
    newest: bool  # every one of them is the newest save's


@dataclass(frozen=True)
class History:
    """What a comparison knows of its baseline, computed once: its runs (each saved run and the
    fresh processes it was measured in, every process a run), the run-effect model, the drift
    priors and the rule's parameters."""

    runs: list[RunDocument]
    config: GateConfig
    model: BaselineModel | None
    priors: dict[str, float]
    timings: bool = True  # False: another machine's baseline, kernel figures only
    left_out: Mapping[str, frozenset[int]] = field(default_factory=dict)  # id -> runs left out (config.outlier_z)
    saves: tuple[int, ...] = ()  # per run (process): the saved run it belongs to
    process_share: float = 1.0  # of the between-run noise, the share that differs between processes of a save
    cache: dict = field(default_factory=dict, repr=False, compare=False)  # record_summary of the baseline's records
    imported: frozenset[str] = frozenset()  # benchmarks the baseline has only in runs of another tool
    memory: memory.MemoryModel = memory.OFF  # the memory canary's correction (its runs already corrected)

    @classmethod
    def of(cls, baseline_runs: list[RunDocument], config: GateConfig | None = None, *, timings: bool = True):
        config = config or GateConfig()
        # Runs imported from another tool (history/imported.py) are its timings, not this plugin's:
        # shown in the history, never part of what a run is compared with.
        theirs = [run for run in baseline_runs if is_imported(run)]
        baseline_runs = [run for run in baseline_runs if not is_imported(run)]
        imported = frozenset(i for run in theirs for i in run.benchmarks) - {
            i for run in baseline_runs for i in run.benchmarks
        }
        runs = with_processes(baseline_runs)
        memory_model = memory.fit(runs, config.memory_slope_prior) if timings else memory.OFF
        runs = [memory_model.adjusted_run(run) for run in runs]
        cache: dict = {}
        centres: dict[str, dict[int, float]] = {}
        for j, run in enumerate(runs):
            for bench_id, record in run.benchmarks.items():
                summary = _summary(record, cache)
                if summary is not None and record.timing_gated:
                    centres.setdefault(bench_id, {})[j] = summary[0]
        model = None
        if timings:
            model = fit(centres, len(runs), _canaries(runs), min_benchmarks=config.min_benchmarks_for_shift)
        others = _others_shifts(centres, model)
        left_out = {i: _outlying(by_run, others[i], config) for i, by_run in centres.items()}
        if model is not None and any(left_out.values()):  # the model again, without them
            kept = {i: {j: c for j, c in by_run.items() if j not in left_out[i]} for i, by_run in centres.items()}
            model = fit(kept, len(runs), _canaries(runs), min_benchmarks=config.min_benchmarks_for_shift)
        priors = baseline_priors(runs, config, model, left_out, cache)
        saves = tuple(s for s, run in enumerate(baseline_runs) for _ in range(1 + len(fresh_runs(run))))
        share = _process_share(centres, left_out, model, saves)
        return cls(runs, config, model, priors, timings, left_out, saves, share, cache, imported, memory_model)

    @property
    def ids(self) -> list[str]:
        return list(dict.fromkeys(i for run in self.runs for i in run.benchmarks))

    def shift(self, bench_id: str, measured: Mapping[str, float], canary: float | None) -> Shift | None:
        """This run's shared shift for ``bench_id``, from the others ``measured`` so far (log
        centres) and this run's log ``canary``; None without a model."""
        if self.model is None:
            return None
        config = self.config
        return candidate_shift(
            self.model, dict(measured), bench_id, canary, min_others=config.min_others_for_shift,
            prior_runs=config.prior_runs,
        )  # fmt: skip

    def crowded_out(self, record: BenchRecord) -> bool:
        """Whether ``record`` is a multi-threaded benchmark whose threads other processes crowded
        out in this run (conditions.crowded_out): its move is the scheduler's, so it has no say in
        the run's shift, for the others or for the suite."""
        return self.timings and conditions.crowded_out(record, self.runs, self.config) is not None

    def suite_shift(self, records, canary: float | None) -> SuiteShift | None:
        """The whole run's shift (model.suite_shift) over the benchmarks not crowded out, against
        the machine's move read by every benchmark's canary, or None without a model."""
        if self.model is None:
            return None
        records = [self.memory.adjusted(r) for r in records]
        return records_suite_shift(
            self.model,
            [r for r in records if not self.crowded_out(r)],
            canary,
            self.runs,
            threshold=self.config.threshold,
            alpha=self.config.alpha,
            min_benchmarks=self.config.min_benchmarks_for_shift,
            canary_records=records,
        )

    # -- stages 1-3 --------------------------------------------------------------------------------
    def judge(
        self,
        records: list[BenchRecord],
        *,
        m: int,
        thresholds: Mapping[str, float] | None = None,
        shifts: Mapping[str, Shift | None] | None = None,
        processes: list[dict[str, BenchRecord]] = (),
        machine: Mapping = {},
    ) -> dict[str, Verdict]:
        """Verdicts for ``records`` (of one run). ``m``: benchmarks compared in the suite (alpha/m);
        ``shifts``: this run's shared shift per benchmark; ``processes``: the same benchmarks
        measured in fresh processes, judged with ``records`` as one run; ``machine``: this run's
        (its Triton decides whether kernel figures are comparable)."""
        thresholds, shifts = thresholds or {}, shifts or {}
        records = [self.memory.adjusted(r) for r in records]
        processes = [{i: self.memory.adjusted(r) for i, r in p.items()} for p in processes]
        verdicts: dict[str, Verdict] = {}
        gated = []
        for record in records:
            bench_id = record.id
            base = [run.benchmarks[bench_id] for run in self.runs if bench_id in run.benchmarks]
            old_kernels, old_machine = _latest_with_kernels(self.runs, bench_id)
            differ = _compilers_differ(machine, old_machine)
            kernels = compare_kernels(
                record.kernels or None, old_kernels, compilers_differ=differ, work_threshold=self.config.work_threshold
            )
            history = sum(1 for rec in base if rec.measured_rounds)
            if not base and bench_id in self.imported:
                verdicts[bench_id] = untimed_verdict(bench_id, kernels, IMPORTED_ONLY, history=0)
                continue
            if not base:
                verdicts[bench_id] = Verdict(id=bench_id, status="NEW", notes=("not in the baseline",), stage=RULE)
                continue
            reason = self._untimed_reason(record, base, history)
            if reason is not None:
                verdicts[bench_id] = untimed_verdict(bench_id, kernels, reason, history=history)
                continue
            kept = self._kept(bench_id)
            shift = shifts.get(bench_id)
            candidates = [record, *(p[bench_id] for p in processes if bench_id in p)]
            candidates = [c for c in candidates if c.measured_rounds]
            base_shifts = [self.model.run_shifts[j] for j, _ in kept] if self.model is not None else None
            cand_shifts = [shift.value] * len(candidates) if shift is not None else None
            nc = noise_components(
                *_summaries([r for _, r in kept], base_shifts, self.cache),
                *_summaries(candidates, cand_shifts),
                candidate_spread=False,
                later_together=True,
            )
            saves = len({self.saves[j] for j, _ in kept}) if self.saves else nc.n_base[0]
            gated.append((record, nc, kernels, history, shift, len(candidates), saves, candidates))
        if gated:
            verdicts.update(self._decide(gated, m, thresholds))
        return conditions.review(records, verdicts, self.runs, self.config) if self.timings else verdicts

    def _memory_note(self, bench_id: str, candidates: list[BenchRecord], status: str) -> list[str]:
        """What the memory canary's correction removed from this run's centre, where it is 1% or
        more; and for a slowdown, where the memory was slower than in any process of the baseline,
        that the correction is a guess there (a note, not a softening: most benchmarks do not
        stream memory, and a rule that doubted them all would miss their slowdowns)."""
        moved = self.memory.move(bench_id, candidates)
        slope = self.memory.slopes.get(bench_id)
        removed = slope.value * moved if moved is not None and slope is not None else 0.0
        notes = []
        if abs(removed) >= 0.01:
            notes.append(
                f"the machine's memory read {pct(math.exp(moved))} against the baseline's (memory canary, after the "
                f"passes the centres come from); this benchmark takes {slope.value:.2f} of it, "
                f"{pct(math.exp(removed))} removed"
            )
        beyond = self.memory.beyond(bench_id, candidates) if status == "REGRESSED" else None
        if beyond is not None:  # (then moved is not None either: the same slope and readings)
            notes.append(
                f"the memory read {pct(math.exp(moved))}, {pct(math.exp(beyond))} past the slowest any process of the "
                f"baseline met: how much of it this benchmark takes the baseline cannot tell; if it streams "
                f"memory, --bench-ab=REF measures both sides at the same memory speed"
            )
        return notes

    def _kept(self, bench_id: str) -> list[tuple[int, BenchRecord]]:
        """The baseline's timed records of one benchmark by run index, less those left out."""
        out = self.left_out.get(bench_id, frozenset())
        indexed = [(j, r) for j, run in enumerate(self.runs) if (r := run.benchmarks.get(bench_id)) is not None]
        return [(j, r) for j, r in indexed if r.measured_rounds and j not in out]

    def left_out_times(self, slower_by: float = 0.0) -> dict[str, LeftOut]:
        """Per benchmark some of whose processes are left out (config.outlier_z) and read at least
        ``slower_by`` (relative) slower than the median of its processes kept: their times, that
        median, and whether they are all the newest save's."""
        out = {}
        newest = max(self.saves, default=None)
        for bench_id, runs in self.left_out.items():
            kept = self._kept(bench_id)
            typical = float(np.median([r.median_ms or 0.0 for _, r in kept])) if kept else 0.0
            read = {j: self.runs[j].benchmarks[bench_id].median_ms or 0.0 for j in sorted(runs)}
            slow = [j for j, ms in read.items() if ms >= typical * (1 + slower_by)]
            if slow:
                out[bench_id] = LeftOut([read[j] for j in slow], typical, all(self.saves[j] == newest for j in slow))
        return out

    def _untimed_reason(self, record: BenchRecord, base: list[BenchRecord], history: int) -> str | None:
        timers = {record.timer, base[-1].timer}
        if not self.timings:
            return "timings come from another machine"
        if not history:
            return "the baseline has no timed rounds of it"
        if not record.measured_rounds:
            return "no rounds measured in this run"
        if not (record.timing_gated and base[-1].timing_gated):
            return "timed in the Triton interpreter"
        if len(timers) > 1:
            return f"timers differ: {base[-1].timer} in the baseline, {record.timer} now"
        return None

    def _decide(self, gated, m: int, thresholds: Mapping[str, float]) -> dict[str, Verdict]:
        config = self.config
        nc_all = concat_components(g[1] for g in gated)
        prior = np.array([self.priors.get(g[0].id, config.between_run_floor**2) for g in gated])
        theta = np.array([thresholds.get(g[0].id, config.threshold) for g in gated], dtype=float)
        shift_var = np.array([g[4].variance if g[4] is not None else 0.0 for g in gated])
        shift_df = np.array([g[4].df if g[4] is not None else np.inf for g in gated])
        unalike = np.array([g[4].unalike ** 2 if g[4] is not None else 0.0 for g in gated])
        removed = np.array([g[4].value if g[4] is not None else 0.0 for g in gated])
        saves = np.array([g[6] for g in gated], dtype=float)
        dec = decide(
            nc_all, prior, config, m, thresholds=theta, shift_var=shift_var, shift_df=shift_df,
            unalike_var=unalike, shift=removed, process_share=self.process_share, base_runs=saves,
        )  # fmt: skip
        verdicts = {}
        left_out = self.left_out_times()
        for i, (record, nc, kernels, history, shift, processes, _, candidates) in enumerate(gated):
            status, stage = str(dec.status[i]), str(dec.stage[i])
            ratio = math.exp(float(dec.diff[i]))
            notes = list(kernels.notes)
            # (named where slower than the processes kept by the benchmark's threshold: one left out
            # for a small move its save's shift made large reads as nothing apart)
            far = left_out.get(record.id)
            busy = [ms for ms in far.times if ms >= far.typical * (1 + theta[i])] if far is not None else []
            if busy:
                notes.append(f"{LEFT_OUT_NOTE}: " + ", ".join(format_ms(ms) for ms in busy))
            if history < MIN_RECOMMENDED_HISTORY:
                notes.append(f"baseline has {history} run(s); drift assumed, not measured")
            if shift is not None and (abs(shift.value) >= 0.01 or shift.unalike >= 0.01):
                unalike = f", benchmarks took it {pct(1 + shift.unalike).lstrip('+')} unalike" if shift.unalike else ""
                notes.append(f"this run's shared shift {pct(math.exp(shift.value))} removed ({shift.source}{unalike})")
            elif shift is not None and shift.canary_moved:
                notes.append(f"no shared shift removed: {shift.source}")
            notes.extend(self._memory_note(record.id, candidates, status))
            severity = severity_of(ratio) if status == "REGRESSED" else None
            if status in ("REGRESSED", "INCONCLUSIVE"):  # not faster: a worse new config counts
                kernels = kernels.with_config_regressions()
            elif kernels.config_regressions:
                notes.append("the new config's losses are not gated: its timing is not slower")
            if kernels.regressions:
                status, severity, stage = "REGRESSED", worse(severity, kernels.severity), KERNEL_FIGURES
            threshold = math.expm1(float(dec.theta[i]))
            detectable = float(dec.detectable[i])
            verdicts[record.id] = Verdict(
                id=record.id,
                status=status,
                stage=stage,
                baseline_ms=math.exp(float(nc.base_centre[0])),
                # what was measured; the change beside it has the shift removed (the line says so)
                candidate_ms=math.exp(float(nc.cand_centre[0]) + (shift.value if shift is not None else 0.0)),
                ratio=ratio,
                ci=(math.exp(float(dec.ci_low[i])), math.exp(float(dec.ci_high[i]))),
                p_value=float(dec.p_slower[i]),
                severity=severity,
                reasons=kernels.reasons,
                notes=tuple(notes),
                threshold=threshold,
                noise=float(dec.noise[i]),
                history=history,
                alpha_per_test=config.alpha / max(m, 1),
                detectable=detectable,
                shift=math.expm1(shift.value) if shift is not None else None,
                processes=processes,
                hint_text=(
                    _hint(
                        stage,
                        history,
                        detectable,
                        threshold,
                        shift,
                        mostly_shift=bool(dec.mostly_shift[i]),
                        in_passes=record.sampling is not None and record.sampling.passes > 1,
                    )
                    if status == "INCONCLUSIVE"
                    else None
                ),  # fmt: skip
            )
        return verdicts

    # -- what the baseline lets the gate see -------------------------------------------------------
    def detectable(self, processes: int = 3, m: int | None = None) -> dict[str, float]:
        """Per benchmark: the smallest slowdown the gate catches with probability ``power`` against
        this baseline, for a candidate run measured as quietly as the baseline's in ``processes``
        processes (this run's and --bench-confirm's fresh ones), its shared shift estimated from
        the other benchmarks (the median's error of their residual noise); m: benchmarks compared
        (all)."""
        parts, ids, saves = [], [], []
        for bench_id in self.ids:
            kept = self._kept(bench_id)
            kept = [(j, r) for j, r in kept if r.timing_gated and _summary(r, self.cache) is not None]
            if not kept:
                continue
            saves.append(len({self.saves[j] for j, _ in kept}) if self.saves else len(kept))
            shifts = [self.model.run_shifts[j] for j, _ in kept] if self.model is not None else None
            centres, within, rounds = _summaries([r for _, r in kept], shifts, self.cache)
            cand = tuple(np.repeat(a[..., :1], processes, axis=-1) for a in (centres, within, rounds))
            parts.append(noise_components(centres, within, rounds, *cand, candidate_spread=False))
            ids.append(bench_id)
        if not parts:
            return {}
        nc = concat_components(parts)
        prior = np.array([self.priors.get(i, self.config.between_run_floor**2) for i in ids])
        shift_var, shift_df = 0.0, np.inf
        others = len(self.model.effects) - 1 if self.model is not None else 0
        if others >= self.config.min_others_for_shift:
            shift_var = MEDIAN_VARIANCE_FACTOR * self.model.residual_sd**2 / others
            shift_df = self.config.prior_runs + others - 1.0
        dec = decide(
            nc, prior, self.config, m or len(ids), shift_var=shift_var, shift_df=shift_df,
            process_share=self.process_share, base_runs=np.array(saves, dtype=float),
        )  # fmt: skip
        return dict(zip(ids, (float(d) for d in dec.detectable)))


# -- stage 4, and the whole pipeline ----------------------------------------------------------------
def worth_measuring_again(verdict: Verdict | None) -> bool:
    """A benchmark about to fail on its timing, or undecided with its change past the threshold
    (this process alone could not decide what more processes and it together can). Not one whose
    kernel figures decided, nor one its conditions left undecided: processes of the same run share
    them."""
    if verdict is None or verdict.reasons or verdict.stage not in (RULE, SHIFT) or verdict.ratio is None:
        return False
    if verdict.status == "REGRESSED":
        return True
    return verdict.status == "INCONCLUSIVE" and verdict.ratio >= 1 + (verdict.threshold or 0.0)


def judge_test(
    history: History,
    records: list[BenchRecord],
    *,
    m: int,
    thresholds: Mapping[str, float] | None = None,
    shifts: Mapping[str, Shift | None] | None = None,
    measure_again: MeasureAgain | None = None,
    machine: Mapping = {},
    processes_again: int = PROCESSES_AGAIN,
) -> dict[str, Verdict]:
    """The verdicts of one test's records: stages 1-3, then 4 for those worth measuring again in
    ``processes_again`` fresh processes."""
    options = dict(m=m, thresholds=thresholds, shifts=shifts, machine=machine)
    verdicts = history.judge(records, **options)
    again = [r for r in records if worth_measuring_again(verdicts.get(r.id))]
    if not again or measure_again is None:
        return verdicts
    # An undecided one only where the processes could decide it: were they to read it part of the
    # way to the top of its interval (this process's own bias may hide the rest of a slowdown:
    # GateConfig.measure_again_reach), the verdict on all of them would be a slowdown. Else they
    # would cost a process start-up and the test's time each for nothing (a 30 us call whose
    # interval spans 0.01x-100x).
    undecided = [r for r in again if verdicts[r.id].status == "INCONCLUSIVE"]
    if undecided:
        reach = history.config.measure_again_reach
        top = {r.id: _scaled(r, (verdicts[r.id].ci[1] / verdicts[r.id].ratio) ** reach) for r in undecided}
        alike = history.judge(undecided, **options, processes=[top] * processes_again)
        # (copies, not measurements: how far they read from this process is the supposition's own,
        # so a verdict the processes left undecided counts as one they would decide)
        decided = {i for i, v in alike.items() if v.status == "REGRESSED" or v.stage == PROCESSES}
        again = [r for r in again if r not in undecided or r.id in decided]
    if not again:
        return verdicts
    processes = measure_again(again)
    if not processes.measured:
        for record in again:
            verdict = verdicts[record.id]
            verdicts[record.id] = replace(verdict, notes=(*verdict.notes, f"not measured again: {processes.problem}"))
        return verdicts
    judged = history.judge(again, **options, processes=processes.measured)
    for record in again:
        first, verdict = verdicts[record.id], judged[record.id]
        said = _processes_note(record, first, processes, history.memory)
        verdicts[record.id] = replace(verdict, notes=(*verdict.notes, said))
    return verdicts


def _scaled(record: BenchRecord, factor: float) -> BenchRecord:
    """``record`` as a process that read it ``factor`` times slower would have."""
    return replace(record, rounds_ms=[ms * factor for ms in record.rounds_ms])


def _processes_note(record: BenchRecord, first: Verdict, processes: Processes, memory_model: memory.MemoryModel) -> str:
    """What each fresh process read (its ratio to the baseline, in the verdict's terms: this
    process's ratio scaled by how its centre stands to this one's, both corrected for the memory
    speed as the verdict's are), and what it cost."""
    here = log_centre(memory_model.adjusted(record))
    changes = []
    for measured in processes.measured:
        fresh = measured.get(record.id)
        centre = log_centre(memory_model.adjusted(fresh)) if fresh is not None else None
        if centre is not None and here is not None and first.ratio is not None:
            changes.append(pct(first.ratio * math.exp(centre - here)))
    said = (
        f"measured again in {len(changes)} {processes.source}: {', '.join(changes)} "
        f"(here {pct(first.ratio)}; {processes.seconds:.1f} s); judged on all {len(changes) + 1}"
    )
    return f"{said}; {processes.problem}" if processes.problem else said


def judge_run(candidate: RunDocument, baseline_runs: list[RunDocument], config: GateConfig | None = None):
    """A run file judged as the plugin judged it while measuring (`tesserabench compare`,
    `report`): each benchmark's shift from the benchmarks measured before it (the file keeps the
    order; measured in interleaved passes, from every other benchmark's earlier passes too), the
    run's start canary for the first ones, and the fresh processes the file kept."""
    history = History.of(baseline_runs, config)
    records = list(candidate.benchmarks.values())
    kept = fresh_runs(candidate)

    def measure_again(again: list[BenchRecord]) -> Processes:
        measured = [{r.id: run.benchmarks[r.id] for r in again if r.id in run.benchmarks} for run in kept]
        seconds = sum(r.sampling.confirm_s for r in again if r.sampling is not None)  # what they cost then
        return Processes([p for p in measured if p], seconds, source="fresh process(es) the run file kept")

    processes_again = len(kept) or PROCESSES_AGAIN

    known = set(history.ids)
    m = max(sum(1 for r in records if r.id in known), 1)
    missing = {
        i: Verdict(id=i, status="MISSING", notes=("in the baseline, not in this run",), stage="missing")
        for i in history.ids
        if i not in candidate.benchmarks
    }
    shifts = shifts_as_measured(candidate, history)
    tests: dict[str, list[BenchRecord]] = {}
    for record in records:
        tests.setdefault(record.nodeid, []).append(record)
    verdicts: dict[str, Verdict] = {}
    for test in tests.values():  # one test at a time, as the plugin judges
        verdicts.update(
            judge_test(
                history,
                test,
                m=m,
                shifts=shifts,
                measure_again=measure_again if kept else None,
                machine=candidate.machine,
                processes_again=processes_again,
            )
        )
    return {**{record.id: verdicts[record.id] for record in records}, **missing}


def shifts_as_measured(candidate: RunDocument, history: History) -> dict[str, Shift | None]:
    """Each benchmark's shift as the plugin knew it while judging it: from every benchmark's
    earlier passes, and the last passes of those measured before it and of its test's others (the
    plugin judges a test's benchmarks together, once its body has measured them all); the canary of
    the run's start (the end's came after)."""
    start = [c for c in candidate.canary_ms[: len(candidate.canary_ms) // 2 or 1] if c > 0]
    canary = math.log(float(np.median(start))) if start else None
    earlier = ((i, earlier_passes_centre(history.memory, r)) for i, r in candidate.benchmarks.items())
    measured = {i: c for i, c in earlier if c is not None}
    tests: dict[str, list[str]] = {}
    for bench_id in candidate.measured_order or list(candidate.benchmarks):
        tests.setdefault(candidate.benchmarks[bench_id].nodeid, []).append(bench_id)
    shifts = {}
    for ids in tests.values():
        for bench_id in ids:
            add_measured(history, measured, candidate.benchmarks[bench_id])
        for bench_id in ids:
            shifts[bench_id] = history.shift(bench_id, measured, canary)
    return shifts


def add_measured(history: History, measured: dict[str, float], record: BenchRecord) -> None:
    """``record``'s centre into ``measured``, the run's benchmarks so far from which each one's
    shift is estimated (the plugin's as it measures, and shifts_as_measured's); a crowded-out one
    is taken out instead (History.crowded_out: the scheduler's move, not the machine's; its earlier
    passes spoke for the benchmarks judged before it)."""
    centre = log_centre(history.memory.adjusted(record))
    if history.crowded_out(record):
        measured.pop(record.id, None)
    elif centre is not None:
        measured[record.id] = centre


# -- pieces -------------------------------------------------------------------------------------
def untimed_verdict(bench_id: str, kernels, reason: str, **fields) -> Verdict:
    """The verdict of a benchmark whose timings are not compared (``reason``): its kernel figures
    decide, with no timing to excuse a config that lost occupancy or spills."""
    figures = kernels.with_config_regressions()
    if figures.regressions:
        status = "REGRESSED"
    elif figures.compared:
        status, reason = "UNCHANGED", f"kernel figures compared; timings not ({reason})"
    else:
        status, reason = "NOT_GATED", f"timings not compared ({reason}); no kernel figures to compare"
    stage = KERNEL_FIGURES if figures.compared else UNTIMED
    return Verdict(
        id=bench_id,
        status=status,
        stage=stage,
        severity=figures.severity,
        reasons=figures.reasons,
        notes=(reason, *kernels.notes),
        **fields,
    )


def _hint(
    stage: str,
    history: int,
    detectable: float,
    threshold: float,
    shift: Shift | None,
    *,
    mostly_shift: bool = False,
    in_passes: bool = False,
) -> str | None:
    """What would settle an INCONCLUSIVE verdict, by what left it undecided (None: the noise). ``mostly_shift``: the
    run's shift is more of its variance than its own measurement; ``in_passes``: the benchmark was
    measured in interleaved passes (which cannot be the advice then)."""
    if shift is not None and shift.canary_moved:
        # (passes let each benchmark's shift come from the others' earlier passes; a run of a few
        # benchmarks has too few others either way)
        how = (
            "more of the suite in the run (not a -k of a few)"
            if in_passes
            else "measuring in passes (the default, not under -n)"
        )
        return (
            "the machine's speed moved since the baseline (canary) and too few other benchmarks of this run were "
            f"measured before it to tell by how much; {how}, a steadier machine, or --bench-ab=REF settles it"
        )
    if stage == SHIFT and shift is not None:
        return (
            f"this run's shared shift ({pct(math.exp(shift.value))}) is a correction this benchmark cannot be judged "
            "through: benchmarks did not slow alike. A steadier machine, or --bench-ab=REF (both sides in one job), "
            "settles it"
        )
    if mostly_shift and stage == RULE and shift is not None:
        # (the shift itself may be small: what widens the interval is how unalike the others moved,
        # or how few of them there are, not its size)
        why = f"{shift.source} moved unalike"
        if math.isinf(shift.df):  # (no others yet: the baseline's own run shifts)
            why = "too few other benchmarks were measured before it"
        return (
            f"most of its interval is the uncertainty of this run's shared shift ({pct(math.exp(shift.value))}, "
            f"known for this benchmark to {math.sqrt(shift.variance):.1%}: {why}), not its own measurement. A "
            "steadier machine, or --bench-ab=REF (both sides in one job), settles it"
        )
    if stage == PROCESSES:
        return (
            "the processes that measured it disagree by more than the change: a process's own state, or the machine "
            "at the moment the fresh ones measured it, not the code. --bench-ab=REF measures both sides at the same "
            "moments, in several processes per side"
        )
    if history < MIN_RECOMMENDED_HISTORY:
        return (
            f"the baseline has {history} run(s) of this benchmark; record at least {MIN_RECOMMENDED_HISTORY} "
            "(run --bench-save=NAME again on this machine) so the gate can measure run-to-run drift"
        )
    if detectable > threshold:
        return None  # the noise alone: Verdict.hint says so, and the summary's line names them together
    return "re-run to confirm; a longer baseline history narrows the interval"


def baseline_priors(
    runs: list[RunDocument], config: GateConfig, model: BaselineModel | None, left_out: Mapping = {}, cache=None
) -> dict[str, float]:
    """The suite prior of each benchmark: the median drift of the *other* benchmarks (of the
    residuals, the run shifts removed, with a model), never below the floor. From the baseline
    alone, so a verdict does not depend on which other tests ran (-k, xdist)."""
    ids, parts = [], []
    for bench_id in dict.fromkeys(i for run in runs for i in run.benchmarks):
        indexed = [(j, r) for j, run in enumerate(runs) if (r := run.benchmarks.get(bench_id)) is not None]
        indexed = [(j, r) for j, r in indexed if r.measured_rounds and j not in left_out.get(bench_id, ())]
        if not indexed:
            continue
        shifts = [model.run_shifts[j] for j, _ in indexed] if model is not None else None
        centres, within, rounds = _summaries([r for _, r in indexed], shifts, cache)
        if not centres.size:
            continue
        # The first run stands in for a candidate: one run adds no squares to the drift estimate.
        parts.append(noise_components(centres, within, rounds, centres[..., :1], within[..., :1], rounds[..., :1]))
        ids.append(bench_id)
    if not parts:
        return {}
    nc = concat_components(parts)
    return dict(zip(ids, suite_prior(nc.between_est, nc.between_df, config.between_run_floor).tolist()))


def _outlying(centres: Mapping[int, float], shifts: Mapping[int, float], config: GateConfig) -> frozenset[int]:
    """The runs (processes) of one benchmark to leave out: more than ``outlier_z`` robust standard
    deviations from the median of its centres, each less its run's shift (config.outlier_z); none
    when a quarter or more are that far (the benchmark then reads at two levels: its own noise).
    ``shifts``: each run's shift as the *other* benchmarks read it (_others_shifts)."""
    if len(centres) < config.min_processes_to_leave_out:
        return frozenset()
    runs = list(centres)
    values = np.array([centres[j] - shifts[j] for j in runs])
    scale = max(float(robust_sd(values)), config.between_run_floor)
    far = np.abs(values - np.median(values)) > config.outlier_z * scale
    if 4 * int(far.sum()) >= len(runs):
        return frozenset()
    return frozenset(j for j, out in zip(runs, far) if out)


def _others_shifts(
    centres: Mapping[str, Mapping[int, float]], model: BaselineModel | None
) -> dict[str, dict[int, float]]:
    """Per benchmark, each run's shift as the *other* benchmarks read it: the median of their
    centres less their effects (the model's where no other has the run; 0 without a model). Not
    the model's own shifts: they are medians the benchmark took part in, which zero a share of its
    residuals and shrink their robust spread until processes of its ordinary noise read as far
    (and the quarter rule then keeps a +50% process in)."""
    ids = list(centres)
    runs = sorted({j for by_run in centres.values() for j in by_run})
    if model is None:
        return {i: dict.fromkeys(runs, 0.0) for i in ids}
    moves = np.full((len(ids), len(runs)), np.nan)
    column = {j: k for k, j in enumerate(runs)}
    for row, bench_id in enumerate(ids):
        for j, centre in centres[bench_id].items():
            moves[row, column[j]] = centre - model.effects.get(bench_id, np.nan)
    others = leave_one_out_medians(moves)
    return {
        i: {j: float(v) if np.isfinite(v) else model.run_shifts[j] for j, v in zip(runs, others[row])}
        for row, i in enumerate(ids)
    }


def leave_one_out_medians(table: np.ndarray) -> np.ndarray:
    """Per cell of a (rows, columns) table with NaN for missing cells, the median of its column
    without that row (NaN where the cell is missing or no other row has the column). One sort per
    column, not one median per cell: a baseline of thousands of benchmarks is judged at start-up."""
    out = np.full(table.shape, np.nan)
    for k in range(table.shape[1]):
        rows = np.flatnonzero(np.isfinite(table[:, k]))
        n = rows.size
        if n < 2:
            continue
        order = np.argsort(table[rows, k], kind="stable")
        ordered = table[rows, k][order]
        rank = np.empty(n, dtype=int)
        rank[order] = np.arange(n)
        # the others' middle value(s), for every row: a sorted index from its own rank on is one further
        half = (n - 1) // 2
        upper = ordered[half + (half >= rank)]
        out[rows, k] = upper if (n - 1) % 2 else (ordered[half - 1 + (half - 1 >= rank)] + upper) / 2
    return out


def _process_share(centres, left_out, model: BaselineModel | None, saves: tuple[int, ...]) -> float:
    """Of the baseline's between-run noise, the share that differs between the processes of one
    save (the rest its processes share: the save's own drift of that benchmark, which more
    processes of a run do not average out). From every benchmark's centres (less each process's
    shift): the median over benchmarks of their within-save variance over their variance; 1 (all
    of it per process) where no save has two processes."""
    shares = []
    for bench_id, by_run in centres.items():
        values = {j: c - (model.run_shifts[j] if model is not None else 0.0) for j, c in by_run.items()}
        values = {j: c for j, c in values.items() if j not in left_out.get(bench_id, ())}
        groups: dict[int, list[float]] = {}
        for j, c in values.items():
            groups.setdefault(saves[j], []).append(c)
        df = sum(len(g) - 1 for g in groups.values())
        if df < 1 or len(values) < 3:
            continue
        within = sum(float(np.sum((np.array(g) - np.mean(g)) ** 2)) for g in groups.values()) / df
        total = float(np.var(list(values.values()), ddof=1))
        if total > 0:
            shares.append(within / total)
    return float(np.clip(np.median(shares), 0.0, 1.0)) if shares else 1.0


def _canaries(runs: list[RunDocument]) -> list[float]:
    return [math.log(c) for c in (canary_centre([run]) for run in runs) if c]


def _summary(record: BenchRecord, cache: dict | None):
    """record_summary, once per record of a baseline (``cache``: by the record's identity)."""
    if cache is None:
        return record_summary(record)
    found = cache.get(id(record))
    if found is None or found[0] is not record:
        found = cache[id(record)] = (record, record_summary(record))
    return found[1]


def _summaries(records: list[BenchRecord], shifts: list[float] | None = None, cache: dict | None = None):
    """(centres, within-run variances, rounds) of the records as (1, n) arrays, each centre less
    its run's shift."""
    shifts = shifts or [0.0] * len(records)
    rows = [
        (summary[0] - shift, summary[1], summary[2])
        for summary, shift in zip((_summary(r, cache) for r in records), shifts)
        if summary is not None
    ]
    return tuple(np.array([[float(row[i]) for row in rows]]) for i in range(3))


def _latest_with_kernels(runs: list[RunDocument], bench_id: str) -> tuple[list[dict] | None, dict]:
    """The kernels of the latest run that analysed this benchmark, and that run's machine."""
    for run in reversed(runs):
        record = run.benchmarks.get(bench_id)
        if record is not None and record.kernels:
            return record.kernels, run.machine
    return None, {}


def _compilers_differ(candidate_machine: Mapping, baseline_machine: Mapping) -> str | None:
    """Why kernel figures are not gated: another Triton compiled the baseline's."""
    old, new = baseline_machine.get("triton"), candidate_machine.get("triton")
    if old and new and old != new:
        return f"Triton {old} in the baseline, {new} here"
    return None
