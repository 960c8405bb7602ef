"""Resource usage read straight from a cubin's ELF, and the NVIDIA tools' views of it.

Primary source: the cubin itself. Per kernel, ptxas writes
- `.nv.info` attributes (format: 1-byte format, 1-byte attribute, 2-byte value or size, then
  the payload for EIFMT_SVAL): EIATTR_REGCOUNT (registers per thread), EIATTR_FRAME_SIZE
  (per-thread local memory frame, where spills live), EIATTR_MIN/MAX_STACK_SIZE;
- `.nv.shared.<kernel>`: static shared memory (a NOBITS section; its size is the usage);
- `.text.<kernel>`: the SASS, whose size is the code size.
`cuobjdump -res-usage` prints the same figures (REG, SHARED, LOCAL, STACK); tests cross-check.
Spill stores/loads are not in the ELF: they come from ptxas's `-v` log.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

EIFMT_SVAL = 0x04
EIATTR_FRAME_SIZE = 0x11
EIATTR_MIN_STACK_SIZE = 0x12
EIATTR_MAX_STACK_SIZE = 0x23
EIATTR_REGCOUNT = 0x2F


@dataclass(frozen=True)
class CubinResources:
    registers: int
    static_shared_bytes: int
    local_bytes: int  # per-thread frame (spills and local arrays)
    stack_bytes: int
    code_bytes: int
    binary_bytes: int
    # sm_90+ cubins lay out the system's 1 KB per-block reservation inside the kernel's own
    # .nv.shared section (symbol __nv_reservedSMEM_*); it is part of static_shared_bytes.
    reserved_shared_in_static: int = 0


class CubinFormatError(ValueError):
    pass


def _sections(blob: bytes) -> dict[str, tuple[int, int, int, int]]:
    """name -> (type, offset, size, link) of every section of an ELF64 little-endian file."""
    if blob[:4] != b"\x7fELF" or blob[4] != 2 or blob[5] != 1:
        raise CubinFormatError("not a 64-bit little-endian ELF file (is this a cubin?)")
    shoff = struct.unpack_from("<Q", blob, 0x28)[0]
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", blob, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", blob, shoff + i * shentsize) for i in range(shnum)]
    names_offset = headers[shstrndx][4]

    def name_at(offset: int) -> str:
        end = blob.index(b"\0", names_offset + offset)
        return blob[names_offset + offset : end].decode()

    return {name_at(h[0]): (h[1], h[4], h[5], h[6]) for h in headers}


def _symbol_names(blob: bytes, sections) -> list[str]:
    if ".symtab" not in sections or ".strtab" not in sections:
        raise CubinFormatError("the cubin has no symbol table")
    _, offset, size, _ = sections[".symtab"]
    strtab_offset = sections[".strtab"][1]
    names = []
    for index in range(size // 24):  # Elf64_Sym is 24 bytes; st_name comes first
        st_name = struct.unpack_from("<I", blob, offset + index * 24)[0]
        end = blob.index(b"\0", strtab_offset + st_name)
        names.append(blob[strtab_offset + st_name : end].decode())
    return names


def _nv_info_attributes(blob: bytes, offset: int, size: int):
    """Yield (attribute, payload bytes) for the EIFMT_SVAL entries of a .nv.info section."""
    position, end = offset, offset + size
    while position + 4 <= end:
        fmt, attribute, value = struct.unpack_from("<BBH", blob, position)
        position += 4
        if fmt == EIFMT_SVAL:
            yield attribute, blob[position : position + value]
            position += value


def read_resources(blob: bytes, kernel_name: str) -> CubinResources:
    sections = _sections(blob)
    symbols = _symbol_names(blob, sections)
    found: dict[int, int] = {}
    for section_name in (".nv.info", f".nv.info.{kernel_name}"):
        if section_name not in sections:
            continue
        _, offset, size, _ = sections[section_name]
        for attribute, payload in _nv_info_attributes(blob, offset, size):
            if (
                attribute in (EIATTR_REGCOUNT, EIATTR_FRAME_SIZE, EIATTR_MIN_STACK_SIZE, EIATTR_MAX_STACK_SIZE)
                and len(payload) >= 8
            ):
                symbol, value = struct.unpack_from("<II", payload)
                if symbol < len(symbols) and symbols[symbol] == kernel_name:
                    found[attribute] = value
    if EIATTR_REGCOUNT not in found:
        raise CubinFormatError(f"no register count for kernel {kernel_name!r} in the cubin's .nv.info")
    shared = sections.get(f".nv.shared.{kernel_name}")
    text = sections.get(f".text.{kernel_name}")
    static_shared = shared[2] if shared else 0
    has_reservation = any(name.startswith(("__nv_reservedSMEM", ".nv.reservedSmem")) for name in symbols)
    return CubinResources(
        registers=found[EIATTR_REGCOUNT],
        static_shared_bytes=static_shared,
        local_bytes=found.get(EIATTR_FRAME_SIZE, 0),
        stack_bytes=max(found.get(EIATTR_MIN_STACK_SIZE, 0), found.get(EIATTR_MAX_STACK_SIZE, 0)),
        code_bytes=text[2] if text else 0,
        binary_bytes=len(blob),
        reserved_shared_in_static=min(static_shared, 1024) if has_reservation else 0,
    )


_RES_USAGE_LINE = re.compile(r"Function\s+(\S+):\s*\n\s*(.*)")


def parse_res_usage(text: str) -> dict[str, dict[str, int]]:
    """`cuobjdump -res-usage` output -> {kernel: {"REG": .., "SHARED": .., "LOCAL": .., ...}}."""
    usage = {}
    for match in _RES_USAGE_LINE.finditer(text):
        fields = dict(re.findall(r"([A-Z]+(?:\[\d+\])?):(\d+)", match.group(2)))
        usage[match.group(1)] = {key: int(value) for key, value in fields.items()}
    return usage


_PTXAS_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_PTXAS_REGISTERS = re.compile(r"Used (\d+) registers")


def parse_ptxas_log(text: str) -> dict[str, int]:
    """ptxas -v log -> {"spill_stores", "spill_loads", "registers"} where present."""
    figures = {}
    if match := _PTXAS_SPILLS.search(text):
        figures["spill_stores"], figures["spill_loads"] = int(match.group(1)), int(match.group(2))
    if match := _PTXAS_REGISTERS.search(text):
        figures["registers"] = int(match.group(1))
    return figures
