"""What the preprocessor really opened, and whether a candidate may have opened it.

nvcc preprocesses a .cu twice with the host compiler (host pass -> <name>.cpp4.ii, device pass ->
<name>.cpp1.ii; `--keep` leaves both in the keep directory). gcc writes a line marker `# N "file" 1` each time
it enters a file, so the markers name every file that contributed text, however its name was spelled
(macros, digraphs, splices, CR line ends, `#include_next`, relative or absolute paths). A candidate can add
markers of its own (a GNU line directive) but cannot hide one, so extra names only ever reject. A line
directive names the presumed file of the lines after it, and gcc's diagnostics quote that file's lines (a
warning on a successful build is enough), so every file any marker names is judged and keyed, entered or not.
When a pass fails before it wrote its .ii (a missing header is fatal in gcc), its diagnostics name the file
it failed on and every file they quote from; every log is read for such locations, paths normalised first
(`/scratch/../etc/x` is /etc/x).
"""

from __future__ import annotations

import hashlib
import os
import posixpath
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from .forbidden import OUTSIDE_REASON, ForbiddenUse, escapes_headers, library_of_header
from .toolchain import SCRATCH, IncludeRoot

SOURCE_NAME = "kernel.cu"
PASS_FILES = ("kernel.cpp4.ii", "kernel.cpp1.ii")
_MARKER = re.compile(r'\n# \d+ "([^"\\\n]*(?:\\.[^"\\\n]*)*)"([ \d]*)(?=\n)')  # literal start: fast search
_MISSING = re.compile(r"^[^\n]*?:\d+(?::\d+)?: fatal error: ([^\n]*?): No such file or directory$", re.M)
_LOCATION = re.compile(r'^(?:In file included from |\s+from )?([^\s:()]*/[^\s:(]*?)(?::\d+|\(\d+\))', re.M)
_GENERATED = ("kernel.cudafe1.cpp", "kernel.cudafe1.stub.c")
"""cudafe++'s output, which nvcc's last gcc pass preprocesses and compiles."""
_INCLUDE_LINE = re.compile(r'^[^\S\n]*(?:#|%:)[^\S\n]*(?:include(?:_next)?|import|embed)\b[^\S\n]*([^\n]*)', re.M)
GENERATED_REASON = ("nvcc's generated host code would include a file it did not generate (outside the toolkit "
                    "and the build's own files)")
SPECIAL = ("<built-in>", "<command-line>", "<stdin>")


@dataclass(frozen=True)
class Dependency:
    """One file a build read: its include root, path relative to it, host path and content hash."""

    root: str
    relative: str
    path: str
    sha256: str


def _unescape(name: str) -> str:
    return re.sub(r"\\(.)", r"\1", name)


def named_files(text: str) -> set[str]:
    """Paths of every file a line marker of the text names: each file gcc entered (flag 1, and the main file)
    and every line directive's presumed file."""
    return {_unescape(m.group(1)) for m in _MARKER.finditer("\n" + text + "\n")}


def _real(path: str) -> str:
    path = posixpath.normpath(path) if os.path.isabs(path) else path
    if path == f"{SCRATCH}/{SOURCE_NAME}":
        return path
    if path == SCRATCH or path.startswith(SCRATCH + "/"):
        return "<scratch>"  # nvcc's own intermediates or a file the candidate cannot have placed
    return os.path.realpath(path) if os.path.isabs(path) else "<relative>"


def vendor_of(real: str, roots: tuple[IncludeRoot, ...]) -> str | None:
    """The forbidden library a real header path belongs to (its path under its root, or its name)."""
    for root in roots:
        rel = root.relative(real)
        if rel is not None:
            parts = rel.split("/")
            for i in range(len(parts)):
                library = library_of_header("/".join(parts[i:]))
                if library is not None:
                    return library
    return library_of_header(os.path.basename(real))


def check_entered(names: set[str], roots: tuple[IncludeRoot, ...]) -> str | None:
    """One-line rejection reason for the files a pass entered, or None when all are allowed."""
    vendor, outside = None, False
    for name in sorted(names):
        if name in SPECIAL:
            continue
        real = _real(name)
        if real == f"{SCRATCH}/{SOURCE_NAME}":
            continue
        if not any(root.relative(real) is not None for root in roots):
            outside = True
            continue
        vendor = vendor or vendor_of(real, roots)
    if vendor is not None:
        return ForbiddenUse(vendor, "its headers were included").message()
    return OUTSIDE_REASON if outside else None


