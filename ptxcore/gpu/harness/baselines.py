"""The frontier-library reference implementations (docs/architecture.md "Where each GPU library serves").

Each baseline takes the inputs by name and returns the outputs by name (value-returning; the harness
copies them into destination buffers outside the timed window). Keys are the extension's
`baseline.implementation`. FlashInfer is not on the GPU image: its problems raise
BaselineUnavailableError instead of being silently compared against another library.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from ptxcore.gpu.errors import BaselineUnavailableError
from ptxcore.problems import Problem

if TYPE_CHECKING:
    import torch

Baseline = Callable[[dict], dict]


def attention_forward(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool
                      ) -> tuple[torch.Tensor, torch.Tensor]:
    """cuDNN attention forward: (O, natural-log LSE of shape [B, H, S])."""
    import torch

    res = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False)
    b, h, s, _ = q.shape
    return res[0], res[1].reshape(b, h, s)


def _gemm_nt(inputs: dict) -> dict:
    import torch

    return {"C": torch.matmul(inputs["A"], inputs["B"].T)}


def _mha_fwd(causal: bool) -> Baseline:
    def run(inputs: dict) -> dict:
        o, lse = attention_forward(inputs["Q"], inputs["K"], inputs["V"], causal)
        return {"O": o, "LSE": lse}

    return run


def _mha_bwd(causal: bool) -> Baseline:
    state: dict = {}

    def run(inputs: dict) -> dict:
        import torch

        q, k, v, o, do, lse = (inputs[n] for n in ("Q", "K", "V", "O", "dO", "L"))
        b, h, s, _ = q.shape
        if "philox" not in state:  # dropout is 0: the RNG state only has to be well-formed
            fwd = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False)
            state["philox"] = (fwd[6], fwd[7])
        seed, offset = state["philox"]
        dq, dk, dv = torch.ops.aten._scaled_dot_product_cudnn_attention_backward(
            do, q, k, v, o, lse.reshape(b, h, s, 1), seed, offset, None, None, None, s, s, 0.0, causal
        )
        return {"dQ": dq, "dK": dk, "dV": dv}

    return run


def _flashinfer(problem: Problem) -> Baseline:
    from ptxcore.gpu.harness.flashinfer import flashinfer_baseline

    try:
        return flashinfer_baseline(problem)
    except ImportError as exc:
        raise BaselineUnavailableError(
            f"{problem.name}: baseline library FlashInfer is not installed on this GPU host; "
            "this problem cannot be judged here (no substitute library is used)"
        ) from exc
    except KeyError as exc:
        raise BaselineUnavailableError(str(exc.args[0])) from exc


def baseline_version(problem: Problem) -> tuple[str, str | None]:
    """(library, version) of the problem's baseline as this host has it (None: not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    library = problem.extension.baseline.library.value
    try:
        if library == "flashinfer":  # the distribution's metadata: no import (FlashInfer's import JIT-loads)
            return library, version("flashinfer-python")
        import torch

        if library == "cudnn":
            return library, str(torch.backends.cudnn.version())
        return library, f"torch {torch.__version__} (CUDA {torch.version.cuda})"
    except (ImportError, PackageNotFoundError):
        return library, None


def get_baseline(problem: Problem) -> Baseline:
    """The problem's reference implementation, or BaselineUnavailableError."""
    key = problem.extension.baseline.implementation
    causal = problem.is_causal
    if key == "gemm_nt_torch_matmul":
        return _gemm_nt
    if key == "mha_fwd_cudnn":
        return _mha_fwd(causal)
    if key == "mha_bwd_cudnn":
        return _mha_bwd(causal)
    if problem.extension.baseline.library.value == "flashinfer":
        return _flashinfer(problem)
    raise BaselineUnavailableError(f"{problem.name}: unknown baseline implementation {key!r}")
