"""A tool run started before its candidate, as the memcheck and ncu stages take it (harness.prestart makes them):
a function of the run's deadline that gives the run's outcome, or raises PrestartLost when the run no longer
waited. Kept apart so that the stages and the prestarter do not import each other."""

from __future__ import annotations

import logging
from collections.abc import Callable

from ptxcore.sandbox import SandboxOutcome

log = logging.getLogger(__name__)

Prestarted = Callable[[float], SandboxOutcome]
"""A tool run started before its candidate, given its deadline: the run's outcome."""


class PrestartLost(RuntimeError):
    """The waiting run ended before its request: the caller runs the tool afresh."""


def on_prestarted(prestarted: Prestarted | None, timeout_s: float) -> SandboxOutcome | None:
    """The run's outcome on its prestarted process; None when there is none or it no longer waited (the caller
    then runs the tool afresh)."""
    if prestarted is None:
        return None
    try:
        return prestarted(timeout_s)
    except PrestartLost as exc:
        log.warning("%s: running it afresh", exc)
        return None
