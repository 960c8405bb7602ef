"""What keeps the ranks of a torchrun session in step, as pure functions of what each rank reported.

Ranks must run the same tests in the same order with the same measurement settings: a collective
waits for its peers, so one rank running a test the others skip (or measuring 5 rounds where they
measure 6) hangs them all. ``selection_problem`` compares what each rank collected.

After every phase of every test the ranks exchange their outcome and ``decide`` gives each rank
the same answer: a failure anywhere fails the test everywhere, naming the rank that raised (a
rank that only timed out waiting for it is named as such); a skip on some ranks skips the test
on all. When a rank failed inside a collective, the ranks' collectives are out of step (a peer's
pending operation can never be matched again), so the session stops on every rank rather than
hang in the next test.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

# Text torch.distributed's backends put in the errors they raise for a peer that never came or
# went away (gloo raises plain RuntimeErrors; newer torch raises DistError subclasses).
_DISTRIBUTED_MARKS = ("Timed out waiting", "Connection closed by peer", "Connection reset by peer", "/gloo/", "NCCL")

MAX_MESSAGE = 400


class PeerError(RuntimeError):
    """This rank gave up waiting on its peers (one left, timed out, or is out of step)."""


def is_distributed_error(exc: BaseException) -> bool:
    """True for an error raised by a collective or the store (a peer late, gone or out of step)."""
    if isinstance(exc, PeerError):
        return True
    torch = sys.modules.get("torch")
    dist_error = getattr(getattr(torch, "distributed", None), "DistError", None)
    if dist_error is not None and isinstance(exc, dist_error):
        return True
    return isinstance(exc, RuntimeError) and any(mark in str(exc) for mark in _DISTRIBUTED_MARKS)


def summarize(outcome: str, when: str, exc: BaseException | None, skip: tuple | None) -> dict:
    """One rank's report of one test phase, as plain JSON for the store."""
    message = ""
    if exc is not None:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        message = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 3] + "..."
    return {
        "outcome": outcome,
        "when": when,
        "message": message,
        "dist_error": exc is not None and is_distributed_error(exc),
        "skip": list(skip) if skip else None,
    }


@dataclass(frozen=True)
class Decision:
    """What one rank's report of a test phase becomes once every rank's is known."""

    outcome: str  # "passed", "failed" or "skipped"
    text: str = ""  # for a failure: the ranks that failed and why
    skip: tuple | None = None  # for a skip: (path, line, reason) naming the rank that skipped
    stop: str | None = None  # why the session must stop on every rank (collectives out of step)


def _ranks(ranks: list[int]) -> str:
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(map(str, ranks))


def decide(everyone: list[dict], rank: int, nodeid: str) -> Decision:
    """The outcome of this phase on ``rank`` given every rank's summary (index = rank)."""
    mine = everyone[rank]
    failed = [r for r, s in enumerate(everyone) if s["outcome"] == "failed"]
    if failed:
        waiting = [r for r in failed if everyone[r]["dist_error"]]
        origins = [r for r in failed if r not in waiting] or failed
        lines = [f"rank {r} failed in {everyone[r]['when']}: {everyone[r]['message']}" for r in origins]
        if waiting and origins != failed:
            lines.append(f"{_ranks(waiting)} failed waiting for it (a collective timed out or its peer left)")
        stop = None
        if waiting:
            stop = (
                f"tesserabench: the ranks' collectives are out of step after {nodeid} failed on "
                f"{_ranks(origins)}; the remaining tests were not run on any rank (fix that failure; if the "
                "collective is only slow, raise --bench-dist-timeout)"
            )
        return Decision("failed", "tesserabench: " + "; ".join(lines), stop=stop)
    skipped = [r for r, s in enumerate(everyone) if s["outcome"] == "skipped"]
    if skipped and mine["outcome"] != "skipped":
        r = skipped[0]
        path, line, reason = everyone[r]["skip"] or ("", 0, "skipped")
        return Decision("skipped", skip=(path, line, f"rank {r} skipped it: {reason}"))
    return Decision(mine["outcome"])


def selection_problem(everyone: list[dict]) -> str | None:
    """Why the ranks cannot run together (different tests, order or settings), or None.

    Each entry: ``{"ids": [node ids in run order], "settings": {...}, "errors": collection errors}``.
    """
    reference = everyone[0]
    for rank, other in enumerate(everyone[1:], start=1):
        settings, theirs = reference["settings"], other["settings"]
        differing = [key for key in sorted(set(settings) | set(theirs)) if settings.get(key) != theirs.get(key)]
        if differing:
            key = differing[0]
            return (
                f"the ranks measure with different settings: rank 0 has {key}={settings.get(key)!r}, rank {rank} "
                f"has {key}={theirs.get(key)!r}; give every rank the same options (torchrun passes the same "
                "arguments to all; look for rank-dependent ini files or environment)"
            )
        if other["ids"] != reference["ids"]:
            return _selection_difference(reference, other, rank)
    return None


def _selection_difference(reference: dict, other: dict, rank: int) -> str:
    ours, theirs = reference["ids"], other["ids"]
    position = next((i for i, (a, b) in enumerate(zip(ours, theirs)) if a != b), min(len(ours), len(theirs)))

    def at(ids: list[str]) -> str:
        return repr(ids[position]) if position < len(ids) else "nothing (its list ends there)"

    errors = ""
    if reference.get("errors") or other.get("errors"):
        errors = f" (collection errors: rank 0 {reference.get('errors', 0)}, rank {rank} {other.get('errors', 0)})"
    return (
        f"the ranks collected different tests: rank 0 has {len(ours)}, rank {rank} has {len(theirs)}{errors}; "
        f"first difference at test {position + 1}: rank 0 runs {at(ours)}, rank {rank} runs {at(theirs)}. Every "
        "rank must run the same tests in the same order, or their collectives wait for each other forever: give "
        "every rank the same files and arguments (no rank-dependent -k/-m or skips at collection, no random order)"
    )
