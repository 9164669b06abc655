// gemm_n7168_k5120 on Hopper (sm_90a): C[M,N] = A[M,K] @ B[N,K]^T, bf16 in/out, fp32 accumulation.
// wgmma_tma_persistent.cu beside it (persistent, warp-specialized TMA + wgmma, 128 x 256 tiles, 2-CTA clusters
// multicasting B, 4-stage ring, TMA-store epilogue; its design and barrier comments hold here) with one change:
// the epilogue overlaps the next tile's mainloop. After a tile's last wgmma the consumers only pack the
// accumulators to bf16 pairs (64 registers beside the 128 accumulators) and start the next tile at once;
// epilogue chunk c (stmatrix -> 8 KiB staging box -> TMA store) runs right after the wgmmas of the next tile's
// k-step c are issued (c = 0..3), so the tensor pipe no longer idles through four serialized store-and-wait
// chunks per tile. The CTA's last tile is stored after its mainloop. Staging-buffer and barrier protocol as
// before (checked on the CPU: research/kernels/gemm_n7168_k5120/check_overlap.py).
// Judged on the H200 (judge_batch, the default protocol, 2026-12-04): PASSED, target executed, 1.001x and
// 1.003x cuBLAS in two calls (0.7515 / 0.7503 ms against 0.7525), wgmma_tma_persistent.cu 0.991x in both.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

