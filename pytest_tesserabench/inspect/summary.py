"""The short terminal section printed under a benchmark: one line per kernel and target."""

from __future__ import annotations

from collections.abc import Iterable


def _bytes(value) -> str:
    if value is None:
        return "?"
    return f"{value / 1024:.1f} KiB" if value >= 1024 else f"{value} B"


def format_kernel_lines(records: Iterable[dict]) -> list[str]:
    """e.g. `_matmul_kernel sm_90  w8 s3  regs 168  spills 0 B  smem 96.0 KiB  occ 25% (registers)  TC 64`."""
    lines = []
    for record in records:
        head = f"{record.get('name', '?')} {record.get('arch', '?')}"
        if record.get("error"):
            error_lines = str(record["error"]).strip().splitlines()
            # ptxas puts the reason on its "fatal" line, after a generic first line
            first = next((line for line in error_lines if "fatal" in line), error_lines[0])[:160]
            lines.append(f"{head}  compile failed: {first}")
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
        for note in record.get("notes") or ():
            lines.append(f"  note: {note}")
    return lines
