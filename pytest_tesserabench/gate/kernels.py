"""Deterministic kernel figures against a baseline's: no statistics needed.

Static analysis gives the same registers, spills, shared memory and occupancy every time a kernel
is compiled with the same source, configuration and Triton, so a change is a fact, not a
measurement. Kernels are matched by (name, arch, config); the config is what selects the binary
(the autotuner's choice or the launcher's constexprs, num_warps, num_stages):

* same config: more spill bytes or lower occupancy is a regression (moderate for spills, mild or
  moderate for occupancy by how much was lost); register and shared-memory changes are notes, and
  so are changes of the work the kernel holds (SASS and tensor-core instructions, TTIR dots,
  loads, stores and math, PTX SFU calls: ``work_changes``), unless the SASS instruction count grew
  past ``--bench-work-threshold`` (off by default), which fails by its growth as a timing would;
* another config of the same kernel (the launcher's heuristics or the config list changed): said
  as such, old -> new, with the figures that moved, as notes;
* either way, a kernel that can no longer launch (occupancy 0: shared memory over the limit, too
  many registers or threads) or no longer compiles is a severe regression, with the reason.

When the two sides were compiled by different Triton versions, nothing is gated (a compiler
upgrade is not the project's change); the figures are still shown.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from pytest_tesserabench.record.results import KERNEL_WORK

SEVERITY_RANK = {None: 0, "mild": 1, "moderate": 2, "severe": 3}
SEVERITY_BOUNDS = ((0.10, "mild"), (0.20, "moderate"))  # change below 10% mild, below 20% moderate


def severity_of(ratio: float) -> str:
    """mild, moderate or severe, by how much slower (a time's ratio) or larger (a count's)."""
    change = ratio - 1.0
    for bound, name in SEVERITY_BOUNDS:
        if change < bound:
            return name
    return "severe"


_VARIANT_KEYS = ("num_warps", "num_stages", "num_ctas")


@dataclass
class KernelFindings:
    """What the kernel figures say: failing reasons with their severity, and notes."""

    regressions: list[tuple[str, str]] = field(default_factory=list)  # (severity, text)
    notes: list[str] = field(default_factory=list)
    # Another config that spills or lost half its occupancy: a regression unless the timing shows
    # the new config is not slower (an autotuner may rightly trade occupancy for speed).
    config_regressions: list[tuple[str, str]] = field(default_factory=list)
    compared: int = 0  # kernels matched with the baseline's (same name and arch)

    def with_config_regressions(self) -> KernelFindings:
        """These findings with the config changes' losses counted as regressions."""
        return KernelFindings([*self.regressions, *self.config_regressions], self.notes, [], self.compared)

    def add(self, severity: str, text: str, *, gated: bool) -> None:
        """A regression where the figures are gated, a note where they are only shown."""
        if gated:
            self.regressions.append((severity, text))
        else:
            self.notes.append(text)

    @property
    def reasons(self) -> tuple[str, ...]:
        return tuple(text for _, text in self.regressions)

    @property
    def severity(self) -> str | None:
        return max((s for s, _ in self.regressions), key=SEVERITY_RANK.__getitem__, default=None)


def variant(kernel: dict) -> dict[str, Any]:
    """The configuration that selects a kernel's binary, as one flat dict."""
    flat = dict(kernel.get("constexprs") or {})
    flat.update(kernel.get("config") or {})
    for key in _VARIANT_KEYS:
        if kernel.get(key) is not None:
            flat[key] = kernel[key]
    return flat


def _variant_key(kernel: dict) -> str:
    return json.dumps(variant(kernel), sort_keys=True, default=str)


def describe_change(old: dict[str, Any], new: dict[str, Any]) -> str:
    """'BLOCK_M 128 -> 64, num_warps 8 -> 4' (keys that differ only)."""
    keys = [k for k in dict.fromkeys([*old, *new]) if old.get(k) != new.get(k)]
    return ", ".join(f"{k} {old.get(k, '-')} -> {new.get(k, '-')}" for k in keys) or "no difference"


def _figure(kernel: dict, key: str) -> float | None:
    value = kernel.get(key)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return None
    try:
        return float(value)
    except OverflowError:  # (an integer past a float's range, in a hand-edited baseline)
        return None


def _cannot_launch(kernel: dict) -> str | None:
    """Why the kernel cannot launch on its arch, or None."""
    if kernel.get("error"):
        from pytest_tesserabench.inspect.summary import error_summary

        return f"no longer compiles: {error_summary(kernel['error'])}"
    if _figure(kernel, "occupancy") == 0.0:
        why = [n for n in kernel.get("notes") or () if "exceed" in str(n)]
        return "can no longer launch (occupancy 0)" + (f": {why[0]}" if why else "")
    return None


