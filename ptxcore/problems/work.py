"""Useful work per problem and workload: FLOPs and minimum bytes moved, from the extension's `work:` block.

FLOPs count 2 per multiply-add of the matmuls the definition needs:
    gemm                 2*M*N*K
    attention_forward    4*D*heads*pairs       (S = Q K^T and O = P V)
    attention_backward   10*D*heads*pairs      (S recomputed from L, dP = dO V^T, dV = P^T dO, dQ = dS K, dK = dS^T Q)
where `pairs` is the exact number of unmasked (query, key) pairs per query head, summed over the batch: q*k
without a mask; with a causal mask aligned bottom-right (query i sees key j <= i + k - q) the exact count for
the workload's lengths (q = k = S: S*(S+1)/2, which is also the top-left `tril` mask of the MHA definitions).
Heads are query heads (GQA shares K/V between heads of a group, not the arithmetic). Softmax, scaling and masking
are not counted (not matmul work). MHA problems take B, H, S, D from the axes; GQA problems take their
per-sequence lengths from the extension's `structure` (q_lens, kv_lens; decode: one query per sequence), which
is the rule the judge generates their indptr inputs by (ptxcore.gpu.harness.workloads), checked here against
the workload's axes (total_q, total_kv, len_indptr, num_kv_indices).

Minimum bytes: every input tensor read once and every output written once (rule io); for a paged KV cache only
the pages kv_indices names (rule paged_io).
"""

from __future__ import annotations

from collections.abc import Iterable

from ptxcore.schema import DType, FrozenModel

from .catalog import CatalogError, Problem
from .extension import BytesRule, FlopsFormula

BITS: dict[DType, int] = {
    DType.FLOAT32: 32, DType.FLOAT16: 16, DType.BFLOAT16: 16, DType.FLOAT8_E4M3FN: 8, DType.FLOAT8_E5M2: 8,
    DType.FLOAT4_E2M1: 4, DType.INT64: 64, DType.INT32: 32, DType.INT16: 16, DType.INT8: 8, DType.BOOL: 8,
}
"""Bits per element of each dtype."""

_FACTOR = {FlopsFormula.ATTENTION_FORWARD: 4, FlopsFormula.ATTENTION_BACKWARD: 10}
_CACHE_AXIS = "num_pages"


class WorkError(CatalogError):
    """A problem's work cannot be computed (its axes or structure disagree with its formula)."""


class ProblemWork(FrozenModel):
    """Useful work of one call of one workload."""

    definition: str
    """Problem name."""
    workload_uuid: str
    """Workload the numbers are for."""
    flops: int
    """Useful FLOPs per call."""
    flops_formula: FlopsFormula
    """Formula name."""
    flops_expression: str
    """The formula with this workload's numbers, for humans."""
    attention_pairs: int | None = None
    """Unmasked (query, key) pairs per query head, summed over the batch (attention formulas only)."""
    min_bytes: int
    """Minimum bytes moved per call."""
    min_bytes_rule: BytesRule
    """Minimum-bytes rule."""
    carry_threshold: float | None = None
    """The problem's own carry threshold (None: the architecture's)."""


def causal_pairs(q_len: int, kv_len: int) -> int:
    """Unmasked pairs of a bottom-right causal mask: query i (0-based) sees keys j <= i + kv_len - q_len."""
    if q_len <= 0 or kv_len <= 0:
        return 0
    off = kv_len - q_len
    first = max(0, -off)  # first query that sees at least one key
    full = min(q_len, max(first, kv_len - off - 1))  # from here on a query sees all kv_len keys
    ramp = sum_range(first + off + 1, full + off + 1)  # queries first..full-1 see i + off + 1 keys
    return ramp + (q_len - full) * kv_len


def sum_range(lo: int, hi: int) -> int:
    """lo + (lo + 1) + ... + (hi - 1); 0 when hi <= lo."""
    return (hi - lo) * (lo + hi - 1) // 2 if hi > lo else 0


def pairs(q_len: int, kv_len: int, causal: bool) -> int:
    """Unmasked (query, key) pairs of one sequence and head."""
    return causal_pairs(q_len, kv_len) if causal else q_len * kv_len


def _axes(problem: Problem, workload_uuid: str | None) -> tuple[str, dict[str, int]]:
    w = problem.workload(workload_uuid)
    return w.uuid, {**problem.definition.const_axes(), **w.axes}


def _need(axes: dict[str, int], names: Iterable[str], problem: Problem) -> list[int]:
    missing = [n for n in names if n not in axes]
    if missing:
        raise WorkError(f"{problem.name}: work formula {problem.extension.work.flops.value} needs axes {missing}")
    return [axes[n] for n in names]


