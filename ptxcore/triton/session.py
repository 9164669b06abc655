"""Child side: a loaded Triton candidate as the isolated child holds it (standard library only at import).

    session = TritonSession(Path(msg["source"]), Path(msg["triton_cache"]))   # CandidateLoadError -> verdict
    session.call(args)            # torch tensors in definition order; CandidateCallError -> verdict
    session.launch_report()       # after the first calls: what they launched (for target evidence)

The first `RECORDED_CALLS` calls are recorded launch by launch (kernel, cubin sha256, stream); later calls run
with no hook installed, so timed calls carry no recording cost. The launches of the last recorded call are
the steady state (the first call also compiles and, with @triton.autotune, benchmarks every configuration).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from .launches import Launch, LaunchRecorder
from .loader import CandidateFault, LoadedCandidate, classify_fault, load_candidate

RECORDED_CALLS = 2


class CandidateCallError(RuntimeError):
    """The candidate's run(...) raised; `fault` says COMPILE_ERROR or RUNTIME_ERROR and why."""

    def __init__(self, fault: CandidateFault) -> None:
        super().__init__(fault.message)
        self.fault = fault


@dataclass
class TritonSession:
    source: Path
    cache_dir: Path
    recorder: LaunchRecorder = field(default_factory=LaunchRecorder)
    recorded: list[list[Launch]] = field(default_factory=list)
    candidate: LoadedCandidate | None = None

    def __post_init__(self) -> None:
        from .loader import configure_cache

        configure_cache(self.cache_dir)  # before triton is imported by the recorder or the candidate
        self.recorder.install()
        self.candidate = load_candidate(self.source, self.cache_dir)

    def call(self, args: list) -> None:
        assert self.candidate is not None
        try:
            if len(self.recorded) < RECORDED_CALLS:
                with self.recorder.recording() as launches:
                    self.candidate.run(*args)
                self.recorded.append(launches)
            else:
                self.candidate.run(*args)
        except Exception as exc:  # noqa: BLE001 - the candidate's fault, classified
            raise CandidateCallError(classify_fault(exc, self.source)) from exc

    def close(self) -> None:
        """Remove the recorder's hooks (a child that loads one candidate never needs this)."""
        self.recorder.remove()

    def launch_report(self) -> dict:
        """`steady`: launches of the last recorded call; `per_call`: kernel names per recorded call."""
        steady = self.recorded[-1] if self.recorded else []
        return {
            "steady": self.recorder.report(steady, self.cache_dir),
            "per_call": [sorted({la.name for la in call}) for call in self.recorded],
            "kernels": sorted({la.name for call in self.recorded for la in call}),
            "streams": sorted({la.stream for call in self.recorded for la in call}),
            "overflow": self.recorder.overflow,
        }
