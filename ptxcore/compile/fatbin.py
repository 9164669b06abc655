"""The fatbinaries nvcc embedded in a built object, one by one, when the object holds them the plain way.

`cuobjdump --dump-sass` of a built object runs the disassembler once per device ELF, about 0.3 s each whatever its
size, and nvcc's object holds two: the kernel's fatbinary and the device link's (`kernel_dlink.fatbin`, the same
bytes for every candidate). Its output is the dumps of the fatbinaries of the `.nv_fatbin` section in section
order, so a fatbinary dumped ahead (from the keep folder while the host compile ran) or dumped before with the same
bytes gives the very same text (ptxcore.compile.devicecode).

`plain_fatbins` returns them only for the layout nvcc makes: one `.nv_fatbin` section, exactly covered by whole
fatbinaries at 8-byte boundaries (zero padding between them, less than 8 bytes), no other section whose name
speaks of fatbinaries or of nvcc's registration but `.nvFatBinSegment`, and the fatbinary magic nowhere else in
the file. Anything else (a candidate's own data in that section, a section of its own, a fatbinary hidden among
host data) is None, and the object is dumped whole, as before.
"""

from __future__ import annotations

import re
import struct

from .elf import ElfReadError, section_bytes, sections

FATBIN_MAGIC = 0xBA55ED50
_MAGIC_BYTES = struct.pack("<I", FATBIN_MAGIC)
_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of what follows the header
FATBIN_SECTION = ".nv_fatbin"
ALLOWED_NV_SECTIONS = frozenset({FATBIN_SECTION, ".nvFatBinSegment"})
_NV_NAME = re.compile(r"fat|nv|cuda|cubin", re.IGNORECASE)
ALIGN = 8


def split_fatbins(section: bytes) -> list[bytes] | None:
    """The whole fatbinaries that make up `section` exactly (8-byte aligned, zero padding), or None."""
    out: list[bytes] = []
    at = 0
    while at < len(section):
        if at % ALIGN or len(section) - at < _HEADER.size:
            return None
        magic, _version, header_size, size = _HEADER.unpack_from(section, at)
        end = at + header_size + size
        if magic != FATBIN_MAGIC or header_size < _HEADER.size or end > len(section):
            return None
        out.append(section[at:end])
        pad = (-end) % ALIGN
        if any(section[end:end + pad]):
            return None
        at = end + pad
    return out or None


def plain_fatbins(data: bytes, label: str = "object") -> list[bytes] | None:
    """The fatbinaries of the built object `data` in section order when its layout is nvcc's (module docstring),
    else None; a file that is no readable ELF is None too (the whole-object dump then reports it)."""
    try:
        table = sections(data, label)
        nv = [s for s in table if _NV_NAME.search(s.name)]
        if {s.name for s in nv} - ALLOWED_NV_SECTIONS or len(nv) != len({s.name for s in nv}):
            return None
        found = [s for s in nv if s.name == FATBIN_SECTION]
        if len(found) != 1:
            return None
        blobs = split_fatbins(section_bytes(data, found[0], label))
    except ElfReadError:
        return None
    if blobs is None or data.count(_MAGIC_BYTES) != sum(blob.count(_MAGIC_BYTES) for blob in blobs):
        return None
    return blobs
