"""exception_line: the line of an error text that says what went wrong (a traceback's own exception line)."""

from __future__ import annotations

import traceback

from ptxcore.schema import exception_line


def _traceback_of(exc: BaseException) -> str:
    try:
        raise exc
    except BaseException:  # noqa: BLE001
        return traceback.format_exc()


def test_a_traceback_gives_its_exception_line_not_its_header():
    text = _traceback_of(RuntimeError("cuTensorMapEncodeTiled failed with code 1"))
    assert text.splitlines()[0] == "Traceback (most recent call last):"
    assert exception_line(text) == "RuntimeError: cuTensorMapEncodeTiled failed with code 1"


def test_a_chained_traceback_gives_the_last_exception():
    try:
        try:
            raise KeyError("inner")
        except KeyError as exc:
            raise ValueError("outer") from exc
    except ValueError:
        text = traceback.format_exc()
    assert "The above exception was the direct cause" in text
    assert exception_line(text) == "ValueError: outer"


def test_an_exception_whose_message_carries_a_traceback():
    text = "RuntimeError: Traceback (most recent call last):\n  File \"x.cu\", line 3, in run\nTVMError: launch failed"
    assert exception_line(text) == "TVMError: launch failed"


def test_other_text_gives_its_first_line_and_is_bounded():
    assert exception_line("\n\n  kernel launch: invalid argument\nmore") == "  kernel launch: invalid argument"
    assert exception_line("") == ""
    assert len(exception_line("x" * 10_000)) == 500
    header_only = "Traceback (most recent call last):\n"
    assert exception_line(header_only) == "Traceback (most recent call last):"  # nothing better to say
