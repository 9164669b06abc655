"""What a built candidate imports from the process that loads it: the undefined dynamic symbols of its ELF.

A candidate runs inside the judge's child, a Python process that also holds the timing harness (CUPTI). Host
code that calls into the Python C API (PyRun_SimpleString, PyImport_*, ...) or into CUPTI can rewrite that
harness from inside; no kernel needs either. Such a build is REJECTED with the first symbol named. (Static
cudart itself imports dlopen, dlsym, socket calls and the like, so those cannot be told apart this way; the
sandbox is what stops them.) Pure stdlib: a minimal ELF64 .dynsym reader.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

FORBIDDEN_IMPORTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"_?Py[A-Z_]\w*"), "the Python C API"),
    (re.compile(r"cupti\w*"), "CUPTI"),
)
SHT_DYNSYM = 11
SHN_UNDEF = 0


class ElfReadError(ValueError):
    """Not a readable ELF64 little-endian object."""


def undefined_symbols(path: Path) -> list[str]:
    """Names of the undefined symbols in .dynsym (what the object needs from whoever loads it)."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or len(data) < 64 or data[4] != 2 or data[5] != 1:
        raise ElfReadError(f"{Path(path).name}: not an ELF64 little-endian object")
    try:
        shoff, = struct.unpack_from("<Q", data, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
        out = []
        for sec in sections:
            if sec[1] != SHT_DYNSYM:
                continue
            _, _, _, _, off, size, link, _, _, entsize = sec
            str_off = sections[link][4]
            for i in range(size // (entsize or 24)):
                name, _info, _other, shndx = struct.unpack_from("<IBBH", data, off + i * (entsize or 24))
                if shndx == SHN_UNDEF and name:
                    end = data.index(b"\0", str_off + name)
                    out.append(data[str_off + name:end].decode(errors="replace"))
        return out
    except (struct.error, IndexError, ValueError) as exc:
        raise ElfReadError(f"{Path(path).name}: malformed ELF ({exc})") from exc


def forbidden_import(path: Path) -> str | None:
    """One line naming the first forbidden import of the object, or None."""
    for symbol in undefined_symbols(path):
        base = symbol.split("@", 1)[0]
        for pattern, what in FORBIDDEN_IMPORTS:
            if pattern.fullmatch(base):
                return (f"the host code imports {what} ({base}): a candidate may not reach into the interpreter "
                        "or the profiler of the process that judges it")
    return None
