"""What a report is drawn from: one run, its verdicts, and the baseline history it was compared
with. The session builds it at the end of a run; ``tesserabench report`` builds it from files."""

from __future__ import annotations

from dataclasses import dataclass, field

from pytest_tesserabench.record.results import BenchRecord, RunDocument, Verdict


@dataclass
class ReportData:
    run: RunDocument
    verdicts: dict[str, Verdict] = field(default_factory=dict)
    history: list[RunDocument] = field(default_factory=list)  # the baseline's runs, oldest first
    baseline: str | None = None  # what the run was compared with, in words
    # What the run says about itself under its tables: the CPU was shared, the command that settles
    # its INCONCLUSIVE verdicts, its suite-wide shift (report.terminal.run_notes)
    notes: list[str] = field(default_factory=list)

    @property
    def records(self) -> list[BenchRecord]:
        """The measured records (a record whose test failed before measuring has no stats)."""
        return [r for r in self.run.benchmarks.values() if r.stats is not None]

    @property
    def compared(self) -> bool:
        return bool(self.verdicts)
