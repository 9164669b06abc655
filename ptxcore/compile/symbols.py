"""What a built candidate imports from the process that loads it: the undefined dynamic symbols of its ELF.

A candidate runs inside the judge's child, a Python process that also holds the timing harness (CUPTI). Host
code that calls into the Python C API (PyRun_SimpleString, PyImport_*, ...) or into CUPTI can rewrite that
harness from inside; no kernel needs either. Such a build is REJECTED with the first symbol named. (Static
cudart itself imports dlopen, dlsym, socket calls and the like, so those cannot be told apart this way; the
sandbox is what stops them.) Pure stdlib: .dynsym through the minimal ELF64 reader of ptxcore.compile.elf.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

from .elf import SHT_DYNSYM, ElfReadError, sections

FORBIDDEN_IMPORTS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"_?Py[A-Z_]\w*"), "the Python C API"),
    (re.compile(r"cupti\w*"), "CUPTI"),
)
SHN_UNDEF = 0


def undefined_symbols(path: Path) -> list[str]:
    """Names of the undefined symbols in .dynsym (what the object needs from whoever loads it)."""
    data = Path(path).read_bytes()
    label = Path(path).name
    try:
        table = sections(data, label)
        out = []
        for sec in table:
            if sec.type != SHT_DYNSYM:
                continue
            str_off = table[sec.link].offset
            for i in range(sec.size // (sec.entsize or 24)):
                name, _info, _other, shndx = struct.unpack_from("<IBBH", data, sec.offset + i * (sec.entsize or 24))
                if shndx == SHN_UNDEF and name:
                    end = data.index(b"\0", str_off + name)
                    out.append(data[str_off + name:end].decode(errors="replace"))
        return out
    except ElfReadError:
        raise
    except (struct.error, IndexError, ValueError) as exc:
        raise ElfReadError(f"{label}: malformed ELF ({exc})") from exc


def forbidden_import(path: Path) -> str | None:
    """One line naming the first forbidden import of the object, or None."""
    for symbol in undefined_symbols(path):
        base = symbol.split("@", 1)[0]
        for pattern, what in FORBIDDEN_IMPORTS:
            if pattern.fullmatch(base):
                return (f"the host code imports {what} ({base}): a candidate may not reach into the interpreter "
                        "or the profiler of the process that judges it")
    return None
