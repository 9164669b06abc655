"""Library-use checks: the shared object's DT_NEEDED entries and the libraries mapped into the child.

A candidate that links or dlopens cuBLAS / cuBLASLt / cuDNN / FlashInfer (or PyTorch's CUDA library,
which dispatches to them) is REJECTED. Pure stdlib: a minimal ELF64 reader.
"""

from __future__ import annotations

import re
import struct
from pathlib import Path

FORBIDDEN_LIBRARIES: tuple[tuple[str, str], ...] = (
    (r"libcublas(?!Lt)[^/]*\.so[^/]*", "cuBLAS"),
    (r"libcublasLt[^/]*\.so[^/]*", "cuBLASLt"),
    (r"libcudnn[^/]*\.so[^/]*", "cuDNN"),
    (r"[^/]*flashinfer[^/]*\.so[^/]*", "FlashInfer"),
    (r"libtorch_cuda[^/]*\.so[^/]*", "PyTorch CUDA (dispatches to cuBLAS/cuDNN)"),
)


class ElfError(ValueError):
    """Not a readable ELF64 little-endian shared object."""


def needed_libraries(path: Path) -> list[str]:
    """DT_NEEDED names of an ELF64 little-endian object."""
    data = Path(path).read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise ElfError(f"{path}: not an ELF64 little-endian file")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", data, 0x3A)
    sections = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    dynamic = [s for s in sections if s[1] == 6]  # SHT_DYNAMIC
    if not dynamic:
        return []
    _, _, _, _, off, size, link, _, _, entsize = dynamic[0]
    strtab = sections[link]
    str_off = strtab[4]
    names = []
    for i in range(size // (entsize or 16)):
        tag, val = struct.unpack_from("<qQ", data, off + i * (entsize or 16))
        if tag == 0:
            break
        if tag == 1:  # DT_NEEDED
            end = data.index(b"\0", str_off + val)
            names.append(data[str_off + val : end].decode())
    return names


def parse_maps(text: str) -> list[str]:
    """Unique file paths of shared objects in /proc/PID/maps text, in first-seen order."""
    seen: dict[str, None] = {}
    for line in text.splitlines():
        parts = line.split(None, 5)
        if len(parts) == 6 and parts[5].startswith("/") and ".so" in parts[5]:
            seen.setdefault(parts[5].strip(), None)
    return list(seen)


def forbidden_library(names: list[str]) -> tuple[str, str] | None:
    """(library family, name) of the first forbidden library among `names` (paths or sonames)."""
    bases = [n.rsplit("/", 1)[-1] for n in names]
    for pattern, family in FORBIDDEN_LIBRARIES:
        for base in bases:
            if re.fullmatch(pattern, base):
                return family, base
    return None
