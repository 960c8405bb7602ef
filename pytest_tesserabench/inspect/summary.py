"""The short terminal section printed under a benchmark: one line per kernel and target."""

from __future__ import annotations

import re
from collections.abc import Iterable


def _bytes(value) -> str:
    if value is None:
        return "?"
    return f"{value / 1024:.1f} KiB" if value >= 1024 else f"{value} B"


_ERROR_LINE = re.compile(r"\b\w*(Error|Exception)\b\s*[:(]|\berror:")
_SOURCE_AT = re.compile(r"\bat \d+:\d+:?$")


def error_summary(error: str, limit: int = 160) -> str:
    """The one line of a compile error that says what is wrong: ptxas's "fatal" line, else the
    last "...Error: message" line (a Triton CompilationError puts the cause last, after the
    source excerpt), else the first line."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()] or ["?"]
    fatal = [line for line in lines if "fatal" in line]
    errors = [line for line in lines if _ERROR_LINE.search(line)]
    if fatal:
        chosen = fatal[0]
    elif errors and errors[-1] != lines[0]:
        chosen = f"{lines[0]} ... {errors[-1]}" if len(lines[0]) < 40 else errors[-1]
    elif len(lines) > 1 and _SOURCE_AT.search(lines[0]):
        # Triton's "CompilationError: at 3:25:", the source line, a caret, then the cause alone
        chosen = f"{lines[0]} ... {lines[-1]}"
    else:
        chosen = lines[0]
    return chosen[:limit]


def format_kernel_lines(records: Iterable[dict]) -> list[str]:
    """e.g. `_matmul_kernel sm_90  w8 s3  regs 168  spills 0 B  smem 96.0 KiB  occ 25% (registers)  TC 64`."""
    lines = []
    for record in records:
        head = f"{record.get('name', '?')} {record.get('arch', '?')}"
        if record.get("error"):
            lines.append(f"{head}  compile failed: {error_summary(record['error'])}")
            continue
        occupancy = record.get("occupancy")
        occupancy_text = "?" if occupancy is None else f"{occupancy:.0%} ({record.get('limiter')})"
        spills = record.get("spill_bytes")
        spill_text = _bytes(spills) + (" SPILLS" if spills else "")
        tensor_core = record.get("tensor_core_instructions")
        lines.append(
            f"{head}  w{record.get('num_warps')} s{record.get('num_stages')}  "
            f"regs {record.get('registers')}  spills {spill_text}  smem {_bytes(record.get('shared_bytes'))}  "
            f"occ {occupancy_text}  TC {'?' if tensor_core is None else tensor_core}"
        )
        mix = mix_line(record)
        if mix:
            lines.append(f"  {mix}")
        for note in record.get("notes") or ():
            lines.append(f"  note: {note}")
    return lines


# The counts shown per IR level, in this order (those that are not zero): the op and instruction
# counts of docs/static-analysis.md's table and the PTX and SASS totals (not sizes, versions or
# every op's total), so that extra work a change adds (a math op, an SFU instruction, a second
# dot) shows where a GPU-less reader looks; --json has them all.
_MIX = (
    (
        "TTIR",
        "ttir",
        (
            "load",
            "store",
            "dot",
            "descriptor_load",
            "descriptor_store",
            "atomic",
            "reduce",
            "scan",
            "math",
            "loops",
            "branches",
        ),
    ),
    (
        "TTGIR",
        "ttgir",
        (
            "dot",
            "warp_group_dot",
            "tcgen5_mma",
            "layout_conversions",
            "async_copies",
            "tma_copies",
            "barriers",
            "pipeline_buffers",
        ),
    ),
    (
        "PTX",
        "instructions",
        (
            "ld_global",
            "st_global",
            "ld_shared",
            "st_shared",
            "cp_async",
            "cp_async_bulk",
            "cp_async_bulk_tensor",
            "mma",
            "wgmma",
            "tcgen05_mma",
            "sfu",
            "barrier",
            "mbarrier",
            "atom_global",
        ),
    ),
    ("SASS", "sass", ("HMMA", "HGMMA", "local_loads", "local_stores")),
)


def mix_line(record: dict) -> str:
    """The instruction mix at each IR level in one line, e.g. `mix: TTIR load 2, store 1 · TTGIR
    blocked · PTX 52 instructions, ld_global 16, st_global 8 · SASS 81 instructions`: the counts
    that are not zero."""
    parts = []
    for level, key, names in _MIX:
        counts = record.get(key) or {}
        shown = [f"{name} {counts[name]}" for name in names if counts.get(name)]
        if key == "ttgir" and counts.get("layouts"):
            shown.insert(0, "/".join(counts["layouts"]))
        if key in ("instructions", "sass") and counts.get("total"):  # (PTX's and SASS's totals)
            shown.insert(0, f"{counts['total']} instructions")
        if shown:
            parts.append(f"{level} {', '.join(shown)}")
    return "mix: " + " · ".join(parts) if parts else ""
