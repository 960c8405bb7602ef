"""Every number that can change a verdict of the gate, each with the reason it has its value.

Scripts and tests that try another value pass a ``GateConfig`` (``dataclasses.replace``); nothing
overwrites a module's constants.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GateConfig:
    # -- what the user asks for (options) --------------------------------------------------------
    # The suite-wide false-alarm budget, split over the m benchmarks compared (Bonferroni): one
    # unchanged suite in a hundred fails a test, however many benchmarks it has.
    alpha: float = 0.01
    # The smallest slowdown worth failing for (relative). Never raised behind the user's back: a
    # benchmark too noisy to judge at it is INCONCLUSIVE and says what it could have detected.
    threshold: float = 0.05
    # The interval printed beside a change.
    confidence: float = 0.95
    # "Detectable" means caught with this probability: the size the gate promises to catch.
    power: float = 0.9
    # A kernel whose SASS instruction count (same config, same Triton) grew by this share or more
    # fails (--bench-work-threshold); None: such growth is a note. Off by default: a static count is
    # no measure of speed (a loop's body counts once; unrolling adds instructions to save time), but
    # on a GPU-less runner it is the one sign of a kernel that does more work.
    work_threshold: float | None = None

    # -- the noise model (history mode) ----------------------------------------------------------
    # The least run-to-run drift assumed (relative sd): back-to-back saves in one job understate
    # the drift between days, and a benchmark that read alike three times is not noise-free.
    between_run_floor: float = 0.005
    # A later run (the candidate) drifts on its own by this many times the suite's typical drift
    # between saves, which back-to-back saves cannot show: without it, runs that slow nothing
    # fail unchanged benchmarks more often than alpha allows (docs/gate-evidence.md); it scales
    # with the machine, so a steady GPU pays little for it.
    later_run_drift: float = 1.0
    # The weight, in runs, of the suite-wide prior on a benchmark's drift (the median drift of the
    # other benchmarks): three saves give a variance 2 degrees of freedom, too few to trust alone.
    prior_runs: int = 4
    # Below this many benchmarks, a run's shared shift cannot be told from the benchmarks' own
    # changes: each is judged on its own drift.
    min_benchmarks_for_shift: int = 4
    # Other benchmarks of the candidate run needed to estimate its shared shift for one benchmark.
    min_others_for_shift: int = 3
    # A verdict rests on the correction, and is decided neither way, when the shift removed
    # outweighs the change, how unalike the benchmarks took it is more of the variance than the
    # benchmark's own measurement, and at least this share of the threshold (1.2% at 5%): below
    # it, their differences are too small to turn a verdict at the threshold.
    unalike_share_of_threshold: float = 0.25
    # A baseline process whose centre (less its run's shift) lies more than this many robust
    # standard deviations (normal-consistent MAD) from the median of the benchmark's processes is
    # left out of its centre and noise (Iglewicz and Hoaglin's modified z-score): a save timed on a
    # busy machine, or a process in an odd state, would otherwise widen every later interval for as
    # long as the history keeps it. A candidate in such a state is not judged on one process: a
    # benchmark about to fail is measured again, and the median of its processes decides.
    outlier_z: float = 3.5
    # ...with at least this many processes (fewer give no robust scale).
    min_processes_to_leave_out: int = 5
    # A benchmark whose process kept at least 1 + this many CPUs busy in the baseline is
    # multi-threaded; one that got this many CPUs fewer in a run while other processes used at
    # least half a CPU was crowded out, and its timing is not judged (conditions.crowded). Half a
    # CPU: a single-threaded benchmark reads 0.95-1.0, a two-thread one 1.9-2.0 quiet and 1.0
    # beside two busy processes on two CPUs.
    crowded_cpus: float = 0.5

    # An undecided benchmark is measured again in fresh processes only where, were they to read it
    # this share of the way (in log) from its estimate to the top of its interval, the verdict on
    # all of its processes would be a slowdown. At the top itself (1) this process's own bias could
    # hide no slowdown from the check, but in the simulation it measured 1.5 to 3.6 times as many
    # benchmarks again as half-way does, for no more slowdowns caught and more false alarms; at
    # the estimate itself (0) fewer slowdowns are caught.
    measure_again_reach: float = 0.5
    # The memory canary's slope for a benchmark (gate/memory.py: how much of the machine's memory
    # slowness its time takes, in log) is estimated from the baseline's process centres, shrunk
    # towards 0 by a prior of this standard deviation: most benchmarks take little of it, one that
    # only streams memory about all (1, two sds out: its centres follow the canary closely enough
    # to show it), and a benchmark whose centres scatter for other reasons is left near 0 rather
    # than corrected for noise. 0 turns the correction off.
    memory_slope_prior: float = 0.5

    # -- the paired rule (A/B) -------------------------------------------------------------------
    # The numbers of pairs (one process pair) and of pairs per process pair (several) at which the
    # paired rule may decide; alpha is split over the looks (Bonferroni across interim looks).
    paired_looks: tuple[int, ...] = (6, 8, 11, 16, 23, 32, 45, 64, 90, 128, 181, 256)
    process_looks: tuple[int, ...] = (3, 6, 12, 24, 48)

    def __post_init__(self) -> None:
        def bad(name: str, value: Any, want: str) -> None:
            raise ValueError(f"GateConfig.{name}={value!r} is invalid: it must be {want}")

        if not 0.0 < self.alpha < 1.0:
            bad("alpha", self.alpha, "between 0 and 1 (e.g. 0.01)")
        if not 0.0 <= self.threshold < 10.0:
            bad("threshold", self.threshold, "a relative slowdown >= 0 (0.05 means 5%)")
        if not 0.5 < self.confidence < 1.0:
            bad("confidence", self.confidence, "between 0.5 and 1 (e.g. 0.95)")
        if not 0.5 <= self.power < 1.0:
            bad("power", self.power, "between 0.5 and 1 (e.g. 0.9)")
        if self.work_threshold is not None and not 0.0 <= self.work_threshold <= 10.0:
            bad("work_threshold", self.work_threshold, "a relative growth >= 0 (0.2 means 20%), or None")
        if not 0.0 < self.between_run_floor < 1.0:
            bad("between_run_floor", self.between_run_floor, "a relative sd in (0, 1)")
        if not 0.0 <= self.later_run_drift <= 100.0:
            bad("later_run_drift", self.later_run_drift, "a multiple of the suite's drift >= 0 (e.g. 1)")
        if self.prior_runs < 0:
            bad("prior_runs", self.prior_runs, ">= 0")
        if not 0.0 < self.crowded_cpus < 64.0:
            bad("crowded_cpus", self.crowded_cpus, "a number of CPUs > 0 (e.g. 0.5)")
        if not 0.0 <= self.measure_again_reach <= 1.0:
            bad("measure_again_reach", self.measure_again_reach, "a share between 0 and 1 (e.g. 0.5)")
        if not 0.0 <= self.memory_slope_prior <= 10.0:
            bad("memory_slope_prior", self.memory_slope_prior, "a standard deviation >= 0 (e.g. 1; 0: off)")
        if not 0.0 <= self.unalike_share_of_threshold <= 10.0:
            bad("unalike_share_of_threshold", self.unalike_share_of_threshold, "a share of the threshold >= 0")
