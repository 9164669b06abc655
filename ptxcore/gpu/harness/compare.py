"""Output comparison: PTXBench's mismatch rule, max errors and the strict allclose verdict.

Element rule (FlashInfer-Bench / PTXBench): abs = |out - ref|, rel = abs / (|ref| + 1e-8); an element
mismatches when abs > atol AND rel > rtol, when out is NaN, or when a non-finite reference is not matched
exactly. Equal values (infinities included) match.
Strict allclose (torch semantics, equal_nan=False): abs <= atol + rtol * |ref|, NaN never close, an
infinity only close to the same infinity.

`compare_numpy` is the CPU statement of the rule (tests, small outputs); `GpuComparator` runs the same
rule as one fused CuPy kernel per output without temporaries, reading the reference through a batch
permutation (see workloads.Permutation) so that permuted calls need no permuted copy of the reference.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

REL_EPS = 1e-8


@dataclass(frozen=True)
class CompareStats:
    """Comparison of one output tensor (or a merge of several)."""

    numel: int
    mismatched: int
    nan_count: int
    inf_count: int
    allclose_violations: int
    max_abs_error: float
    max_rel_error: float

    @property
    def matched_ratio(self) -> float:
        return 1.0 if self.numel == 0 else 1.0 - self.mismatched / self.numel

    @property
    def allclose(self) -> bool:
        return self.allclose_violations == 0

    @property
    def untouched(self) -> bool:
        """Every element still holds the NaN poison: the call never wrote this output."""
        return self.numel > 0 and self.nan_count == self.numel

    def passes(self, matched_ratio: float) -> bool:
        return self.nan_count == 0 and self.matched_ratio >= matched_ratio

    def merge(self, other: CompareStats) -> CompareStats:
        return CompareStats(
            self.numel + other.numel, self.mismatched + other.mismatched,
            self.nan_count + other.nan_count, self.inf_count + other.inf_count,
            self.allclose_violations + other.allclose_violations,
            _nanmax(self.max_abs_error, other.max_abs_error), _nanmax(self.max_rel_error, other.max_rel_error),
        )


def _nanmax(a: float, b: float) -> float:
    return b if math.isnan(a) else a if math.isnan(b) else max(a, b)


def gather_reference(ref: np.ndarray, perm: np.ndarray | None, batch_dims: int) -> np.ndarray:
    """ref permuted along its flattened leading `batch_dims` axes (identity when perm is None)."""
    if perm is None or batch_dims == 0:
        return ref
    lead = int(np.prod(ref.shape[:batch_dims]))
    flat = ref.reshape(lead, -1)[perm]
    return flat.reshape(ref.shape)


def compare_numpy(
    out: np.ndarray, ref: np.ndarray, atol: float, rtol: float,
    perm: np.ndarray | None = None, batch_dims: int = 0,
) -> CompareStats:
    """The rule on CPU arrays (float64 arithmetic)."""
    if out.shape != ref.shape:
        raise ValueError(f"shape mismatch {out.shape} vs {ref.shape}")
    o = np.asarray(out, dtype=np.float64).ravel()
    r = np.asarray(gather_reference(ref, perm, batch_dims), dtype=np.float64).ravel()
    with np.errstate(invalid="ignore", over="ignore"):
        equal = o == r
        diff = np.where(equal, 0.0, np.abs(o - r))
        rel = diff / (np.abs(r) + REL_EPS)
        nan = np.isnan(o)
        mismatch = nan | (~equal & (~np.isfinite(r) | ((diff > atol) & (rel > rtol))))
        close = equal | (np.isfinite(o) & np.isfinite(r) & (diff <= atol + rtol * np.abs(r)))
    finite_diff = diff[~np.isnan(diff)]
    finite_rel = rel[~np.isnan(rel)]
    return CompareStats(
        numel=int(o.size), mismatched=int(mismatch.sum()), nan_count=int(nan.sum()),
        inf_count=int((np.isinf(o) & ~equal).sum()), allclose_violations=int((~close).sum()),
        max_abs_error=float(finite_diff.max()) if finite_diff.size else 0.0,
        max_rel_error=float(finite_rel.max()) if finite_rel.size else 0.0,
    )


KERNEL_SOURCE = r"""
__device__ __forceinline__ float load_f(const unsigned short* p, long long i, int dt) {
  unsigned int b = p[i];
  if (dt == 1) return __uint_as_float(b << 16);  // bfloat16
  // float16 -> float32
  unsigned int s = (b & 0x8000u) << 16, e = (b >> 10) & 0x1fu, m = b & 0x3ffu;
  if (e == 0) { float f = __int2float_rn((int)m) * 5.9604644775390625e-08f; return s ? -f : f; }
  if (e == 31) return __uint_as_float(s | 0x7f800000u | (m << 13));
  return __uint_as_float(s | ((e + 112u) << 23) | (m << 13));
}
__device__ __forceinline__ float load_any(const void* p, long long i, int dt) {
  if (dt == 0) return ((const float*)p)[i];
  if (dt == 3) return (float)((const int*)p)[i];
  if (dt == 4) return (float)((const long long*)p)[i];
  return load_f((const unsigned short*)p, i, dt);
}
extern "C" __global__ void ptxbench_compare(
    const void* out, const void* ref, const long long* perm, long long inner, long long n, int dt,
    float atol, float rtol, unsigned long long* counts, unsigned int* maxes) {
  unsigned long long mis = 0, nan = 0, inf = 0, viol = 0;
  float mabs = 0.f, mrel = 0.f;
  for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x; e < n;
       e += (long long)gridDim.x * blockDim.x) {
    long long b = e / inner, r = e - b * inner;
    long long ri = (perm ? perm[b] : b) * inner + r;
    float o = load_any(out, e, dt), f = load_any(ref, ri, dt);
    bool eq = (o == f);
    float d = eq ? 0.f : fabsf(o - f);
    float rel = d / (fabsf(f) + 1e-8f);
    bool on = isnan(o);
    nan += on;
    inf += (isinf(o) && !eq);
    mis += (on || (!eq && (!isfinite(f) || (d > atol && rel > rtol))));
    bool close = eq || (isfinite(o) && isfinite(f) && d <= atol + rtol * fabsf(f));
    viol += !close;
    if (!isnan(d)) mabs = fmaxf(mabs, d);
    if (!isnan(rel)) mrel = fmaxf(mrel, rel);
  }
  for (int off = 16; off > 0; off >>= 1) {
    mis += __shfl_down_sync(0xffffffffu, mis, off);
    nan += __shfl_down_sync(0xffffffffu, nan, off);
    inf += __shfl_down_sync(0xffffffffu, inf, off);
    viol += __shfl_down_sync(0xffffffffu, viol, off);
    mabs = fmaxf(mabs, __shfl_down_sync(0xffffffffu, mabs, off));
    mrel = fmaxf(mrel, __shfl_down_sync(0xffffffffu, mrel, off));
  }
  if ((threadIdx.x & 31) == 0) {
    if (mis) atomicAdd(counts + 0, mis);
    if (nan) atomicAdd(counts + 1, nan);
    if (inf) atomicAdd(counts + 2, inf);
    if (viol) atomicAdd(counts + 3, viol);
    atomicMax(maxes + 0, __float_as_uint(mabs));
    atomicMax(maxes + 1, __float_as_uint(mrel));
  }
}
"""

# dtype codes of the kernel
DTYPE_CODES = {"float32": 0, "bfloat16": 1, "float16": 2, "int32": 3, "int64": 4}


class GpuComparator:
    """Fused comparisons on the GPU. Each `compare` call reserves one result row; `collect` reads all rows.

    Rows live in one device array, so the comparisons of many calls are queued without a host sync.
    """

    ROW_COUNTS, ROW_MAXES = 4, 2

    def __init__(self, capacity: int) -> None:
        import cupy

        self._cp = cupy
        self._kernel = cupy.RawModule(code=KERNEL_SOURCE).get_function("ptxbench_compare")
        self.capacity = capacity
        self._counts = cupy.zeros((capacity, self.ROW_COUNTS), dtype=cupy.uint64)
        self._maxes = cupy.zeros((capacity, self.ROW_MAXES), dtype=cupy.uint32)
        self._numel: list[int] = []
        self._grid = 132 * 8

    def compare(self, out_ptr: int, ref_ptr: int, numel: int, dtype: str, atol: float, rtol: float,
                perm_ptr: int = 0, inner: int = 0) -> int:
        """Queue one comparison on the current stream; returns its row."""
        cp = self._cp
        row = len(self._numel)
        if row >= self.capacity:
            raise RuntimeError("GpuComparator capacity exceeded")
        self._numel.append(numel)
        if numel == 0:
            return row
        args = (
            cp.uint64(out_ptr), cp.uint64(ref_ptr), cp.uint64(perm_ptr), cp.int64(inner or numel),
            cp.int64(numel), cp.int32(DTYPE_CODES[dtype]), cp.float32(atol), cp.float32(rtol),
            self._counts[row], self._maxes[row],
        )
        self._kernel((self._grid,), (256,), args)
        return row

    def collect(self) -> list[CompareStats]:
        counts = self._counts[: len(self._numel)].get()
        maxes = self._maxes[: len(self._numel)].get().view(np.float32)
        return [
            CompareStats(n, int(c[0]), int(c[1]), int(c[2]), int(c[3]), float(m[0]), float(m[1]))
            for n, c, m in zip(self._numel, counts, maxes, strict=True)
        ]
