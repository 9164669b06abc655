// ptx_tma.cuh -- Tensor Memory Accelerator (cp.async.bulk.tensor) device wrappers, 1-D bulk copies and
// host-side tensor-map encoding. sm_90a and sm_100a. Needs ptx_sync.cuh and ptx_mbarrier.cuh.
// `tmap` is the address of a `const __grid_constant__ CUtensorMap` kernel parameter. Coordinates are
// element indices, innermost (contiguous) dimension first: c[0] = column, c[1] = row, ...
// Out-of-bounds box elements are zero-filled on load and skipped on store; the full box byte count
// still completes on the mbarrier.
#include <cuda.h>          // CUtensorMap and its enums (header only: no -lcuda needed)
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled_v12000
#include <cuda_runtime.h>

PTXB_DEV uint64_t tmap_u64(const CUtensorMap* tmap) { return reinterpret_cast<uint64_t>(tmap); }

// Bring the 128-byte descriptor into the cache before first use (one thread, kernel start).
PTXB_DEV void tma_prefetch_desc(const CUtensorMap* tmap) {
  asm volatile("prefetch.tensormap [%0];" :: "l"(tmap_u64(tmap)) : "memory");
}

// ---- loads: global -> shared, completion = complete_tx on `mbar` (bytes = box bytes) -----------------
template <int R>
PTXB_DEV void tma_load(uint32_t dst_smem, const CUtensorMap* tmap, uint32_t mbar, const int32_t (&c)[R]) {
  const uint64_t t = tmap_u64(tmap);
  if constexpr (R == 1) {
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3}], [%2];"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "r"(c[0]) : "memory");
  } else if constexpr (R == 2) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "r"(c[0]), "r"(c[1]) : "memory");
  } else if constexpr (R == 3) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "r"(c[0]), "r"(c[1]), "r"(c[2]) : "memory");
  } else if constexpr (R == 4) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], [%2];"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]) : "memory");
  } else {
    static_assert(R == 5, "TMA rank is 1..5");
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6, %7}], [%2];"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]) : "memory");
  }
}

// Multicast load: one global read, the box lands at the SAME smem offset in every CTA whose bit is set
// in cta_mask (bit i = cluster rank i), and complete_tx hits the mbarrier at the SAME offset in each of
// those CTAs. Every receiving CTA must expect_tx the full box bytes on its own barrier.
template <int R>
PTXB_DEV void tma_load_multicast(uint32_t dst_smem, const CUtensorMap* tmap, uint32_t mbar, uint16_t cta_mask,
                                 const int32_t (&c)[R]) {
  const uint64_t t = tmap_u64(tmap);
  if constexpr (R == 2) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%4, %5}], [%2], %3;"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "h"(cta_mask), "r"(c[0]), "r"(c[1]) : "memory");
  } else if constexpr (R == 3) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%4, %5, %6}], [%2], %3;"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "h"(cta_mask), "r"(c[0]), "r"(c[1]), "r"(c[2]) : "memory");
  } else if constexpr (R == 4) {
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%4, %5, %6, %7}], [%2], %3;"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "h"(cta_mask), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]) : "memory");
  } else {
    static_assert(R == 5, "multicast wrapper: rank 2..5");
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
                 " [%0], [%1, {%4, %5, %6, %7, %8}], [%2], %3;"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "h"(cta_mask), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4])
                 : "memory");
  }
}

// Load with an L2 cache policy from l2_policy_evict_last()/evict_first() (e.g. K/V tiles re-read by
// many CTAs: evict_last; streamed once: evict_first).
template <int R>
PTXB_DEV void tma_load_hint(uint32_t dst_smem, const CUtensorMap* tmap, uint32_t mbar, const int32_t (&c)[R],
                            uint64_t policy) {
  const uint64_t t = tmap_u64(tmap);
  if constexpr (R == 2) {
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%3, %4}], [%2], %5;"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "r"(c[0]), "r"(c[1]), "l"(policy) : "memory");
  } else if constexpr (R == 3) {
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%3, %4, %5}], [%2], %6;"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "l"(policy) : "memory");
  } else {
    static_assert(R == 4, "hinted load wrapper: rank 2..4");
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2], %7;"
                 :: "r"(dst_smem), "l"(t), "r"(mbar), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "l"(policy) : "memory");
  }
}

