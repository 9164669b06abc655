"""The independent slices of a problem that hold some disputed output elements, as a smaller problem of the same
definition (for the float64 arbitration, pipeline.arbitration).

Every output is viewed as [lead, rest] where `lead` enumerates independent sub-problems:
    gemm                 rows of C (lead = M): A's rows, all of B
    attention            (batch, head) pairs (lead = B*H): every [B, H, ...] input, gathered into [1, n, ...]
    gqa_ragged           query tokens of whole sequences: the sequences' q, k, v rows, re-based indptrs
    gqa_paged prefill    query tokens of whole sequences: their q rows, their pages gathered into a compact cache
    gqa_paged decode     sequences (lead = batch): their q rows and pages likewise
The definition's reference then runs unchanged on the slice (it reads its shapes from the inputs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch

from ptxcore.problems import Problem


class SliceError(ValueError):
    """No slicing rule fits, or more slices than allowed."""


@dataclass(frozen=True)
class Unit:
    """The selected slices: sliced inputs, and which lead indices of every output they produce (sorted)."""

    inputs: dict[str, Any]
    lead: int
    """Leading output dims the lead index enumerates (1 or 2)."""
    sel: torch.Tensor
    """Selected lead indices, ascending; the slice outputs come in this order."""
    labels: list[str]

    def view(self, out: torch.Tensor) -> torch.Tensor:
        """The selected part of a full output as [len(sel), rest]."""
        n = 1
        for s in out.shape[: self.lead]:
            n *= s
        return out.reshape(n, -1)[self.sel]

    def positions(self, flat: torch.Tensor, shape: torch.Size) -> torch.Tensor:
        """Flat positions in `view(out)` of flat indices of the full output."""
        inner = 1
        for s in shape[self.lead:]:
            inner *= s
        lead_idx = flat // inner
        return torch.searchsorted(self.sel, lead_idx) * inner + flat % inner


def _cum(lengths: list[int], like: torch.Tensor) -> torch.Tensor:
    vals = [0]
    for n in lengths:
        vals.append(vals[-1] + n)
    return torch.tensor(vals, dtype=like.dtype, device=like.device)


def _ranges(spans: list[tuple[int, int]], device: torch.device) -> torch.Tensor:
    parts = [torch.arange(a, b, device=device) for a, b in spans]
    return torch.cat(parts) if parts else torch.empty(0, dtype=torch.long, device=device)


def _lead_keys(disputed: Mapping[str, torch.Tensor], cols: int, width: int = 1) -> torch.Tensor:
    keys = [idx[:, 0] * width + (idx[:, 1] if cols == 2 else 0) for idx in disputed.values()]
    return torch.unique(torch.cat(keys))


def _check(n: int, max_units: int, what: str) -> None:
    if n > max_units:
        raise SliceError(f"{n} {what} hold disputed elements (at most {max_units} are recomputed)")


def _gemm(inputs: Mapping[str, Any], disputed: Mapping[str, torch.Tensor], max_units: int) -> Unit:
    rows = _lead_keys(disputed, 1)
    _check(rows.numel(), max_units, "rows of C")
    a, b = list(inputs)[:2]
    return Unit({a: inputs[a][rows], b: inputs[b]}, 1, rows, [f"rows {', '.join(map(str, rows.tolist()[:16]))} of C"])


def _attention(problem: Problem, inputs: Mapping[str, Any], disputed: Mapping[str, torch.Tensor],
               max_units: int) -> Unit:
    batch, heads = _shape_of(inputs, problem)[:2]
    keys = _lead_keys(disputed, 2, heads)
    _check(keys.numel(), max_units, "attention heads")
    sliced = {}
    for name, x in inputs.items():
        if isinstance(x, torch.Tensor) and x.dim() >= 2 and tuple(x.shape[:2]) == (batch, heads):
            sliced[name] = x.reshape(batch * heads, *x.shape[2:])[keys].unsqueeze(0)
        else:
            sliced[name] = x
    return Unit(sliced, 2, keys, [f"B={k // heads},H={k % heads}" for k in keys.tolist()])


def _shape_of(inputs: Mapping[str, Any], problem: Problem) -> tuple[int, ...]:
    return tuple(inputs[next(iter(problem.definition.inputs))].shape)


def _sequences(indptr: torch.Tensor, tokens: torch.Tensor) -> list[int]:
    """The sequences (by index) that hold these query tokens."""
    return sorted(set((torch.searchsorted(indptr.long(), tokens, right=True) - 1).tolist()))


def _gqa(problem: Problem, inputs: Mapping[str, Any], disputed: Mapping[str, torch.Tensor], max_units: int) -> Unit:
    names = set(problem.definition.inputs)
    decode = "qo_indptr" not in names
    lead = _lead_keys(disputed, 1)
    qo = inputs["qo_indptr"] if not decode else None
    seqs = lead.tolist() if decode else _sequences(qo, lead)
    _check(len(seqs), max_units, "sequences")
    kv = inputs["kv_indptr"]
    q_spans = [(s, s + 1) if decode else (int(qo[s]), int(qo[s + 1])) for s in seqs]
    kv_spans = [(int(kv[s]), int(kv[s + 1])) for s in seqs]
    dev = lead.device
    q_rows = _ranges(q_spans, dev)
    out: dict[str, Any] = dict(inputs)
    out["q"] = inputs["q"][q_rows]
    if "qo_indptr" in names:
        out["qo_indptr"] = _cum([b - a for a, b in q_spans], qo)
    out["kv_indptr"] = _cum([b - a for a, b in kv_spans], kv)
    kv_rows = _ranges(kv_spans, dev)
    if "kv_indices" in names:
        pages = inputs["kv_indices"][kv_rows].long()
        out["k_cache"], out["v_cache"] = inputs["k_cache"][pages], inputs["v_cache"][pages]
        out["kv_indices"] = torch.arange(pages.numel(), dtype=inputs["kv_indices"].dtype, device=dev)
    else:
        out["k"], out["v"] = inputs["k"][kv_rows], inputs["v"][kv_rows]
    return Unit(out, 1, q_rows, [f"sequence {s} (query rows {a}..{b - 1})" for s, (a, b) in zip(seqs, q_spans, strict=True)])


def unit_for(problem: Problem, inputs: Mapping[str, Any], disputed: Mapping[str, torch.Tensor],
             max_units: int) -> Unit:
    """The slices holding the disputed elements (`disputed`: output name -> [n, ndim] multi-indices)."""
    op = problem.definition.op_type
    if op == "gemm":
        return _gemm(inputs, disputed, max_units)
    if op == "attention":
        return _attention(problem, inputs, disputed, max_units)
    if op in ("gqa_ragged", "gqa_paged") and {"q", "kv_indptr"} <= set(problem.definition.inputs):
        return _gqa(problem, inputs, disputed, max_units)
    raise SliceError(f"no slicing rule for op_type {op!r}")
