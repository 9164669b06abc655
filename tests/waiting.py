"""wait_for: wait on the event a test needs, instead of sleeping for a time that guesses it has happened.

    wait_for(lambda: marker.exists(), 20, "the worker's candidate phase")

Polls `predicate` until it is true (returns) or `timeout_s` passes (AssertionError naming `what`). Use it for
"it has started" as well as for "it is gone": a negative assertion after a grace period is the same wait with
the condition turned round, and fails just as clearly when the thing never goes.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def wait_for(predicate: Callable[[], bool], timeout_s: float = 20.0, what: str = "condition",
             interval_s: float = 0.05) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        if predicate():
            return
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")
        time.sleep(interval_s)
