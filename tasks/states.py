"""Completed states that carry a turn's outcome, so the Prefect UI shows what happened, not only "Completed".

A task returns `outcome(name, message, value)`: Prefect records the run as Completed under that name (e.g.
COMPILE_ERROR, NOT_EVALUATED, PASSED) with the message, and the caller still receives `value`. Failures that
should be retried are raised as before: a returned Completed state never triggers a retry.
"""

from __future__ import annotations

from typing import TypeVar

from prefect.states import Completed, State

from ptxcore.schema import RecordedVerdict

T = TypeVar("T")
MESSAGE_CHARS = 300
"""Longest state message (Prefect shows it in the run list; the full text lives in the records)."""


def outcome(name: str, message: str, value: T) -> State[T]:
    """A Completed state named `name` whose result is `value`."""
    text = " ".join(message.split())
    return Completed(name=name, message=text[:MESSAGE_CHARS], data=value)


RECORDED_SUFFIX = " (recorded)"
"""Appended to a state's name when the verdict it names was reused from a recorded judgement."""


def verdict_outcome(status: str, recorded: RecordedVerdict | None, message: str, value: T) -> State[T]:
    """A Completed state named by a verdict; a reused verdict says so in the name and whose it was in the message."""
    if recorded is None:
        return outcome(status, message, value)
    return outcome(status + RECORDED_SUFFIX, f"recorded on {recorded.label}, not measured in this run: {message}", value)


def value(returned: T | State[T]) -> T:
    """What a task call (or its `.fn`) produced: the result of an `outcome` state, or the value itself."""
    if isinstance(returned, State):
        return returned.result(_sync=True)  # type: ignore[call-overload]
    return returned
