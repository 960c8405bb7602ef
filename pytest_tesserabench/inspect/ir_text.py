"""Readers for the text levels of a compiled Triton kernel: TTIR, TTGIR, PTX and SASS.

Each takes the text Triton (or nvdisasm) produced and returns plain dicts of counts, so the
figures are deterministic for a given compiler and easy to diff between runs.
"""

from __future__ import annotations

import re
from collections import Counter

# An MLIR operation: optional results (`%a, %b = `), then `dialect.op` or `"dialect.op"`.
_MLIR_OP = re.compile(r'^\s*(?:%[^=]*=\s*)?"?([a-z_][a-z0-9_]*\.[a-z0-9_.]+)"?[\s({<:]')


def mlir_op_counts(text: str) -> Counter:
    """Every operation in an MLIR module text, counted by name ("tt.load": 2, ...)."""
    counts: Counter = Counter()
    for line in text.splitlines():
        match = _MLIR_OP.match(line + " ")
        if match:
            counts[match.group(1)] += 1
    return counts


def _sum(counts: Counter, *names: str) -> int:
    return sum(counts.get(name, 0) for name in names)


# A tl.dot of fp32 operands on TF32 tensor cores (its default input_precision): a 10-bit mantissa,
# not fp32's 23 ("tf32x3" and "ieee" keep fp32 accuracy).
_TF32_DOT = re.compile(r"\btt\.dot\b[^\n]*\binputPrecision = tf32\b(?!x3)[^:\n]*: tensor<[0-9x]+xf32>")


def ttir_summary(text: str) -> dict[str, int]:
    """What the kernel asks for before any GPU lowering."""
    ops = mlir_op_counts(text)
    return {
        "dot": _sum(ops, "tt.dot", "tt.dot_scaled"),
        "tf32_dot": len(_TF32_DOT.findall(text)),
        "load": _sum(ops, "tt.load"),
        "store": _sum(ops, "tt.store"),
        "descriptor_load": _sum(ops, "tt.descriptor_load", "tt.experimental_descriptor_load"),
        "descriptor_store": _sum(ops, "tt.descriptor_store", "tt.experimental_descriptor_store"),
        "reduce": _sum(ops, "tt.reduce"),
        "scan": _sum(ops, "tt.scan"),
        "atomic": _sum(ops, "tt.atomic_rmw", "tt.atomic_cas"),
        "loops": _sum(ops, "scf.for", "scf.while"),
        "branches": _sum(ops, "scf.if"),
        "math": sum(count for name, count in ops.items() if name.startswith("math.")),
        "operations": sum(ops.values()),
    }


_LAYOUT_DEF = re.compile(r"^#(\w+) = #(?:ttg|triton_gpu|ttng)\.(\w+)<(.*)$", re.MULTILINE)
_MMA_VERSION = re.compile(r"versionMajor = (\d+)")
_LOCAL_ALLOC = re.compile(r"ttg\.local_alloc\b.*!ttg\.memdesc<([0-9x]+)x([a-z]+)(\d+)")
_ASYNC_WAIT = re.compile(r"ttg\.async_wait\b.*\{num = (\d+)")


def ttgir_summary(text: str) -> dict:
    """Layouts, async copies, barriers, shared allocations and pipelining of the GPU IR."""
    ops = mlir_op_counts(text)
    layouts: Counter = Counter()
    mma_versions = set()
    for _name, kind, body in _LAYOUT_DEF.findall(text):
        layouts[kind] += 1
        if kind == "nvidia_mma" and (version := _MMA_VERSION.search(body)):
            mma_versions.add(int(version.group(1)))
    shared_bytes, buffers = 0, 0
    allocations = _LOCAL_ALLOC.findall(text)
    for shape, _kind, bits in allocations:
        dims = [int(d) for d in shape.split("x")]
        size = 1
        for dim in dims:
            size *= dim
        shared_bytes += size * int(bits) // 8
        # A multi-buffered (pipelined) tile is allocated as <stages x tile>.
        buffers = max(buffers, dims[0] if len(dims) >= 3 else 1)
    waits = [int(n) for n in _ASYNC_WAIT.findall(text)]
    return {
        "layouts": dict(sorted(layouts.items())),
        "mma_version": max(mma_versions) if mma_versions else None,
        "dot": _sum(ops, "tt.dot"),
        "warp_group_dot": _sum(ops, "ttng.warp_group_dot"),
        "tcgen5_mma": _sum(ops, "ttng.tc_gen5_mma", "ttng.tc_gen5_mma_scaled"),
        "async_copies": _sum(ops, "ttg.async_copy_global_to_local"),
        "tma_copies": _sum(
            ops,
            "ttng.async_tma_copy_global_to_local",
            "ttng.async_tma_copy_local_to_global",
            "ttng.async_tma_gather",
            "ttng.async_tma_scatter",
        ),
        "barriers": _sum(
            ops,
            "gpu.barrier",
            "ttg.barrier",
            "ttng.init_barrier",
            "ttng.wait_barrier",
            "ttng.barrier_expect",
            "ttng.arrive_barrier",
        ),
        "layout_conversions": _sum(ops, "ttg.convert_layout"),
        "shared_allocations": len(allocations),
        "shared_alloc_bytes": shared_bytes,
        "pipeline_buffers": buffers,
        "async_wait_max": max(waits) if waits else None,
    }


