"""Completed states that carry a turn's outcome, so the Prefect UI shows what happened, not only "Completed".

A task returns `outcome(name, message, value)`: Prefect records the run as Completed under that name (e.g.
COMPILE_ERROR, NOT_EVALUATED, PASSED) with the message, and the caller still receives `value`. Failures that
should be retried are raised as before: a returned Completed state never triggers a retry.
"""

from __future__ import annotations

from typing import TypeVar

from prefect.states import Completed, State

T = TypeVar("T")
MESSAGE_CHARS = 300
"""Longest state message (Prefect shows it in the run list; the full text lives in the records)."""


def outcome(name: str, message: str, value: T) -> State[T]:
    """A Completed state named `name` whose result is `value`."""
    text = " ".join(message.split())
    return Completed(name=name, message=text[:MESSAGE_CHARS], data=value)


def value(returned: T | State[T]) -> T:
    """What a task call (or its `.fn`) produced: the result of an `outcome` state, or the value itself."""
    if isinstance(returned, State):
        return returned.result(_sync=True)  # type: ignore[call-overload]
    return returned
