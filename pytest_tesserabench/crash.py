"""The one line that says why a pytest report failed: for messages that name a failure elsewhere
(an A/B served process's test, a test that failed in an earlier, unreported pass)."""

from __future__ import annotations


def crash_line(report) -> str:
    """The exception and its message, on one line of at most 300 characters."""
    crash = getattr(report.longrepr, "reprcrash", None)
    if crash is not None and getattr(crash, "message", None):
        return crash.message.strip().splitlines()[0][:300]
    lines = [line for line in str(report.longrepr).strip().splitlines() if line.startswith("E ")]
    lines = lines or str(report.longrepr).strip().splitlines() or ["?"]
    return lines[-1].removeprefix("E").strip()[:300]
