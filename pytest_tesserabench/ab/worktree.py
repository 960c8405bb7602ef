"""REF, checked out into a git worktree under the pytest cache, and removed again.

Each worktree has an owner file beside it (``ab-<sha>.owner``: the pid of the session that checked
it out), so that a run removes only the worktrees of sessions that are no longer running: a
session killed before it could clean up leaves its worktree behind, and another A/B session of
the same project may be using its own at this moment.
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from filelock import FileLock

from pytest_tesserabench.processes.served import ProcessError
from pytest_tesserabench.record.held_lock import pid_alive


class ABError(ProcessError):
    """A/B cannot run as asked (a ref, a worktree, or a served process of either side); the
    message names the culprit and the fix."""


@dataclass(frozen=True)
class Reference:
    ref: str  # as the user wrote it
    sha: str
    path: Path  # the worktree
    repo: Path  # the repository's top level
    dirty: int  # uncommitted changes in the working tree (the candidate), untracked files among them

    def describe(self) -> str:
        tree = "the working tree" + (
            f" ({self.dirty} uncommitted change(s), untracked files included)" if self.dirty else ""
        )
        return f"{tree} vs {self.ref} ({self.sha[:10]})"


def _git(cwd: Path, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError:
        raise ABError("--bench-ab needs git, and git is not installed") from None
    except subprocess.TimeoutExpired:
        raise ABError(f"--bench-ab: `git {' '.join(args)}` did not finish in {timeout:.0f} s") from None


def resolve(rootdir: Path, ref: str, results: Path | None = None) -> tuple[Path, str, int]:
    """(repository top level, the commit REF names, uncommitted changes); ABError otherwise.
    ``results``: the folder of baselines, not counted among the changes (the plugin writes
    there; it is not code either side runs)."""
    top = _git(rootdir, "rev-parse", "--show-toplevel")
    if top.returncode != 0:
        raise ABError(f"--bench-ab={ref}: {rootdir} is not in a git repository; A/B compares with a git ref")
    repo = Path(top.stdout.strip())
    found = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if found.returncode != 0 or not found.stdout.strip():
        raise ABError(
            f"--bench-ab={ref}: git knows no commit by that name; give a branch, tag or sha "
            "(e.g. --bench-ab=origin/main; in CI, fetch it first: git fetch origin main)"
        )
    # An untracked file is imported by the working tree's side as any other (REF's lacks it).
    status = _git(repo, "status", "--porcelain", "-z", "--untracked-files=normal")
    changed = _porcelain_paths(status.stdout) if status.returncode == 0 else []
    if results is not None:
        results = results.resolve()
        changed = [
            p for p in changed if not (results == (repo / p).resolve() or results in (repo / p).resolve().parents)
        ]
    dirty = len(changed)
    return repo, found.stdout.strip(), dirty


def has_commit(rootdir: Path, sha: str) -> bool | None:
    """Whether the clone at ``rootdir`` has commit ``sha`` (a shallow CI clone may not); None
    when ``rootdir`` is not in a git repository (or git is missing)."""
    try:
        if _git(rootdir, "rev-parse", "--git-dir", timeout=10).returncode != 0:
            return None
        return _git(rootdir, "cat-file", "-e", f"{sha}^{{commit}}", timeout=10).returncode == 0
    except ABError:
        return None


def _porcelain_paths(text: str) -> list[str]:
    """The paths of ``git status --porcelain -z`` (a rename's entry is followed by its old path)."""
    entries, paths = text.split("\0"), []
    i = 0
    while i < len(entries):
        entry = entries[i]
        if len(entry) > 3:
            paths.append(entry[3:])
            if entry[0] in "RC":
                i += 1  # the old path
        i += 1
    return paths


def checkout(rootdir: Path, ref: str, cache_dir: Path, results: Path | None = None) -> Reference:
    """REF checked out (detached) into ``cache_dir/ab-<sha>``; reused when already there."""

    repo, sha, dirty = resolve(rootdir, ref, results)
    cache_dir.mkdir(parents=True, exist_ok=True)
    path = cache_dir / f"ab-{sha[:12]}"
    with FileLock(str(cache_dir / ".ab.lock")):  # xdist workers and the controller share it
        remove_stale(repo, cache_dir, keep=path)
        head = _git(path, "rev-parse", "HEAD") if path.is_dir() else None
        if head is None or head.returncode != 0 or head.stdout.strip() != sha:
            _remove(repo, path)
            added = _git(repo, "worktree", "add", "--detach", "--force", str(path), sha, timeout=600)
            if added.returncode != 0:
                raise ABError(f"--bench-ab={ref}: could not check {sha[:10]} out: {added.stderr.strip()}")
        if not _owned_by_live_session(path):  # xdist workers reuse their controller's: it stays the owner
            _owner_file(path).write_text(str(os.getpid()))
    return Reference(ref=ref, sha=sha, path=path, repo=repo, dirty=dirty)


def deleted_test_files(
    reference: Reference, rootdir: Path, under: Sequence[Path], patterns: Sequence[str]
) -> list[str]:
    """Test files (names matching pytest's ``python_files`` ``patterns``) that REF has below the
    folders or files ``under`` and the working tree does not (deleted, or renamed: git sees a
    rename as a deletion beside an addition), relative to ``rootdir``. Their benchmark tests are
    MISSING here; only the reference side can collect them."""
    listed = _git(reference.repo, "diff", "--name-only", "--no-renames", "--diff-filter=D", "-z", reference.sha, "--")
    if listed.returncode != 0:
        return []  # git could not say: nothing is listed, nothing else changes
    root, roots = rootdir.resolve(), [p.resolve() for p in under]
    found = []
    for name in filter(None, listed.stdout.split("\0")):
        path = (reference.repo / name).resolve()
        inside = any(path == top or top in path.parents for top in roots)
        if inside and root in path.parents and any(fnmatch.fnmatch(path.name, p) for p in patterns):
            found.append(path.relative_to(root).as_posix())
    return sorted(found)


def _owner_file(path: Path) -> Path:
    return path.with_name(path.name + ".owner")


def _owned_by_live_session(path: Path) -> bool:
    try:
        return pid_alive(int(_owner_file(path).read_text().strip()))
    except (OSError, ValueError):
        return False  # no owner (a session killed before it wrote one, or an older tesserabench)


def _remove(repo: Path, path: Path) -> None:
    if path.exists():
        _git(repo, "worktree", "remove", "--force", str(path))
        shutil.rmtree(path, ignore_errors=True)
    _owner_file(path).unlink(missing_ok=True)
    _git(repo, "worktree", "prune")


def remove_stale(repo: Path, cache_dir: Path, keep: Path | None = None) -> None:
    """Worktrees an earlier run left behind (killed before it could clean up); those of sessions
    still running stay. git forgets the removed ones (and any whose folder is gone)."""
    for stale in cache_dir.glob("ab-*"):
        if stale.is_dir() and stale != keep and not _owned_by_live_session(stale):
            _remove(repo, stale)
    _git(repo, "worktree", "prune")


def remove(reference: Reference) -> None:
    """The worktree of this run, gone; git forgets it too."""

    with FileLock(str(reference.path.parent / ".ab.lock")):
        _remove(reference.repo, reference.path)
