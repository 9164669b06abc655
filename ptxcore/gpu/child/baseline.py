"""The trusted baseline in a child session (mode baseline): the torch/cuDNN/FlashInfer reference."""

from __future__ import annotations

from collections.abc import Callable


def load_baseline(problem: str) -> Callable[[dict], dict]:
    from ptxcore.gpu.harness.baselines import get_baseline
    from ptxcore.problems import get_problem

    return get_baseline(get_problem(problem))


def wrap_tensors(raws: list) -> list:
    """The judge's IPC-mapped buffers as torch tensors (the baseline's calling convention)."""
    import torch

    return [torch.from_dlpack(v) if hasattr(v, "__dlpack__") else v for _, v in raws]
