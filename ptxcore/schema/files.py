"""Files a user named: read bounded and by name, walked without following links, written without writing through one.

Every YAML, JSON, JSONL and source file the command line reads goes through `read_text`: the size is checked on
the open descriptor before anything is read (and never more than the limit is read, whatever the file claims),
a FIFO or device is refused instead of blocking, and every error is one line naming the file, never quoting it.
`regular_files` walks a dataset folder and refuses a symbolic link anywhere below it (the link's target is never
named); `write_tree` writes a dataset folder below `--out` through directory descriptors opened without
following links, and replaces each file by rename, so a planted link or hard link is never written through.
Pure stdlib (imports nothing of ours).
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from collections.abc import Mapping
from pathlib import Path, PurePosixPath

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class InputFileError(ValueError):
    """A user-named file that cannot be used as given; the message is one line naming it."""


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "is a symbolic link (refused)"
    return f"cannot read: {exc.strerror or type(exc).__name__}"


def read_bytes(path: Path | str, max_bytes: int, *, follow_symlinks: bool = True) -> bytes:
    """At most `max_bytes` of a regular file (InputFileError naming it when larger, not regular, or unreadable)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow_symlinks else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise InputFileError(f"no such file: {path}") from None
    except OSError as exc:
        raise InputFileError(f"{path}: {_reason(exc)}") from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise InputFileError(f"{path}: is a directory, expected a file")
        if not stat.S_ISREG(info.st_mode):
            raise InputFileError(f"{path}: not a regular file (a FIFO, socket or device is refused)")
        if info.st_size > max_bytes:
            raise InputFileError(f"{path}: larger than {max_bytes} bytes ({info.st_size})")
        chunks, left = [], max_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise InputFileError(f"{path}: {_reason(exc)}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > max_bytes:  # it grew after the check
        raise InputFileError(f"{path}: larger than {max_bytes} bytes")
    return data


def read_text(path: Path | str, max_bytes: int, *, follow_symlinks: bool = True) -> str:
    """A UTF-8 text file of at most `max_bytes` (InputFileError naming the file otherwise)."""
    data = read_bytes(path, max_bytes, follow_symlinks=follow_symlinks)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputFileError(f"{path}: not UTF-8 text (byte {exc.start})") from None


def regular_files(root: Path, suffix: str) -> list[Path]:
    """Regular files ending in `suffix` below `root` (sorted). A symbolic link anywhere below `root`, or a path
    that resolves outside it, is refused (InputFileError naming the path inside the folder, never its target)."""
    root = Path(root)
    real_root = root.resolve()
    out = []
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        for name in sorted(dirnames) + sorted(filenames):
            path = Path(dirpath) / name
            if path.is_symlink():
                raise InputFileError(f"{path}: is a symbolic link (refused: a dataset folder is read without "
                                     "following links)")
            if not path.resolve().is_relative_to(real_root):
                raise InputFileError(f"{path}: resolves outside {root} (refused)")
        for name in filenames:
            path = Path(dirpath) / name
            if name.endswith(suffix) and stat.S_ISREG(path.lstat().st_mode):
                out.append(path)
    return sorted(out)


def _open_dir(parent_fd: int, name: str, where: Path, create: bool) -> int:
    if create:
        try:
            os.mkdir(name, 0o755, dir_fd=parent_fd)
        except FileExistsError:
            pass
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InputFileError(f"{where}: a symbolic link or not a directory (refused: nothing is written "
                                 "through a link)") from None
        raise InputFileError(f"{where}: cannot create: {exc.strerror}") from None


def _check_name(dir_fd: int, name: str, where: Path) -> None:
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        raise InputFileError(f"{where}: is a symbolic link (refused: nothing is written through a link)")
    if not stat.S_ISREG(info.st_mode):
        raise InputFileError(f"{where}: exists and is not a regular file (refused)")


def _walk(root_fd: int, out: Path, rel: PurePosixPath, create: bool) -> int:
    """A descriptor of the directory holding `rel`, every component opened without following links."""
    fd = os.dup(root_fd)
    where = out
    for part in rel.parts[:-1]:
        where = where / part
        try:
            nfd = _open_dir(fd, part, where, create)
        finally:
            os.close(fd)
        fd = nfd
    return fd


def _replace(dir_fd: int, name: str, data: bytes, where: Path) -> None:
    tmp = f".{name}.{secrets.token_hex(4)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        _check_name(dir_fd, name, where)
        os.replace(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(tmp, dir_fd=dir_fd)
        except OSError:
            pass
        raise


def _relative(rel: str) -> PurePosixPath:
    path = PurePosixPath(rel)
    if path.is_absolute() or not path.parts or any(p in ("", ".", "..") for p in path.parts):
        raise InputFileError(f"{rel!r}: not a plain relative path")
    return path


def _open_out(out: Path) -> int:
    if out.is_symlink():
        raise InputFileError(f"{out}: is a symbolic link (refused: --out must be a real folder)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        return os.open(out, _DIR_FLAGS)
    except OSError as exc:
        raise InputFileError(f"{out}: cannot create the folder: {exc.strerror}") from None


def write_tree(out: Path, files: Mapping[str, bytes]) -> None:
    """Write `files` (relative POSIX path -> bytes) below `out`. Every path is checked before the first write: a
    symbolic link (or a non-directory) on the way, or a link or special file where a file goes, is refused with
    one line naming it. Each file is written to a fresh temporary name and renamed into place, so a planted hard
    link is replaced, never written through."""
    out = Path(out)
    plan = [(_relative(rel), data) for rel, data in files.items()]
    root_fd = _open_out(out)
    try:
        for rel, _data in plan:  # check everything first: nothing half-written
            _check_existing(root_fd, out, rel)
        for rel, data in plan:
            fd = _walk(root_fd, out, rel, create=True)
            try:
                _replace(fd, rel.name, data, out / rel)
            finally:
                os.close(fd)
    finally:
        os.close(root_fd)


def _check_existing(root_fd: int, out: Path, rel: PurePosixPath) -> None:
    """Check the part of `rel` below `out` that exists already (a link or special file on it is refused)."""
    fd = os.dup(root_fd)
    where = out
    try:
        for part in rel.parts[:-1]:
            where = where / part
            try:
                info = os.stat(part, dir_fd=fd, follow_symlinks=False)
            except FileNotFoundError:
                return
            if not stat.S_ISDIR(info.st_mode):
                raise InputFileError(f"{where}: a symbolic link or not a directory (refused: nothing is written "
                                     "through a link)")
            nfd = _open_dir(fd, part, where, create=False)
            os.close(fd)
            fd = nfd
        _check_name(fd, rel.name, out / rel)
    finally:
        os.close(fd)