// ---- stores and reduce-add: shared -> global, completion = bulk async-group -------------------------
// Before issuing: the smem tile was written by ordinary stores, so every writing thread executes
// fence_proxy_async_shared(), then the CTA/warpgroup synchronises, then ONE thread issues the store.
template <int R>
PTXB_DEV void tma_store(const CUtensorMap* tmap, uint32_t src_smem, const int32_t (&c)[R]) {
  const uint64_t t = tmap_u64(tmap);
  if constexpr (R == 2) {
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];"
                 :: "l"(t), "r"(src_smem), "r"(c[0]), "r"(c[1]) : "memory");
  } else if constexpr (R == 3) {
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];"
                 :: "l"(t), "r"(src_smem), "r"(c[0]), "r"(c[1]), "r"(c[2]) : "memory");
  } else if constexpr (R == 4) {
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];"
                 :: "l"(t), "r"(src_smem), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]) : "memory");
  } else {
    static_assert(R == 5, "store wrapper: rank 2..5");
    asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];"
                 :: "l"(t), "r"(src_smem), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]) : "memory");
  }
}
// global[box] += smem tile, element type from the tensor map (f32, f16, bf16 ...). Atomic per element.
template <int R>
PTXB_DEV void tma_reduce_add(const CUtensorMap* tmap, uint32_t src_smem, const int32_t (&c)[R]) {
  const uint64_t t = tmap_u64(tmap);
  if constexpr (R == 2) {
    asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3}], [%1];"
                 :: "l"(t), "r"(src_smem), "r"(c[0]), "r"(c[1]) : "memory");
  } else if constexpr (R == 3) {
    asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];"
                 :: "l"(t), "r"(src_smem), "r"(c[0]), "r"(c[1]), "r"(c[2]) : "memory");
  } else if constexpr (R == 4) {
    asm volatile("cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5}], [%1];"
                 :: "l"(t), "r"(src_smem), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]) : "memory");
  } else {
    static_assert(R == 5, "reduce wrapper: rank 2..5");
    asm volatile("cp.reduce.async.bulk.tensor.5d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4, %5, %6}], [%1];"
                 :: "l"(t), "r"(src_smem), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]) : "memory");
  }
}
// Close the group of stores issued so far by this thread; then wait until at most N groups are pending.
PTXB_DEV void tma_store_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
// .read: the smem SOURCE of all but N groups may be overwritten (global writes may still be in flight).
template <int N> PTXB_DEV void tma_store_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;" :: "n"(N) : "memory"); }
// Full completion: the global writes of all but N groups are done (needed before the kernel reads them back).
template <int N> PTXB_DEV void tma_store_wait() { asm volatile("cp.async.bulk.wait_group %0;" :: "n"(N) : "memory"); }

// L2 prefetch of a box (no smem, no barrier).
template <int R>
PTXB_DEV void tma_prefetch_l2(const CUtensorMap* tmap, const int32_t (&c)[R]) {
  const uint64_t t = tmap_u64(tmap);
  if constexpr (R == 2) {
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];" :: "l"(t), "r"(c[0]), "r"(c[1]) : "memory");
  } else if constexpr (R == 3) {
    asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];"
                 :: "l"(t), "r"(c[0]), "r"(c[1]), "r"(c[2]) : "memory");
  } else if constexpr (R == 4) {
    asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];"
                 :: "l"(t), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]) : "memory");
  } else {
    static_assert(R == 5, "prefetch wrapper: rank 2..5");
    asm volatile("cp.async.bulk.prefetch.tensor.5d.L2.global.tile [%0, {%1, %2, %3, %4, %5}];"
                 :: "l"(t), "r"(c[0]), "r"(c[1]), "r"(c[2]), "r"(c[3]), "r"(c[4]) : "memory");
  }
}

// ---- 1-D bulk copies (no tensor map): bytes and both addresses multiples of 16 ---------------------------
PTXB_DEV void bulk_load_1d(uint32_t dst_smem, const void* src_gmem, uint32_t bytes, uint32_t mbar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"(dst_smem), "l"(src_gmem), "r"(bytes), "r"(mbar) : "memory");
}
PTXB_DEV void bulk_store_1d(void* dst_gmem, uint32_t src_smem, uint32_t bytes) {  // bulk async-group
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
               :: "l"(dst_gmem), "r"(src_smem), "r"(bytes) : "memory");
}

// ---- host: tensor-map encoding through the runtime's driver entry point (no -lcuda link needed) -------
// dims/box are innermost-first; strides_bytes has rank-1 entries (stride of dims 1..rank-1, in bytes).
// Rules: global address 16-B aligned (32-B for interleave), strides multiples of 16 and < 2^40,
// 1 <= box[i] <= 256, box[0]*elem_bytes a multiple of 16 and <= the swizzle span (32/64/128 B) when
// swizzled, rank <= 5.
inline CUresult make_tma_desc(CUtensorMap* map, const void* gaddr, CUtensorMapDataType dtype, uint32_t rank,
                              const uint64_t* dims, const uint64_t* strides_bytes, const uint32_t* box,
                              CUtensorMapSwizzle swizzle,
                              CUtensorMapL2promotion l2 = CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                              CUtensorMapFloatOOBfill oob = CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = nullptr;
  if (encode == nullptr) {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || fn == nullptr)
      return CUDA_ERROR_NOT_FOUND;
    encode = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }
  const cuuint32_t elem_strides[5] = {1, 1, 1, 1, 1};
  return encode(map, dtype, rank, const_cast<void*>(gaddr), dims, strides_bytes, box, elem_strides,
                CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle, l2, oob);
}
// Row-major [rows, cols] bf16 matrix (row stride `ld` elements) with a [box_rows, box_cols] box.
inline CUresult make_tma_desc_2d_bf16(CUtensorMap* map, const void* gaddr, uint64_t rows, uint64_t cols, uint64_t ld,
                                      uint32_t box_rows, uint32_t box_cols, CUtensorMapSwizzle swizzle) {
  const uint64_t dims[2] = {cols, rows};
  const uint64_t strides[1] = {ld * 2};
  const uint32_t box[2] = {box_cols, box_rows};
  return make_tma_desc(map, gaddr, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, dims, strides, box, swizzle);
}
