"""Analyse captured kernel launches for each target: compile, read every level, cache, dump.

One record per (launch, arch): the `kernels` entries of a benchmark record (docs/usage.md, "The run file").
Records are cached on disk by a key covering everything that changes the binary, so a warm
re-run reads one small JSON file per kernel and target.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from pytest_tesserabench.record import files

from .archs import ARCH_LIMITS, normalise_arch
from .capture import KernelLaunch
from .compile import STAGES, CompileOutcome, cache_key, compile_for_arch
from .cubin import CubinFormatError, parse_ptxas_log, read_resources
from .ir_text import ptx_instruction_mix, sass_summary, ttgir_summary, ttir_summary
from .occupancy import theoretical_occupancy
from .tools import ToolMissing, disassemble

# Bump when the record's content or meaning changes: old cache entries are then ignored.
# 3: records of kernels that failed in an interpreter process (triton.language left patched)
# must not be served from old caches. 4: signatures carry Triton's divisibility (i32:16).
# 5: TTIR counts the dots of fp32 inputs on TF32 tensor cores (tf32_dot).
ANALYSER_VERSION = "5"
_ARTIFACT_FILES = {"ttir": "ttir", "ttgir": "ttgir", "llir": "llir", "ptx": "ptx", "cubin": "cubin", "sass": "sass"}


def analyse_launches(
    launches: Iterable[KernelLaunch],
    archs: Iterable[str] = ("sm_90",),
    *,
    cache_dir: Path | str | None = None,
    dump_dir: Path | str | None = None,
) -> list[dict]:
    """One record per launch and target, in launch order then target order.

    An unknown arch raises ValueError before any work; a kernel that fails to compile for a
    target gives a record with `error` for that target; a missing tool gives `notes`.
    """
    archs = tuple(normalise_arch(arch) for arch in archs)
    cache = Path(cache_dir) if cache_dir is not None else None
    dump = Path(dump_dir) if dump_dir is not None else None
    records = []
    for launch in launches:
        for arch in archs:
            record, artifacts = _analyse_one(launch, arch, cache)
            if dump is not None:
                _dump(dump, launch, record, artifacts)
            records.append(record)
    return records


def spec_id(launch: KernelLaunch) -> str:
    """Short stable id of a specialization (same for every target): names dump files."""
    text = json.dumps(
        [
            launch.source,
            launch.signature,
            launch.constexprs,
            launch.options,
            launch.num_warps,
            launch.num_stages,
            launch.num_ctas,
        ],
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(text.encode()).hexdigest()[:8]


def _analyse_one(launch: KernelLaunch, arch: str, cache: Path | None) -> tuple[dict, dict]:
    try:
        key = cache_key(launch, arch, ANALYSER_VERSION)
    except Exception as error:  # noqa: BLE001 - e.g. the kernel's source cannot be hashed
        key, cache = None, None
        note = f"not cached: {type(error).__name__}: {error}"
    else:
        note = None
    entry = cache / key[:2] / key if cache is not None else None
    if entry is not None and (entry / "record.json").is_file():
        try:
            record = json.loads((entry / "record.json").read_text())
            return _with_live_fields(record, launch), _LazyArtifacts(entry)
        except (OSError, ValueError):
            pass  # a damaged entry is recompiled and rewritten
    outcome = compile_for_arch(launch, arch)
    record, artifacts = _build_record(launch, outcome)
    if note:
        record["notes"].append(note)
    # Degraded results (a tool was missing) are not cached: installing the tool must help.
    # Nor are failures: a compile can fail for a reason outside the key (the process state,
    # as when the interpreter left triton.language patched), and must be retried next run.
    if entry is not None and not record.get("degraded") and not record.get("error"):
        _store(entry, record, artifacts)
    record.pop("degraded", None)
    return _with_live_fields(record, launch), artifacts


def _base_record(launch: KernelLaunch, arch: str) -> dict:
    return {
        "name": launch.name,
        "arch": arch,
        "source": launch.source,
        "num_warps": launch.num_warps,
        "num_stages": launch.num_stages,
        "num_ctas": launch.num_ctas,
        "signature": launch.typed_signature,
        "constexprs": launch.constexprs,
        "config": launch.config,
        "spec_id": spec_id(launch),
        "registers": None,
        "spill_bytes": None,
        "shared_bytes": None,
        "occupancy": None,
        "limiter": None,
        "instructions": {},
        "compile_ms": {},
        "error": None,
        "notes": [],
    }


def _build_record(launch: KernelLaunch, outcome: CompileOutcome) -> tuple[dict, dict]:
    record = _base_record(launch, outcome.arch)
    record["notes"].extend(outcome.notes)
    record["compile_ms"] = outcome.compile_ms
    if outcome.error:
        record["error"] = outcome.error
        return record, {}
    artifacts = dict(outcome.asm)
    limits = ARCH_LIMITS[outcome.arch]
    name = outcome.metadata.get("name", launch.name)

    try:
        resources = read_resources(outcome.asm["cubin"], name)
    except (CubinFormatError, KeyError, IndexError) as error:
        record["error"] = f"could not read the cubin's resource usage: {error}"
        return record, artifacts
    dynamic_shared = int(outcome.metadata.get("shared", 0) or 0)
    shared = resources.static_shared_bytes + dynamic_shared
    spills = parse_ptxas_log(outcome.ptxas_log or "")

    try:
        sass_text = disassemble(outcome.asm["cubin"])
    except (ToolMissing, RuntimeError, OSError) as error:
        sass_text = None
        record["notes"].append(f"SASS level unavailable ({error}); tensor-core count taken from PTX")
        record["degraded"] = True
    sass = sass_summary(sass_text) if sass_text else None
    if sass_text:
        artifacts["sass"] = sass_text
    if not spills:
        record["notes"].append("ptxas -v log unavailable: spill bytes unknown (see sass.local_stores)")
        record["degraded"] = True
    instructions = ptx_instruction_mix(outcome.asm.get("ptx", ""))
    occupancy = theoretical_occupancy(
        limits,
        threads_per_block=launch.num_warps * limits.warp_size,
        registers_per_thread=resources.registers,
        # the calculator adds the 1 KB reservation itself
        shared_bytes_per_block=shared - resources.reserved_shared_in_static,
    )
    if occupancy.note:
        record["notes"].append(occupancy.note)
    ptx_tensor_core = instructions["mma"] + instructions["wgmma"] + instructions["tcgen05_mma"]
    record.update(
        {
            "num_warps": int(outcome.metadata.get("num_warps", launch.num_warps)),
            "num_stages": int(outcome.metadata.get("num_stages", launch.num_stages)),
            "registers": resources.registers,
            "spill_stores": spills.get("spill_stores"),
            "spill_loads": spills.get("spill_loads"),
            "spill_bytes": spills.get("spill_stores"),
            "local_bytes": resources.local_bytes,
            "static_shared_bytes": resources.static_shared_bytes,
            "reserved_shared_bytes": resources.reserved_shared_in_static,
            "dynamic_shared_bytes": dynamic_shared,
            "shared_bytes": shared,
            "binary_bytes": resources.binary_bytes,
            "code_bytes": resources.code_bytes,
            "occupancy": round(occupancy.occupancy, 4),
            "blocks_per_sm": occupancy.blocks_per_sm,
            "active_warps": occupancy.active_warps,
            "limiter": occupancy.limiter,
            "instructions": instructions,
            "sass_instructions": sass["total"] if sass else None,
            "tensor_core_instructions": sass["tensor_core"] if sass else ptx_tensor_core,
            "sass": {key: value for key, value in sass.items() if key != "opcodes"} if sass else None,
            "ttir": ttir_summary(outcome.asm.get("ttir", "")),
            "ttgir": ttgir_summary(outcome.asm.get("ttgir", "")),
        }
    )
    return record, artifacts


def _with_live_fields(record: dict, launch: KernelLaunch) -> dict:
    """Add what only this process knows: the registers/spills of the kernel loaded on the GPU."""
    record = dict(record)
    compiled = launch.compiled
    if compiled is not None and record.get("error") is None:
        target = getattr(compiled.metadata, "target", None)
        if target is not None and ARCH_LIMITS[record["arch"]].capability == getattr(target, "arch", None):
            for field, attribute in (("loaded_registers", "n_regs"), ("loaded_spills", "n_spills")):
                value = getattr(compiled, attribute, None)
                if isinstance(value, int):
                    record[field] = value
    return record


class _LazyArtifacts(dict):
    """The IR files of a cache entry, read only when a dump asks for them."""

    def __init__(self, entry: Path) -> None:
        super().__init__()
        self.entry = entry

    def files(self) -> dict[str, Path]:
        return {
            ext: self.entry / f"kernel.{ext}" for ext in _ARTIFACT_FILES if (self.entry / f"kernel.{ext}").is_file()
        }


def _write_atomic(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    files.write_atomic(path, data)


def _as_bytes(content) -> bytes:
    return content if isinstance(content, bytes) else str(content).encode()


def _store(entry: Path, record: dict, artifacts: dict) -> None:
    try:
        for ext, content in artifacts.items():
            if content is not None:
                _write_atomic(entry / f"kernel.{ext}", _as_bytes(content))
        # record.json last: its presence means the entry is complete.
        _write_atomic(entry / "record.json", json.dumps(record, sort_keys=True, indent=2).encode())
    except OSError:
        pass  # a read-only or full cache only costs the next run a recompile


def dump_paths(dump_dir: Path, record: dict) -> dict[str, Path]:
    """Where the dump puts each level: <dir>/<kernel>/<kernel>-<spec id>-<arch>.<ext>."""
    stem = f"{record['name']}-{record['spec_id']}-{record['arch']}"
    folder = Path(dump_dir) / record["name"]
    return {ext: folder / f"{stem}.{ext}" for ext in (*_ARTIFACT_FILES, "json")}


def _dump(dump_dir: Path, launch: KernelLaunch, record: dict, artifacts: dict) -> None:
    paths = dump_paths(dump_dir, record)
    if isinstance(artifacts, _LazyArtifacts):
        for ext, source in artifacts.files().items():
            _write_atomic(paths[ext], source.read_bytes())
    else:
        for ext, content in artifacts.items():
            if content is not None:
                _write_atomic(paths[ext], _as_bytes(content))
    _write_atomic(paths["json"], json.dumps(record, sort_keys=True, indent=2, default=str).encode())


__all__ = ["ANALYSER_VERSION", "STAGES", "analyse_launches", "dump_paths", "spec_id"]
