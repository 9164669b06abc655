"""FlashInfer as the baseline of the three GQA problems (its wrappers, with the definitions' semantics).

A baseline is `Callable[[dict], dict]`: inputs by name in, outputs by name out (the harness copies them
into the destination buffers outside the timed window). Semantics, from the definitions:
  * ragged prefill: BatchPrefillWithRaggedKVCacheWrapper(causal=True).run(q, k, v, return_lse=True);
  * paged prefill:  BatchPrefillWithPagedKVCacheWrapper(page_size=1, causal=True).run(q, (k_cache, v_cache));
  * paged decode:   BatchDecodeWithPagedKVCacheWrapper(page_size=1).run(q, (k_cache, v_cache));
  kv layout NHD ([pages, page_size, kv_heads, head_dim]), sm_scale from the workload's scalar input,
  lse as FlashInfer returns it (base 2, the GQA definitions' convention; benchmarks/device/flashinfer_warm.py
  checks it against the definitions' references on the GPU host).
FlashInfer's causal mask is aligned bottom-right (query i of a sequence sees keys j <= i + kv_len - q_len),
as the definitions' references.

`plan()` runs on the host (it reads the index arrays and schedules the work); it is redone only when the index
arrays change (each correctness trial draws new page ids): `_Planned` keeps a host copy of the arrays it
planned for and compares the current ones after a device-to-host copy (a memcpy, not a kernel, so the CUPTI
kernel spans that time the baseline do not include it).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from ptxcore.problems import Problem

Baseline = Callable[[dict], dict]
WORKSPACE_BYTES = 256 * 1024 * 1024  # FlashInfer's float workspace (split-KV partial results)

IMPLEMENTATIONS = (
    "gqa_ragged_prefill_flashinfer",
    "gqa_paged_prefill_flashinfer",
    "gqa_paged_decode_flashinfer",
)


def flashinfer_version() -> str:
    import flashinfer

    return str(flashinfer.__version__)


class _Planned:
    """A FlashInfer wrapper and the index arrays (host copies) it was planned for."""

    def __init__(self, make_wrapper: Callable, plan: Callable) -> None:
        self._make_wrapper = make_wrapper
        self._plan = plan
        self._wrapper = None
        self._planned_for: tuple | None = None

    def get(self, index_tensors: tuple):
        host = tuple(t.cpu() for t in index_tensors)
        same = self._planned_for is not None and all(
            a.shape == b.shape and bool((a == b).all()) for a, b in zip(host, self._planned_for, strict=True)
        )
        if not same:
            if self._wrapper is None:
                self._wrapper = self._make_wrapper()
            self._plan(self._wrapper, *host)
            self._planned_for = host
        return self._wrapper


def _workspace():
    import torch

    return torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device="cuda")


def _axes(problem: Problem) -> tuple[int, int, int, int]:
    c = problem.definition.const_axes()
    return c["num_qo_heads"], c["num_kv_heads"], c["head_dim"], c.get("page_size", 1)


def _ragged_prefill(problem: Problem) -> Baseline:
    import flashinfer
    import torch

    hq, hkv, d, _ = _axes(problem)
    state: dict = {}

    def plan(wrapper: Any, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor) -> None:  # wrapper: FlashInfer's
        wrapper.plan(qo_indptr, kv_indptr, hq, hkv, d, causal=True, sm_scale=state["sm_scale"],
                     q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)

    planned = _Planned(lambda: flashinfer.BatchPrefillWithRaggedKVCacheWrapper(_workspace(), "NHD"), plan)

    def run(inputs: dict) -> dict:
        state["sm_scale"] = float(inputs["sm_scale"])
        wrapper = planned.get((inputs["qo_indptr"], inputs["kv_indptr"]))
        out, lse = wrapper.run(inputs["q"], inputs["k"], inputs["v"], return_lse=True)
        return {"output": out, "lse": lse}

    return run


def _paged_prefill(problem: Problem) -> Baseline:
    import flashinfer
    import torch

    hq, hkv, d, page_size = _axes(problem)
    state: dict = {}

    def plan(wrapper: Any, qo_indptr: torch.Tensor, kv_indptr: torch.Tensor, kv_indices: torch.Tensor) -> None:
        last_page_len = torch.ones(kv_indptr.numel() - 1, dtype=torch.int32)  # page size 1: pages are full
        wrapper.plan(qo_indptr, kv_indptr, kv_indices, last_page_len, hq, hkv, d, page_size, causal=True,
                     sm_scale=state["sm_scale"], q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)

    planned = _Planned(lambda: flashinfer.BatchPrefillWithPagedKVCacheWrapper(_workspace(), "NHD"), plan)

    def run(inputs: dict) -> dict:
        state["sm_scale"] = float(inputs["sm_scale"])
        wrapper = planned.get((inputs["qo_indptr"], inputs["kv_indptr"], inputs["kv_indices"]))
        out, lse = wrapper.run(inputs["q"], (inputs["k_cache"], inputs["v_cache"]), return_lse=True)
        return {"output": out, "lse": lse}

    return run


def _paged_decode(problem: Problem) -> Baseline:
    import flashinfer
    import torch

    hq, hkv, d, page_size = _axes(problem)
    state: dict = {}

    def plan(wrapper: Any, kv_indptr: torch.Tensor, kv_indices: torch.Tensor) -> None:
        last_page_len = torch.ones(kv_indptr.numel() - 1, dtype=torch.int32)
        wrapper.plan(kv_indptr, kv_indices, last_page_len, hq, hkv, d, page_size, pos_encoding_mode="NONE",
                     sm_scale=state["sm_scale"], q_data_type=torch.bfloat16, kv_data_type=torch.bfloat16)

    planned = _Planned(lambda: flashinfer.BatchDecodeWithPagedKVCacheWrapper(_workspace(), "NHD"), plan)

    def run(inputs: dict) -> dict:
        state["sm_scale"] = float(inputs["sm_scale"])
        wrapper = planned.get((inputs["kv_indptr"], inputs["kv_indices"]))
        out, lse = wrapper.run(inputs["q"], (inputs["k_cache"], inputs["v_cache"]), return_lse=True)
        return {"output": out, "lse": lse}

    return run


_FACTORIES: dict[str, Callable] = dict(
    zip(IMPLEMENTATIONS, (_ragged_prefill, _paged_prefill, _paged_decode), strict=True)
)


def flashinfer_baseline(problem: Problem) -> Baseline:
    """The FlashInfer baseline named by the problem's extension (`baseline.implementation`).

    Raises ImportError when FlashInfer is missing (the caller turns it into BaselineUnavailableError)
    and KeyError for an implementation this module does not know."""
    key = problem.extension.baseline.implementation
    if key not in _FACTORIES:
        raise KeyError(f"{problem.name}: no FlashInfer adapter for {key!r}")
    import flashinfer  # noqa: F401 - fail here, before any wrapper is built

    return _FACTORIES[key](problem)