def _sequences(problem: Problem, axes: dict[str, int]) -> list[tuple[int, int]]:
    """(q_len, kv_len) per sequence of a GQA structure, checked against the workload's axes."""
    st = problem.extension.structure
    q_lens = st.q_lens if st.q_lens else [1] * len(st.kv_lens)
    if len(q_lens) != len(st.kv_lens):
        raise WorkError(f"{problem.name}: structure has {len(q_lens)} q_lens but {len(st.kv_lens)} kv_lens")
    pages = sum(-(-n // st.page_size) for n in st.kv_lens)
    expected = {"total_q": sum(q_lens), "batch_size": len(q_lens), "len_indptr": len(q_lens) + 1,
                "num_kv_indices": pages}
    if st.kind == "ragged":
        expected["total_kv"] = sum(st.kv_lens)
    for axis, value in expected.items():
        if axis in axes and axes[axis] != value:
            raise WorkError(f"{problem.name}: workload axis {axis}={axes[axis]} but the structure gives {value}")
    return list(zip(q_lens, st.kv_lens, strict=True))


def _attention(problem: Problem, axes: dict[str, int]) -> tuple[int, int, str]:
    """(heads * head_dim, pairs, expression of the pairs)."""
    if problem.extension.structure is not None:
        st = problem.extension.structure
        heads, dim = _need(axes, ("num_qo_heads", "head_dim"), problem)
        seqs = _sequences(problem, axes)
        total = sum(pairs(q, k, st.causal) for q, k in seqs)
        mask = "causal bottom-right" if st.causal else "no mask"
        return heads * dim, total, (f"num_qo_heads={heads} * head_dim={dim} * sum over {len(seqs)} sequences of "
                                    f"pairs(q_len, kv_len; {mask}) = {total}")
    batch, heads, seq, dim = _need(axes, ("B", "H", "S", "D"), problem)
    per_head = pairs(seq, seq, problem.is_causal)
    mask = f"S*(S+1)/2 = {per_head}" if problem.is_causal else f"S*S = {per_head}"
    return heads * dim, batch * per_head, f"B={batch} * H={heads} * D={dim} * pairs ({mask})"


def _flops(problem: Problem, axes: dict[str, int]) -> tuple[int, str, int | None]:
    formula = problem.extension.work.flops
    if formula is FlopsFormula.GEMM:
        m, n, k = _need(axes, ("M", "N", "K"), problem)
        return 2 * m * n * k, f"2 * M={m} * N={n} * K={k}", None
    factor = _FACTOR[formula]
    head_dim_product, total_pairs, text = _attention(problem, axes)
    return factor * head_dim_product * total_pairs, f"{factor} * {text}", total_pairs


def _tensor_bytes(problem: Problem, axes: dict[str, int], paged_pages: int | None) -> int:
    d = problem.definition
    total_bits = 0
    for spec in (*d.inputs.values(), *d.outputs.values()):
        shape = d.resolve_shape(spec, axes)
        if shape is None:
            continue
        numel = 1
        for s in shape:
            numel *= s
        if paged_pages is not None and spec.shape and spec.shape[0] == _CACHE_AXIS:
            numel = numel // shape[0] * paged_pages  # only the referenced pages
        total_bits += numel * BITS[spec.dtype]
    return -(-total_bits // 8)


def _min_bytes(problem: Problem, axes: dict[str, int]) -> int:
    rule = problem.extension.work.min_bytes
    if rule is BytesRule.IO:
        return _tensor_bytes(problem, axes, None)
    if problem.extension.structure is None:
        raise WorkError(f"{problem.name}: min_bytes rule paged_io needs a structure")
    st = problem.extension.structure
    return _tensor_bytes(problem, axes, sum(-(-n // st.page_size) for n in st.kv_lens))


def problem_work(problem: Problem, workload_uuid: str | None = None) -> ProblemWork:
    """Useful FLOPs and minimum bytes of one call of the workload (the primary one by default)."""
    uuid, axes = _axes(problem, workload_uuid)
    flops, expression, total_pairs = _flops(problem, axes)
    w = problem.extension.work
    return ProblemWork(definition=problem.name, workload_uuid=uuid, flops=flops, flops_formula=w.flops,
                       flops_expression=expression, attention_pairs=total_pairs, min_bytes=_min_bytes(problem, axes),
                       min_bytes_rule=w.min_bytes, carry_threshold=w.carry_threshold)
