"""The candidate's side of ``--bench-ab`` in one pytest process (the session, or each xdist
worker): it starts the reference process on first need, runs each benchmark test on both sides
at once, interleaves every ``bench()`` call's blocks with the reference's, and hands the pairs to
the gate."""

from __future__ import annotations

import functools
from pathlib import Path

from pytest_tesserabench import gate, sampling
from pytest_tesserabench.ab import worktree
from pytest_tesserabench.ab.interleave import interleave
from pytest_tesserabench.ab.reference import Ready, ReferenceProcess, TestDone
from pytest_tesserabench.options import Settings


class TestOnBothSides:
    """One test as the two sides see it."""

    def __init__(self, nodeid: str, on_reference: bool):
        self.nodeid = nodeid
        self.on_reference = on_reference
        self.finished: TestDone | None = None  # the reference's test ended (before ours did)
        self.reference_unpaired: list[str | None] = []

    def why_unpaired(self) -> str:
        if not self.on_reference:
            return "no such test at the reference"
        if self.finished is not None and self.finished.outcome not in ("passed", "skipped"):
            return f"the test {self.finished.outcome} at the reference: {self.finished.error}"
        return "the reference's test does not make this call"


class ABLead:
    def __init__(self, settings: Settings, *, reference: worktree.Reference, rootdir: Path, cache_dir: Path | None):
        self.settings = settings
        self.reference = reference
        self.rootdir = rootdir
        self.cache_dir = cache_dir
        self.process: ReferenceProcess | None = None
        self.test_files: list[str] = []
        self.selected = 0  # benchmark tests selected: m of alpha/m
        self.test: TestOnBothSides | None = None
        self.settle_s: list[float] = []  # time spent settling, per benchmark that needed it

    @classmethod
    def open(cls, settings: Settings, *, rootdir: Path, cache_dir: Path) -> ABLead:
        reference = worktree.checkout(rootdir, settings.ab, cache_dir)
        return cls(settings, reference=reference, rootdir=rootdir, cache_dir=cache_dir)

    def describe(self) -> str:
        return self.reference.describe()

    # -- the session -------------------------------------------------------------------------------
    def collected(self, nodeids: list[str]) -> None:
        self.test_files = sorted({nodeid.split("::", 1)[0] for nodeid in nodeids})
        self.selected = len(nodeids)

    def _process(self) -> ReferenceProcess:
        if self.process is None:
            relative = self.rootdir.resolve().relative_to(self.reference.repo.resolve())
            self.process = ReferenceProcess(
                self.reference,
                cwd=self.reference.path / relative,
                test_files=self.test_files,
                pytest_args=self._measurement_args(),
                cache_dir=self.cache_dir,
            )
            self.process.start()
        return self.process

    def _measurement_args(self) -> list[str]:
        s = self.settings
        args = [
            f"--bench-max-time={s.max_time}",
            f"--bench-min-rounds={s.min_rounds}",
            f"--bench-warmup={s.warmup}",
            f"--bench-timer={s.timer}",
            f"--bench-interpret={s.interpret}",
        ]
        if s.arch:
            args.append(f"--bench-arch={','.join(s.arch)}")
        return args

    def close(self) -> None:
        if self.process is not None:
            self.process.close()
            self.process = None

    # -- a test ------------------------------------------------------------------------------------
    def begin_test(self, nodeid: str) -> None:
        self.test = TestOnBothSides(nodeid, self._process().run_test(nodeid))

    def end_test(self) -> TestOnBothSides | None:
        """The test is over here; the reference finishes its own. The test as both sides saw it."""
        test, self.test = self.test, None
        if test is not None and test.on_reference and test.finished is None:
            test.finished = self.process.end_test()
        return test

    def _reference_ready(self, name: str | None) -> Ready | None:
        """Wait until the reference reaches the same ``bench()`` call (None: it never will)."""
        test = self.test
        if test is None or not test.on_reference or test.finished is not None:
            return None
        while True:
            message = self.process.next_call()
            if isinstance(message, TestDone):
                test.finished = message
                return None
            if message.name == name:
                return message
            test.reference_unpaired.append(message.name)
            self.process.skip()

    # -- the measurer ------------------------------------------------------------------------------
    def measure(self, timer, budget: sampling.Budget, *, name: str | None, threshold: float, on_round=None, ranks=None):
        plan = sampling.warm_up(timer, budget)
        ready = self._reference_ready(name)
        info = {"ref": self.reference.ref, "sha": self.reference.sha}
        if ready is None:
            info["unpaired"] = self.test.why_unpaired() if self.test else "not a test run on both sides"
            return sampling.measure(timer, budget, plan=plan), info
        if ready.timer != timer.name:
            self.process.skip()
            info["unpaired"] = f"timers differ ({ready.timer} at the reference, {timer.name} here)"
            return sampling.measure(timer, budget, plan=plan), info
        alpha = self.settings.alpha / max(self.selected, 1)
        decide = functools.partial(_decide, threshold=threshold, alpha=alpha)
        result = interleave(
            timer, plan, self.process, decide, max_time=budget.max_time, settle_time=self.settings.settle_time
        )
        self.process.done()
        if result.settle_s > 0:
            self.settle_s.append(result.settle_s)
        decision = result.decision
        info.update(
            log_ratios=result.log_ratios,
            reference_rounds_ms=result.reference_rounds_ms,
            settle_s=result.settle_s,
            alpha_per_test=alpha,
            decision={
                "status": decision.status,
                "decided": decision.decided,
                "ratio": decision.ratio,
                "ci": list(decision.ci),
                "p_value": decision.p_value,
                "threshold": decision.threshold,
                "pairs": decision.pairs,
            },
        )
        return result.candidate, info


def _decide(log_ratios, final, *, threshold, alpha):
    return gate.paired_decision(log_ratios, threshold=threshold, alpha=alpha, final=final)
