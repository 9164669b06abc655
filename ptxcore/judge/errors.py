"""Infrastructure failures: our fault, retried, never charged to the model."""

from __future__ import annotations

from ptxcore.schema import JudgeResult


class InfraFailure(RuntimeError):
    """The judge returned INFRA_ERROR: our fault, retried, never charged to the model."""

    def __init__(self, result: JudgeResult) -> None:
        super().__init__(f"infrastructure error while judging {result.definition}: {result.reason}")
        self.result = result

    def __reduce__(self) -> tuple:  # pickled across processes (Prefect task workers): rebuild from the result
        return (type(self), (self.result,))


def infrastructure_exceptions() -> tuple[type[BaseException], ...]:
    """Exception types that mean "the judge could not judge" (worth another attempt)."""
    import httpx

    from ptxcore.gpu.errors import InfraError
    from ptxcore.gpu.service.client import ProfilerUnavailable

    return (InfraFailure, OSError, TimeoutError, httpx.HTTPError, InfraError, ProfilerUnavailable)


def is_infrastructure_failure(exc: BaseException | None) -> bool:
    return exc is not None and isinstance(exc, infrastructure_exceptions())