# PTX instruction classes, tested in order on the opcode (predicates stripped).
PTX_CLASSES: tuple[tuple[str, re.Pattern], ...] = tuple(
    (name, re.compile(pattern))
    for name, pattern in (
        ("mma", r"^mma\."),
        ("wgmma", r"^wgmma\.mma_async"),
        ("tcgen05_mma", r"^tcgen05\.mma"),
        ("ld_global", r"^ld\.global"),
        ("st_global", r"^st\.global"),
        ("atom_global", r"^(atom|red)\.global"),
        ("ld_shared", r"^(ld\.shared|ldmatrix)"),
        ("st_shared", r"^(st\.shared|stmatrix)"),
        ("cp_async_bulk_tensor", r"^cp\.async\.bulk\.tensor"),
        ("cp_async_bulk", r"^cp\.async\.bulk"),
        ("cp_async", r"^cp\.async\.(ca|cg)"),
        ("mbarrier", r"^mbarrier\."),
        ("barrier", r"^(bar|barrier)\."),
        ("sfu", r"^(ex2|lg2|rsqrt|sqrt|rcp|sin|cos|tanh)\.approx"),
    )
)
_PTX_PREDICATE = re.compile(r"^@!?%\w+\s+")


def ptx_opcodes(text: str) -> list[str]:
    """Opcodes of every PTX instruction (directives, labels, comments and braces skipped)."""
    opcodes = []
    for raw in text.splitlines():
        line = raw.split("//", 1)[0].strip()
        if not line or line[0] in ".{}()$" or line.endswith(":"):
            continue
        line = _PTX_PREDICATE.sub("", line)
        opcode = line.split(None, 1)[0].rstrip(";")
        if opcode[:1].isalpha():
            opcodes.append(opcode)
    return opcodes


def ptx_instruction_mix(text: str) -> dict[str, int]:
    mix = {name: 0 for name, _ in PTX_CLASSES}
    opcodes = ptx_opcodes(text)
    for opcode in opcodes:
        for name, pattern in PTX_CLASSES:
            if pattern.match(opcode):
                mix[name] += 1
                break
    mix["total"] = len(opcodes)
    return mix


_SASS_LINE = re.compile(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)(\.[A-Z0-9_.]*)?")
_TENSOR_CORE_SASS = re.compile(r"^(HMMA|HGMMA|IMMA|IGMMA|QGMMA|DMMA|BMMA|OMMA|UTC\w*MMA)$")


def sass_summary(text: str) -> dict:
    """nvdisasm output -> instruction counts (NOP padding excluded)."""
    opcodes: Counter = Counter()
    for match in _SASS_LINE.finditer(text):
        if match.group(1) != "NOP":
            opcodes[match.group(1)] += 1
    tensor_core = sum(count for op, count in opcodes.items() if _TENSOR_CORE_SASS.match(op))
    return {
        "total": sum(opcodes.values()),
        "tensor_core": tensor_core,
        "HMMA": opcodes.get("HMMA", 0),
        "HGMMA": opcodes.get("HGMMA", 0),
        "local_stores": opcodes.get("STL", 0),
        "local_loads": opcodes.get("LDL", 0),
        "opcodes": dict(opcodes.most_common()),
    }