namespace {

constexpr int kClusterM = 2;           // 1: plain persistent kernel; 2: CTA pairs along M multicast B
constexpr int BM = 128;
constexpr int BN = 256;
constexpr int BK = 64;                 // 64 bf16 = 128 bytes = one swizzle row
constexpr int STAGES = 4;
constexpr int GROUP_M = 16;            // m-tiles per raster group (a multiple of kClusterM)
constexpr int kConsumerWarps = 8;      // two consumer warpgroups
constexpr int kThreads = 384;          // producer warpgroup + two consumer warpgroups
constexpr int A_STAGE_BYTES = BM * BK * 2;                  // 16 KiB
constexpr int B_STAGE_BYTES = BN * BK * 2;                  // 32 KiB
constexpr int B_SLICE_ROWS = BN / kClusterM;                // rows of B each CTA of a cluster loads
constexpr int B_SLICE_BYTES = B_SLICE_ROWS * BK * 2;
constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES;  // bytes landing in one CTA per stage
constexpr int EPI_COLS = 64;                                // staging box: 64 rows x 64 columns
constexpr int EPI_BUF_BYTES = 64 * EPI_COLS * 2;            // 8 KiB
constexpr int EPI_BYTES = 2 * 2 * EPI_BUF_BYTES;            // 2 consumer warpgroups x 2 buffers
constexpr int EMPTY_ARRIVALS = kConsumerWarps * kClusterM;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + EPI_BYTES + 2 * STAGES * 8 + 1024;
static_assert(SMEM_BYTES <= 232448, "over the sm_90 shared-memory opt-in limit");
static_assert(GROUP_M % kClusterM == 0 && BN % kClusterM == 0 && BN % EPI_COLS == 0, "tiling");

// ---------------------------------------------------------------- PTX wrappers
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count));
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Arrive on the barrier at offset `bar` of CTA `rank` of the cluster (own rank included). Default semantics
// (release, CTA scope), as CUTLASS's ClusterBarrier::arrive(cta_id): the arrival only publishes "the wgmma
// reads of this stage retired" (wait_group came first), no data. `.release.cluster` would cost a
// MEMBAR.ALL.GPU per arrival in the consumer loop (seen in the SASS).
__device__ __forceinline__ void mbar_arrive_cluster(uint32_t bar, uint32_t rank) {
  asm volatile("{\n .reg .b32 ra;\n mapa.shared::cluster.u32 ra, %0, %1;\n"
               " mbarrier.arrive.shared::cluster.b64 _, [ra];\n}" ::"r"(bar), "r"(rank) : "memory");
}
__device__ __forceinline__ void mbar_arrive_local(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// CTA-scope acquire also for the producer's wait on remote arrivals (as CUTLASS's ClusterBarrier::wait):
// `.acquire.cluster` adds an L1 invalidate (CCTL.IVALL) per wait and orders nothing this kernel needs.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  asm volatile("{\n .reg .pred p;\n W_%=:\n mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
               " @!p bra W_%=;\n}" ::"r"(bar), "r"(parity) : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
               ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1) : "memory");
}
// The box lands at offset `dst` and signals the barrier at offset `bar` in every CTA of `mask`.
__device__ __forceinline__ void tma_load_2d_mc(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1,
                                               uint16_t mask) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster"
               " [%0], [%1, {%4, %5}], [%2], %3;"
               ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "h"(mask), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void tma_store_2d(const CUtensorMap* map, uint32_t src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%2, %3}], [%1];"
               ::"l"(reinterpret_cast<uint64_t>(map)), "r"(src), "r"(c0), "r"(c1) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait_read0() { asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory"); }
__device__ __forceinline__ void bulk_wait0() { asm volatile("cp.async.bulk.wait_group 0;" ::: "memory"); }
__device__ __forceinline__ void prefetch_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}
__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
__device__ __forceinline__ void named_bar_sync(uint32_t id, uint32_t n) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory");
}
__device__ __forceinline__ void cluster_sync_all() {
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
}
__device__ __forceinline__ uint32_t cluster_rank() {
  uint32_t r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {  // lo -> bits 0..15 (lower column)
  uint32_t r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};"
               ::"r"(addr), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
}
// K-major SWIZZLE_128B tile descriptor: start >> 4, LBO 1 (unused), SBO 1024 B (8 rows x 128 B), mode 128B.
__device__ __forceinline__ uint64_t make_desc_k128(uint32_t smem_addr) {
  return static_cast<uint64_t>((smem_addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// Keep the compiler from moving accumulator reads/writes across wgmma fences and waits.
__device__ __forceinline__ void fence_acc(float (&d)[128]) {
#pragma unroll
  for (int i = 0; i < 128; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
// D[64x256] (scale_d ? D : 0) + A[64x16] * B[256x16]^T; A and B from descriptors, both K-major.
__device__ __forceinline__ void wgmma_m64n256k16(float (&d)[128], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63,"
      "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79,"
      "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95,"
      "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111,"
      "%112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127"
      "}, %128, %129, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]),
        "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]),
        "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]),
        "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]),
        "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]),
        "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]),
        "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),
        "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]),
        "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// Unit u (a kClusterM*BM x BN block of C) -> (unit row um, tile column tn): grouped raster, GROUP_M/kClusterM
// unit rows per group, column-major inside a group (check_schedule.py ports this line for line).
__device__ __forceinline__ void unit_coords(int u, int units_m, int units_n, int& um, int& tn) {
  constexpr int G = GROUP_M / kClusterM;
  const int group = G * units_n;
  const int first = (u / group) * G;
  const int rows = min(units_m - first, G);
  const int r = u % group;
  um = first + r % rows;
  tn = r / rows;
}

// ---------------------------------------------------------------- kernel
__global__ void __launch_bounds__(kThreads, 1)
gemm_persistent_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                       const __grid_constant__ CUtensorMap tmap_c, int M, int N, int K) {
  constexpr bool kCluster = kClusterM > 1;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // SWIZZLE_128B (TMA, wgmma base offset 0, staging) needs 1024-byte aligned tiles. Same pad in every CTA.
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const uint32_t sA = smem_u32(smem);
  const uint32_t sB = sA + STAGES * A_STAGE_BYTES;
  const uint32_t sEpi = sB + STAGES * B_STAGE_BYTES;
  const uint32_t bar_full = sEpi + EPI_BYTES;
  const uint32_t bar_empty = bar_full + STAGES * 8;

  const int tiles_n = (N + BN - 1) / BN;
  const int units_m = ((M + BM - 1) / BM + kClusterM - 1) / kClusterM;
  const int num_units = units_m * tiles_n;
  const int k_tiles = (K + BK - 1) / BK;  // >= 1 (host checks K > 0)
  const int rank = kCluster ? static_cast<int>(cluster_rank()) : 0;
  const int cid = blockIdx.x / kClusterM;  // cluster dims (kClusterM, 1, 1): ranks are consecutive blockIdx.x
  const int nclusters = gridDim.x / kClusterM;
  const int warpgroup = __shfl_sync(0xffffffffu, threadIdx.x / 128, 0);
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bar_full + 8 * s, 1);
      mbar_init(bar_empty + 8 * s, EMPTY_ARRIVALS);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if constexpr (kCluster) cluster_sync_all();  // the peer may multicast into / arrive on our barriers
  else __syncthreads();

  if (warpgroup == 0) {
    // ------------------------------------------------------------ producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x == 0) {
      prefetch_map(&tmap_a);
      prefetch_map(&tmap_b);
      prefetch_map(&tmap_c);
      uint32_t stage = 0, phase = 0;
      for (int u = cid; u < num_units; u += nclusters) {
        int um, tn;
        unit_coords(u, units_m, tiles_n, um, tn);
        const int m0 = (um * kClusterM + rank) * BM, n0 = tn * BN;
        for (int kt = 0; kt < k_tiles; ++kt) {
          const uint32_t full = bar_full + 8 * stage;
          mbar_wait(bar_empty + 8 * stage, phase ^ 1);  // every consumer warp of the cluster freed it
          mbar_expect_tx(full, STAGE_BYTES);
          tma_load_2d(sA + stage * A_STAGE_BYTES, &tmap_a, full, kt * BK, m0);
          if constexpr (kCluster) {
            tma_load_2d_mc(sB + stage * B_STAGE_BYTES + rank * B_SLICE_BYTES, &tmap_b, full, kt * BK,
                           n0 + rank * B_SLICE_ROWS, static_cast<uint16_t>((1u << kClusterM) - 1));
          } else {
            tma_load_2d(sB + stage * B_STAGE_BYTES, &tmap_b, full, kt * BK, n0);
          }
          if (++stage == STAGES) { stage = 0; phase ^= 1; }
        }
      }
    }
    __syncwarp();
    if constexpr (kCluster) cluster_sync_all();
    return;
  }

  // -------------------------------------------------------------- consumers
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int cw = warpgroup - 1;  // rows [64*cw, 64*cw + 64) of the tile
  const int t = threadIdx.x % 128;
  const int warp = t / 32;
  // stmatrix.x4 lane roles: lanes 8q..8q+7 address the rows of matrix q; matrices 0/1 = rows 0-7 / 8-15 of
  // the warp's 16 rows at column block i, 2/3 = the same rows at column block i+1.
  const int st_row = warp * 16 + (lane & 7) + 8 * ((lane >> 3) & 1);  // row in the 64-row staging box
  const uint32_t st_hi = static_cast<uint32_t>(lane >> 4);            // +1 column block (16 B) for q >= 2
  const uint32_t st_xor = static_cast<uint32_t>(lane & 7);            // == st_row % 8: 128B swizzle phase
  const uint32_t epi = sEpi + cw * 2 * EPI_BUF_BYTES;
  float d[128];  // zeroed once so that no wgmma reads undefined values; each tile starts with scale-d 0
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;
  // The previous tile's result as bf16 pairs (pk[j] = columns 2j, 2j+1 of the fragment), stored chunk by
  // chunk while the wgmmas of the next tile's first k-steps run; pending says pk holds an unstored tile.
  uint32_t pk[64];
#pragma unroll
  for (int j = 0; j < 64; ++j) pk[j] = 0u;
  bool pending = false;
  int pm0 = 0, pn0 = 0;  // origin of the pending tile
  uint32_t stage = 0, phase = 0;

  // Epilogue chunk c (columns [64c, 64c+64) of the pending tile): pk -> stmatrix -> staging buffer c & 1 ->
  // TMA store. Buffer protocol as before: before this chunk's barrier the issuing thread waits until every
  // earlier store has read its buffer, so after the barrier buffer (c+1) & 1 is free for chunk c+1.
  auto epi_chunk = [&](int c) {
    const uint32_t buf = epi + (c & 1) * EPI_BUF_BYTES;
#pragma unroll
    for (int p = 0; p < EPI_COLS / 16; ++p) {
      const int j = 16 * c + 4 * p;          // pk index of accumulator column block 8c + 2p
      const uint32_t chunk = 2 * p + st_hi;  // 16-byte chunk of the 128-byte staging row
      stmatrix_x4(buf + st_row * 128 + ((chunk ^ st_xor) << 4), pk[j], pk[j + 1], pk[j + 2], pk[j + 3]);
    }
    fence_proxy_async_smem();       // generic-proxy writes -> visible to the TMA store
    if (t == 0) bulk_wait_read0();  // every earlier store has read its buffer
    named_bar_sync(1 + cw, 128);
    if (t == 0) {
      tma_store_2d(&tmap_c, buf, pn0 + c * EPI_COLS, pm0 + cw * 64);  // rows >= M / cols >= N are clipped
      bulk_commit();
    }
  };

  for (int u = cid; u < num_units; u += nclusters) {
    int um, tn;
    unit_coords(u, units_m, tiles_n, um, tn);
    const int m0 = (um * kClusterM + rank) * BM, n0 = tn * BN;
    uint32_t prev = 0;
    auto issue = [&](int kt) {
      mbar_wait(bar_full + 8 * stage, phase);
      const uint64_t da = make_desc_k128(sA + stage * A_STAGE_BYTES + cw * 64 * 128);
      const uint64_t db = make_desc_k128(sB + stage * B_STAGE_BYTES);
      fence_acc(d);
      wgmma_fence();
      wgmma_m64n256k16(d, da, db, kt > 0);  // the tile's first k-step overwrites the accumulators
#pragma unroll
      for (int kk = 1; kk < BK / 16; ++kk) wgmma_m64n256k16(d, da + 2 * kk, db + 2 * kk, 1);  // +32 B in K
      wgmma_commit();
    };
    auto retire = [&](int kt) {
      wgmma_wait<1>();  // the group of step kt-1 retired: its stage can be refilled
      fence_acc(d);
      if (kt > 0 && lane == 0) {
#pragma unroll
        for (int r = 0; r < kClusterM; ++r) {
          if constexpr (kCluster) mbar_arrive_cluster(bar_empty + 8 * prev, r);
          else mbar_arrive_local(bar_empty + 8 * prev);
        }
      }
      prev = stage;
      if (++stage == STAGES) { stage = 0; phase ^= 1; }
    };
    // First BN / EPI_COLS k-steps: one epilogue chunk of the previous tile after each step's wgmmas are
    // issued (the tensor pipe works on them meanwhile; pk and d are distinct registers).
    int kt = 0;
#pragma unroll
    for (int c = 0; c < BN / EPI_COLS; ++c) {
      const bool step = kt < k_tiles;
      if (step) issue(kt);
      if (pending) epi_chunk(c);
      if (step) { retire(kt); ++kt; }
    }
    for (; kt < k_tiles; ++kt) {
      issue(kt);
      retire(kt);
    }
    wgmma_wait<0>();
    fence_acc(d);
    if (lane == 0) {  // release the tile's last stage: the producer runs ahead
#pragma unroll
      for (int r = 0; r < kClusterM; ++r) {
        if constexpr (kCluster) mbar_arrive_cluster(bar_empty + 8 * prev, r);
        else mbar_arrive_local(bar_empty + 8 * prev);
      }
    }
#pragma unroll
    for (int j = 0; j < 64; ++j) pk[j] = pack_bf16(d[2 * j], d[2 * j + 1]);
    pending = true;
    pm0 = m0;
    pn0 = n0;
  }
  if (pending) {  // the CTA's last tile: nothing left to overlap with
#pragma unroll
    for (int c = 0; c < BN / EPI_COLS; ++c) epi_chunk(c);
  }
  if (t == 0) bulk_wait0();
  __syncwarp();
  if constexpr (kCluster) cluster_sync_all();
}

// ---------------------------------------------------------------- host side
PFN_cuTensorMapEncodeTiled_v12000 get_encode_fn() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = nullptr;
  if (fn == nullptr) {
    void* ptr = nullptr;
    cudaDriverEntryPointQueryResult qres;
    cudaError_t err = cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &ptr, 12000, cudaEnableDefault, &qres);
    if (err != cudaSuccess || qres != cudaDriverEntryPointSuccess || ptr == nullptr) {
      TVM_FFI_THROW(RuntimeError) << "cannot resolve cuTensorMapEncodeTiled from the driver";
    }
    fn = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(ptr);
  }
  return fn;
}

// 2-D row-major bf16 matrix [rows, cols] (cols contiguous), box = box_rows x 64 columns, 128B swizzle.
CUtensorMap make_map(const void* base, uint64_t rows, uint64_t cols, uint32_t box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {cols * sizeof(__nv_bfloat16)};
  const cuuint32_t box[2] = {64u, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  CUresult res = get_encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides,
                                 box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (res != CUDA_SUCCESS) TVM_FFI_THROW(RuntimeError) << "cuTensorMapEncodeTiled failed with code " << res;
  return map;
}

void check_bf16_2d(const tvm::ffi::TensorView& t, const char* name) {
  TVM_FFI_CHECK(t.ndim() == 2, ValueError) << name << " must be 2-D";
  TVM_FFI_CHECK(t.dtype().code == kDLBfloat && t.dtype().bits == 16, TypeError) << name << " must be bfloat16";
}

void fill_cluster_attr(cudaLaunchAttribute* attr) {
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = kClusterM;
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
}

// Resident CTAs of this kernel on `device` (a multiple of kClusterM), computed once per device; also sets
// the shared-memory opt-in there.
int resident_ctas(int device) {
  static int cached[64] = {};
  if (device < 0 || device >= 64) TVM_FFI_THROW(RuntimeError) << "device id out of range";
  if (cached[device] > 0) return cached[device];
  cudaError_t err = cudaFuncSetAttribute(gemm_persistent_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "cudaFuncSetAttribute: " << cudaGetErrorString(err);
  int sms = 0;
  err = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (err != cudaSuccess || sms <= 0) TVM_FFI_THROW(RuntimeError) << "cudaDeviceGetAttribute: " << cudaGetErrorString(err);
  int ctas = sms;
  if (kClusterM > 1) {
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    fill_cluster_attr(&attr[0]);
    cfg.gridDim = dim3((sms / kClusterM) * kClusterM);
    cfg.blockDim = dim3(kThreads);
    cfg.dynamicSmemBytes = SMEM_BYTES;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
    int clusters = 0;
    err = cudaOccupancyMaxActiveClusters(&clusters, gemm_persistent_kernel, &cfg);
    if (err != cudaSuccess || clusters <= 0)
      TVM_FFI_THROW(RuntimeError) << "cudaOccupancyMaxActiveClusters: " << cudaGetErrorString(err);
    ctas = clusters * kClusterM;
  }
  cached[device] = ctas;
  return ctas;
}

}  // namespace

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  check_bf16_2d(A, "A");
  check_bf16_2d(B, "B");
  check_bf16_2d(C, "C");
  const int M = static_cast<int>(A.size(0)), K = static_cast<int>(A.size(1));
  const int N = static_cast<int>(B.size(0));
  TVM_FFI_CHECK(B.size(1) == K && C.size(0) == M && C.size(1) == N, ValueError) << "shape mismatch";
  TVM_FFI_CHECK(K > 0 && K % 8 == 0 && N % 8 == 0, ValueError) << "K and N must be positive multiples of 8 (16-byte TMA strides)";
  if (M == 0 || N == 0) return;

  const CUtensorMap map_a = make_map(A.data_ptr(), M, K, BM);
  const CUtensorMap map_b = make_map(B.data_ptr(), N, K, B_SLICE_ROWS);
  const CUtensorMap map_c = make_map(C.data_ptr(), M, N, 64);
  const int device = A.device().device_id;
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(A.device().device_type, device));
  const int units = (((M + BM - 1) / BM + kClusterM - 1) / kClusterM) * ((N + BN - 1) / BN);
  const int clusters = resident_ctas(device) / kClusterM;
  const int grid = kClusterM * (clusters < units ? clusters : units);

  cudaLaunchConfig_t cfg = {};
  cudaLaunchAttribute attr[1];
  fill_cluster_attr(&attr[0]);
  cfg.gridDim = dim3(grid);
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = SMEM_BYTES;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = kClusterM > 1 ? 1 : 0;
  cudaError_t err = cudaLaunchKernelEx(&cfg, gemm_persistent_kernel, map_a, map_b, map_c, M, N, K);
  if (err == cudaSuccess) err = cudaGetLastError();
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "kernel launch: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
