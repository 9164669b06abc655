"""The candidate's session in mode triton: one Triton kernel.py, loaded and called through ptxcore.triton.session.

torch is not blocked in this mode (the candidate imports it: Triton launches through torch's current stream and
the tensor-descriptor allocator is torch's), so the judge replaces the mapped-library check by the foreign-kernel
check: every kernel CUPTI sees in a call must be a Triton kernel the session recorded. The judge's IPC buffers are
wrapped with torch.from_dlpack (as for the trusted baseline); calls go to torch's current stream on this device,
the NULL stream that the session's calibration memset names. Candidate faults keep their classification
(`CandidateLoadError` / `CandidateCallError` `.fault.status`: COMPILE_ERROR or RUNTIME_ERROR) so that the judge
can report a Triton compile error as COMPILE_ERROR with its trimmed message.
"""

from __future__ import annotations

from pathlib import Path


class TritonCandidate:
    """A loaded kernel.py; calling it makes one `run(...)` call on torch tensors."""

    def __init__(self, source: str, cache_dir: str, device: int) -> None:
        import torch

        from ptxcore.triton.session import TritonSession

        torch.cuda.set_device(device)  # Triton launches on torch's current device
        self.session = TritonSession(Path(source), Path(cache_dir))

    def __call__(self, args: list) -> None:
        self.session.call(args)

    def launches(self) -> dict:
        """What the recorded (first) calls launched: kernel names, cubin hashes, streams."""
        return self.session.launch_report()


def fault_of(exc: BaseException) -> tuple[str, str] | None:
    """(status, trimmed message) of a classified candidate fault; None for anything else."""
    from ptxcore.triton.loader import CandidateLoadError
    from ptxcore.triton.session import CandidateCallError

    if isinstance(exc, CandidateLoadError | CandidateCallError):
        return exc.fault.status, exc.fault.message
    return None