def check_log(log: str, roots: tuple[IncludeRoot, ...]) -> str | None:
    """Rejection reason from a build's diagnostics (failed or not): a missing header that is a vendor header or
    an escaping name, or a diagnostic located in a file outside the allowed roots (a relative path with a
    directory, or an absolute one once normalised, outside the scratch)."""
    for name in _MISSING.findall(log):
        library = library_of_header(name) or library_of_header(name.rsplit("/", 1)[-1])
        if library is not None:
            return ForbiddenUse(library, f"#include <{name.strip()}>").message()
        if escapes_headers(name):
            return OUTSIDE_REASON
    for path in _LOCATION.findall(log):
        if not path.startswith("/"):
            return OUTSIDE_REASON
        path = posixpath.normpath(path)
        if path.startswith(SCRATCH + "/"):
            continue
        real = os.path.realpath(path)
        if not any(root.relative(real) is not None for root in roots):
            return OUTSIDE_REASON
        library = vendor_of(real, roots)
        if library is not None:
            return ForbiddenUse(library, "its headers were included").message()
    return None


def _sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def dependencies(names: set[str], roots: tuple[IncludeRoot, ...]) -> list[Dependency]:
    """Content hashes of the allowed files a build entered (the source itself is keyed separately)."""
    deps: dict[str, Dependency] = {}
    for name in names:
        if name in SPECIAL or not os.path.isabs(name) or posixpath.normpath(name).startswith(SCRATCH + "/"):
            continue
        real = os.path.realpath(name)
        for root in roots:
            rel = root.relative(real)
            if rel is not None and os.path.isfile(real):
                deps[real] = Dependency(root.label, rel, real, _sha256_file(real))
                break
    return sorted(deps.values(), key=lambda d: (d.root, d.relative))


def dependency_digest(deps: list[Dependency]) -> str:
    """Machine-independent digest of a dependency list (root labels and relative paths, not host paths)."""
    h = hashlib.sha256()
    for d in deps:
        h.update(f"{d.root}\0{d.relative}\0{d.sha256}\n".encode())
    return h.hexdigest()


def dependencies_current(deps: list[Dependency]) -> bool:
    """Every recorded dependency still has the recorded content on this machine."""
    try:
        return all(_sha256_file(d.path) == d.sha256 for d in deps)
    except OSError:
        return False


def read_regular(path: Path, max_chars: int) -> tuple[str | None, bool]:
    """(text, oversize) of a regular file, never following a link; (None, False) when there is none."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None, False
    with os.fdopen(fd, "rb") as fh:
        info = os.fstat(fh.fileno())
        if not stat.S_ISREG(info.st_mode):
            return None, False
        if info.st_size > max_chars:
            return None, True
        return fh.read(max_chars + 1).decode("utf-8", errors="replace"), False


def read_passes(keep_dir: Path, max_chars: int) -> tuple[dict[str, str], bool]:
    """The preprocessed text of each pass that completed (regular files only, never following links), and
    whether any pass was larger than `max_chars` (then not read)."""
    out: dict[str, str] = {}
    oversize = False
    for name in PASS_FILES:
        text, too_big = read_regular(keep_dir / name, max_chars)
        oversize |= too_big
        if text is not None:
            out[name] = text
    return out, oversize


_OWN_OUTPUT = re.compile(r"kernel\.[A-Za-z0-9_.]+")
"""A file name of nvcc's own outputs in the keep folder (kernel.fatbin.c, kernel.cudafe1.stub.c, ...)."""


def _generated_include_ok(name: str, keep_dir: Path, roots: tuple[IncludeRoot, ...], failed: bool) -> bool:
    m = re.fullmatch(r'"([^"\n]+)"|<([^>\n]+)>', name.strip())
    header = m and (m.group(1) or m.group(2))
    if not header or escapes_headers(header) or "\\" in header:
        return False
    if failed and _OWN_OUTPUT.fullmatch(header):
        return True  # an output nvcc had not yet written when the build failed (kernel.fatbin.c after ptxas failed)
    return (keep_dir / header).is_file() or any(
        root.label == "cuda" and os.path.isfile(os.path.join(root.path, header)) for root in roots)


def check_generated(keep_dir: Path, roots: tuple[IncludeRoot, ...], max_chars: int, failed: bool = False) -> str | None:
    """GENERATED_REASON when cudafe++'s output (what the last gcc pass reads) includes anything but a toolkit
    header or one of the build's own files, or cannot be read whole; None otherwise. `failed`: the build failed,
    so a file nvcc would have generated later (a bare `kernel.*` name) may be missing."""
    for name in _GENERATED:
        text, oversize = read_regular(keep_dir / name, max_chars)
        if oversize:
            return GENERATED_REASON
        for include in _INCLUDE_LINE.findall(text or ""):
            if not _generated_include_ok(include, keep_dir, roots, failed):
                return GENERATED_REASON
    return None
