"""Workload state the judge keeps on the GPU between candidates: per trial, pristine inputs and the
reference outputs (computed with the baseline library). Private to the judge process: a candidate
only ever sees copies in a SharedSlot, so nothing it does can corrupt this state (`verify_integrity`
proves it with checksums taken at creation).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ptxcore.gpu.harness.baselines import get_baseline
from ptxcore.gpu.harness.workloads import WorkloadSpec, generate_inputs, resolve_spec
from ptxcore.problems import Problem

if TYPE_CHECKING:
    import torch

log = logging.getLogger(__name__)


@dataclass
class TrialData:
    """One trial's inputs and reference outputs (torch tensors on the GPU)."""

    seed: int
    inputs: dict
    references: dict


def digest(tensor: torch.Tensor) -> torch.Tensor:
    """Sum of the tensor's bytes read as int16 (or uint8), as a 0-d int64 tensor on its device (queued on the
    current stream, no synchronisation): changes under any realistic corruption."""
    import torch

    flat = tensor.contiguous().view(-1)
    raw = flat.view(torch.uint8)
    if raw.numel() % 2 == 0:
        return torch.sum(raw.view(torch.int16), dtype=torch.int64)
    return torch.sum(raw, dtype=torch.int64)


def checksum(tensor: torch.Tensor) -> int:
    """`digest` as a number."""
    return int(digest(tensor).item())


@dataclass
class WorkloadState:
    """Inputs and references of every trial of one (problem, workload)."""

    problem: Problem
    spec: WorkloadSpec
    trials: list[TrialData]
    checksums: dict[str, int] = field(default_factory=dict)

    @classmethod
    def build(cls, problem: Problem, workload_uuid: str | None, trials: int) -> WorkloadState:
        import torch

        baseline = get_baseline(problem)  # BaselineUnavailableError before any GPU work
        workload = problem.workload(workload_uuid)
        spec = resolve_spec(problem, workload)
        data = []
        with torch.no_grad():
            for t in range(trials):
                seed = problem.extension.seed + t
                inputs = generate_inputs(problem, spec, seed)
                refs = baseline({k: v for k, v in inputs.items()})
                refs = {o.name: refs[o.name].reshape(o.shape).contiguous() for o in spec.outputs}
                data.append(TrialData(seed, inputs, refs))
        torch.cuda.synchronize()
        state = cls(problem, spec, data)
        state.checksums = state._compute_checksums()
        log.info("workload state %s/%s: %d trials", problem.name, workload.uuid, trials)
        return state

    def _compute_checksums(self) -> dict[str, int]:
        sums = {}
        for i, trial in enumerate(self.trials):
            for group, tensors in (("in", trial.inputs), ("ref", trial.references)):
                for name, value in tensors.items():
                    if hasattr(value, "data_ptr"):
                        sums[f"{i}/{group}/{name}"] = checksum(value)
        return sums

    def verify_integrity(self) -> list[str]:
        """Names of tensors whose checksum changed since creation (empty: intact)."""
        now = self._compute_checksums()
        return sorted(k for k, v in self.checksums.items() if now.get(k) != v)

    @property
    def bytes_on_gpu(self) -> int:
        total = 0
        for trial in self.trials:
            for value in (*trial.inputs.values(), *trial.references.values()):
                if hasattr(value, "nbytes"):
                    total += int(value.nbytes)
        return total
