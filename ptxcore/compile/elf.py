"""A minimal ELF64 little-endian section reader (stdlib only): enough for the import check (ptxcore.compile.symbols)
and for splitting a built object's fatbinary section (ptxcore.compile.fatbin). Not a general ELF library: the
objects read are the ones nvcc just built, and anything malformed is an ElfReadError."""

from __future__ import annotations

import struct
from dataclasses import dataclass


class ElfReadError(ValueError):
    """Not a readable ELF64 little-endian object."""


@dataclass(frozen=True)
class Section:
    """One section header: its name (from .shstrtab), type, file offset, size, link and entry size."""

    name: str
    type: int
    offset: int
    size: int
    link: int
    entsize: int

    def __post_init__(self) -> None:
        if self.offset < 0 or self.size < 0:
            raise ValueError("a section has a non-negative offset and size")


def _cstring(data: bytes, start: int) -> str:
    return data[start:data.index(b"\0", start)].decode(errors="replace")


def sections(data: bytes, label: str = "object") -> list[Section]:
    """Every section header of the ELF64 little-endian image `data`, in header order; `label` names it in errors."""
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise ElfReadError(f"{label}: not an ELF64 little-endian object")
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
        raw = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        names_at = raw[shstrndx][4] if shstrndx < len(raw) else None
        out = []
        for name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in raw:
            text = _cstring(data, names_at + name) if names_at is not None else ""
            out.append(Section(text, kind, offset, size, link, entsize))
        return out
    except (struct.error, IndexError, ValueError) as exc:
        raise ElfReadError(f"{label}: malformed ELF ({exc})") from exc


def section_bytes(data: bytes, section: Section, label: str = "object") -> bytes:
    """The file bytes of `section` (a NOBITS section has none)."""
    if section.type == SHT_NOBITS:
        return b""
    end = section.offset + section.size
    if end > len(data):
        raise ElfReadError(f"{label}: section {section.name or '?'} runs past the end of the file")
    return data[section.offset:end]


SHT_DYNSYM = 11
SHT_NOBITS = 8