def _compare_figures(
    label: str, old: dict, new: dict, gated: bool, found: KernelFindings, work_threshold: float | None = None
) -> None:
    spill_new, spill_old = _figure(new, "spill_bytes"), _figure(old, "spill_bytes")
    if spill_new is not None and spill_old is not None and spill_new > spill_old:
        found.add("moderate", f"{label}: spills {spill_old:.0f} B -> {spill_new:.0f} B", gated=gated)
    occ_new, occ_old = _figure(new, "occupancy"), _figure(old, "occupancy")
    if occ_new is not None and occ_old is not None and occ_new < occ_old - 1e-9 and occ_new > 0:
        lost = 1 - occ_new / occ_old
        severity = "moderate" if lost >= 0.25 else "mild"
        found.add(severity, f"{label}: occupancy {occ_old:.2f} -> {occ_new:.2f}", gated=gated)
    for key, unit in (("registers", ""), ("shared_bytes", " B")):
        new_value, old_value = _figure(new, key), _figure(old, key)
        if new_value is not None and old_value is not None and new_value != old_value:
            found.notes.append(f"{label}: {key} {old_value:.0f}{unit} -> {new_value:.0f}{unit}")
    work = work_changes(old, new)
    if work:
        found.notes.append(f"{label}: work {work}")
    sass_new, sass_old = _figure(new, "sass_instructions"), _figure(old, "sass_instructions")
    if work_threshold is not None and sass_new is not None and sass_old and sass_new >= sass_old * (1 + work_threshold):
        grew = sass_new / sass_old
        found.add(
            severity_of(grew),
            f"{label}: SASS instructions {sass_old:.0f} -> {sass_new:.0f} ({grew - 1:+.1%}), "
            "past --bench-work-threshold",
            gated=gated,
        )


def work_changes(old: dict, new: dict) -> str:
    """'SASS instructions 98 -> 108 (+10.2%), PTX sfu 2 -> 4': the work a kernel holds
    (record.results.KERNEL_WORK), where it differs. Notes, never a failure: a count is static (a
    loop's body counts once, and unrolling adds instructions to save time), so it is no measure of
    speed; but where nothing is timed it is what shows a change that added work."""

    def figure(kernel: dict, path: tuple[str, ...]) -> float | None:
        for key in path[:-1]:
            kernel = kernel.get(key) if isinstance(kernel.get(key), dict) else {}
        return _figure(kernel, path[-1])

    said = []
    for name, path in KERNEL_WORK:
        before, after = figure(old, path), figure(new, path)
        if before is None or after is None or before == after:
            continue
        change = f" ({after / before - 1:+.1%})" if name == "SASS instructions" and before else ""
        said.append(f"{name} {before:.0f} -> {after:.0f}{change}")
    return ", ".join(said)


def _config_losses(label: str, old: dict, new: dict, found: KernelFindings) -> None:
    spill_new, spill_old = _figure(new, "spill_bytes"), _figure(old, "spill_bytes")
    if spill_new and not spill_old and spill_old is not None:
        found.config_regressions.append(("moderate", f"{label}: the new config spills {spill_new:.0f} B"))
    occ_new, occ_old = _figure(new, "occupancy"), _figure(old, "occupancy")
    if occ_new is not None and occ_old and occ_new <= occ_old / 2:
        found.config_regressions.append(
            ("moderate", f"{label}: the new config has half the occupancy or less ({occ_old:.2f} -> {occ_new:.2f})")
        )


def compare_kernels(
    candidate: list[dict] | None,
    baseline: list[dict] | None,
    *,
    compilers_differ: str | None = None,
    work_threshold: float | None = None,
) -> KernelFindings:
    """Findings for one benchmark's kernels against the baseline's (see the module doc).

    ``compilers_differ``: e.g. 'Triton 3.6.0 -> 3.9.0' when the two sides were compiled by
    different versions; then nothing regresses and the figures are notes. ``work_threshold``:
    GateConfig.work_threshold (the same config's SASS instruction count grown by it fails).
    """
    found = KernelFindings()
    gated = compilers_differ is None
    base_by_kernel: dict[tuple, dict[str, dict]] = {}
    for kernel in baseline or []:
        base_by_kernel.setdefault((kernel.get("name"), kernel.get("arch")), {})[_variant_key(kernel)] = kernel
    noted_compilers = False
    for kernel in candidate or []:
        variants = base_by_kernel.get((kernel.get("name"), kernel.get("arch")))
        if not variants:
            continue  # a kernel the baseline never ran: nothing to compare
        label = f"kernel {kernel.get('name')} ({kernel.get('arch')})"
        found.compared += 1
        if not gated and not noted_compilers:
            found.notes.append(f"kernel figures compared, not gated: {compilers_differ}")
            noted_compilers = True
        old = variants.get(_variant_key(kernel))
        blocked = _cannot_launch(kernel)
        if old is None:  # another config of a kernel the baseline knows
            previous = next(iter(variants.values()))
            found.notes.append(f"{label}: config changed: {describe_change(variant(previous), variant(kernel))}")
            if blocked and not _cannot_launch(previous):
                found.add("severe", f"{label}: {blocked}", gated=gated)
            elif not blocked:
                _compare_figures(label, previous, kernel, gated=False, found=found)
                if gated:
                    _config_losses(label, previous, kernel, found)
            continue
        if blocked:
            if not _cannot_launch(old):
                found.add("severe", f"{label}: {blocked}", gated=gated)
            continue
        _compare_figures(label, old, kernel, gated=gated, found=found, work_threshold=work_threshold)
    return found
