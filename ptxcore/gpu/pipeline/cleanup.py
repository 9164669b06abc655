"""A session's close after its verdict (issue 27, JudgeConfig.defer_session_close).

Ending a TVM-FFI candidate's session (its child's exit and the CUDA context's teardown, the device meter's close,
the shared buffers' release) took 0.15-0.25 s on the H200, all of it after the last measurement. With the option
on, the judge hands that close to one background thread and returns the verdict; the close must have ended before
the judge's next GPU work: the next judgement waits for it once its build is done (stage `close_wait`), as do a
reference's timing, the judge's warm-up and its own close. So nothing of a closing session is on the GPU while
another candidate's correctness, tools or timing run, and the meter is closed before it is opened again. A close
that failed makes the next GPU work INFRA_ERROR (its processes may still hold the GPU), never a silent pass.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from ptxcore.gpu.errors import InfraError

log = logging.getLogger(__name__)


class DeferredClose:
    """At most one close running at a time, on its own thread; `wait` before anything else uses the GPU."""

    def __init__(self) -> None:
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._lock = threading.Lock()

    def submit(self, close: Callable[[], None]) -> None:
        """Run `close` on a thread of its own (after any close still running has ended)."""
        with self._lock:
            self._join_locked()
            self._thread = threading.Thread(target=self._run, args=(close,), name="session-close", daemon=True)
            self._thread.start()

    def wait(self) -> float:
        """Seconds waited for the running close to end (0.0 when none ran). InfraError, once, when it failed."""
        with self._lock:
            t0 = time.monotonic()
            self._join_locked()
            waited = time.monotonic() - t0
            error, self._error = self._error, None
        if error is not None:
            raise InfraError(f"the previous session's close failed: {type(error).__name__}: {error}") from error
        return waited

    def pending(self) -> bool:
        """Whether a close is still running."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def _join_locked(self) -> None:
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self, close: Callable[[], None]) -> None:
        try:
            close()
        except BaseException as exc:  # noqa: BLE001 - kept for the next wait, which fails the next GPU work
            log.error("a session's close after its verdict failed: %s", exc)
            self._error = exc
