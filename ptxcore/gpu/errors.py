"""Exceptions of the GPU judge. A bad kernel is a verdict, never one of these."""

from __future__ import annotations


class NoGPUError(RuntimeError):
    """No usable NVIDIA GPU (or driver) on this machine: the GPU stages cannot run here."""


class InfraError(RuntimeError):
    """Our fault (driver trouble not caused by the candidate, a crashed tool, our own OOM).

    Turned into an INFRA_ERROR verdict by the engine; never charged to the model.
    """


class BaselineUnavailableError(InfraError):
    """The problem's baseline library is not installed on this GPU host (e.g. FlashInfer)."""


class ArchitectureMismatchError(InfraError):
    """The candidate targets an architecture this GPU cannot execute (e.g. sm_100a on an H200)."""
