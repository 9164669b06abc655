"""One-line errors for the command line: the bad input named, non-zero exit, never a traceback."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn

import typer

if TYPE_CHECKING:
    from ptxcore.schema import Language


class UserError(Exception):
    """Bad input from the user; printed as one line."""


def fail(message: str, code: int = 2) -> NoReturn:
    typer.echo(f"error: {message}", err=True)
    raise typer.Exit(code)


def _expected_errors() -> tuple[type[BaseException], ...]:
    from ptxcore.arch import UnknownArchitectureError
    from ptxcore.problems import CatalogError, ProblemNotFoundError
    from ptxcore.sandbox import SandboxUnavailableError
    from ptxcore.sass import ToolNotFoundError

    return (
        UserError, UnknownArchitectureError, ProblemNotFoundError, CatalogError, ToolNotFoundError,
        SandboxUnavailableError, FileNotFoundError, PermissionError, IsADirectoryError, UnicodeDecodeError,
    )


def one_line_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Decorator for commands: expected errors become one stderr line and exit code 2."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except typer.Exit:
            raise
        except _expected_errors() as exc:
            text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if isinstance(exc, OSError) and getattr(exc, "filename", None):
                text = f"cannot read {exc.filename}: {exc.strerror}"
            fail(text)
        except KeyboardInterrupt:
            typer.echo("interrupted", err=True)
            sys.exit(130)

    return wrapper


MAX_SOURCE_FILE_BYTES = 16 << 20
"""Largest kernel file read from the command line (the compile stage bounds what it builds far below this)."""


def read_text_file(path: str) -> str:
    """Read a user-supplied text file (size checked before reading) or raise a UserError naming it."""
    from ptxcore.schema.files import InputFileError, read_text

    try:
        return read_text(path, MAX_SOURCE_FILE_BYTES)
    except InputFileError as exc:
        raise UserError(str(exc)) from None


def kernel_language(value: str | None, kernel: str) -> Language:
    """--language, else the file suffix (.py: triton, else cuda), for every command that takes a kernel file;
    a language nothing judges is a user error."""
    from ptxcore.schema import JUDGED_LANGUAGES, Language

    if value is None:
        return Language.TRITON if kernel.endswith(".py") else Language.CUDA
    try:
        lang = Language(value.strip().lower())
    except ValueError:
        lang = None
    if lang not in JUDGED_LANGUAGES:
        raise UserError(f"--language {value!r}: one of {', '.join(sorted(x.value for x in JUDGED_LANGUAGES))}")
    return lang
