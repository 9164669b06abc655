// Exercises every wrapper of the Blackwell pack (compile-only proof: nvcc + SASS families, no GPU needed).
// tcgen05 cta_group::1 and ::2 may not be mixed in one kernel, so the pair wrappers get their own kernel.
#include <cstdint>
#include <cuda_bf16.h>
#include "../../../knowledge_packs/common/headers/ptx_sync.cuh"
#include "../../../knowledge_packs/common/headers/ptx_mbarrier.cuh"
#include "../../../knowledge_packs/common/headers/ptx_tma.cuh"
#include "../../../knowledge_packs/blackwell/headers/ptx_tcgen05.cuh"
#include "common_exercise.cuh"

__global__ void __launch_bounds__(256, 1) exercise_tcgen05(const __grid_constant__ CUtensorMap tm2,
                                                           __nv_bfloat16* C, int M, int N, float* out) {
  __shared__ alignas(1024) uint8_t buf[49152];
  __shared__ uint64_t bar[2];
  __shared__ uint32_t slot;
  const uint32_t s = smem_u32(buf), b = smem_u32(&bar[0]), b1 = smem_u32(&bar[1]);
  if (threadIdx.x < 32) { tmem_alloc(smem_u32(&slot), 512); tmem_relinquish_alloc_permit(); }
  if (threadIdx.x == 32) { mbar_init(b, 1); mbar_init(b1, 1); fence_mbarrier_init_cluster(); }
  tcgen05_fence_before();
  __syncthreads();
  tcgen05_fence_after();
  const uint32_t base = slot;
  if (threadIdx.x == 64) {
    const int32_t c2[2] = {0, 0};
    mbar_arrive_expect_tx(b, 16384);
    tma_load<2>(s, &tm2, b, c2);
    mbar_wait(b, 0);
    tcgen05_fence_after();
    const uint64_t da = umma_desc_kmajor_sw128(s);
    const uint64_t db = make_umma_smem_desc(s + 16384, 16, 1024, UMMA_SWIZZLE_128B) ^
                        make_umma_smem_desc(s, 16, 512, UMMA_SWIZZLE_64B, 0) ^
                        make_umma_smem_desc(s, 16, 256, UMMA_SWIZZLE_32B) ^
                        make_umma_smem_desc(s, 128, 256, UMMA_SWIZZLE_NONE) ^
                        make_umma_smem_desc(s, 16, 1024, UMMA_SWIZZLE_128B_BASE32B);
    umma_bf16_ss(base, da, db, make_umma_idesc_bf16(128, 256), 0);
    umma_bf16_ss(base + 256, da, da, make_umma_idesc_bf16(64, 8, 1, 1), 1);
    umma_bf16_ts(base, tmem_addr(base, 0, 384), db, make_umma_idesc_bf16(128, 128), 1);
    tmem_cp_128x256b(tmem_addr(base, 0, 448), da);
    tmem_cp_128x128b(tmem_addr(base, 0, 456), da);
    tmem_cp_4x256b(tmem_addr(base, 0, 464), da);
    umma_commit(b1);
    umma_commit_multicast(b1, 0x1);
  }
  mbar_wait(b1, 0);
  tcgen05_fence_after();
  if (threadIdx.x >= 128) {  // epilogue warpgroup: warps 4..7 cover TMEM lane quarters 0..3
    const uint32_t lane0 = 32 * ((threadIdx.x / 32) % 4);
    uint32_t r1[1], r2[2], r4[4], r8[8], r16[16], r32[32], r64[64];
    tmem_ld_32x32b_x1(tmem_addr(base, lane0, 0), r1);
    tmem_ld_32x32b_x2(tmem_addr(base, lane0, 0), r2);
    tmem_ld_32x32b_x4(tmem_addr(base, lane0, 0), r4);
    tmem_ld_32x32b_x8(tmem_addr(base, lane0, 0), r8);
    tmem_ld_32x32b_x16(tmem_addr(base, lane0, 0), r16);
    tmem_ld_32x32b_x32(tmem_addr(base, lane0, 0), r32);
    tmem_ld_32x32b_x64(tmem_addr(base, lane0, 0), r64);
    tmem_wait_ld();
    tmem_st_32x32b_x1(tmem_addr(base, lane0, 320), r1);
    tmem_st_32x32b_x2(tmem_addr(base, lane0, 320), r2);
    tmem_st_32x32b_x4(tmem_addr(base, lane0, 320), r4);
    tmem_st_32x32b_x8(tmem_addr(base, lane0, 320), r8);
    tmem_st_32x32b_x16(tmem_addr(base, lane0, 320), r16);
    tmem_st_32x32b_x32(tmem_addr(base, lane0, 320), r32);
    tmem_st_32x32b_x64(tmem_addr(base, lane0, 320), r64);
    float p[64];
    for (int i = 0; i < 64; ++i) p[i] = __uint_as_float(r64[i]);
    tmem_store_bf16_pairs<32>(base, 384, p);
    tmem_wait_st();
    umma_store_acc_bf16<256>(base, 0, C, N, 0, 0, M, N);
    out[threadIdx.x] = __uint_as_float(r1[0] + r2[1] + r4[3] + r8[7] + r16[15] + r32[31] + r64[63]);
  }
  tcgen05_fence_before();
  __syncthreads();
  tcgen05_fence_after();
  if (threadIdx.x < 32) tmem_dealloc(base, 512);
}

__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(128, 1)
exercise_tcgen05_pair(const __grid_constant__ CUtensorMap tm2, const __grid_constant__ CUtensorMap tm3) {
  __shared__ alignas(1024) uint8_t buf[32768];
  __shared__ uint64_t bar;
  __shared__ uint32_t slot;
  const uint32_t s = smem_u32(buf), b = smem_u32(&bar);
  if (threadIdx.x < 32) { tmem_alloc_2cta(smem_u32(&slot), 256); tmem_relinquish_alloc_permit_2cta(); }
  if (threadIdx.x == 32) { mbar_init(b, 1); fence_mbarrier_init_cluster(); }
  tcgen05_fence_before();
  cluster_sync();
  tcgen05_fence_after();
  const uint32_t rank = cluster_ctarank();
  const uint32_t leader_bar = map_shared_to_rank(b, rank & ~1u);
  if (threadIdx.x == 64) {
    const int32_t c2[2] = {0, 0};
    const int32_t c3[3] = {0, 0, 0};
    if (rank % 2 == 0) mbar_arrive_expect_tx(b, 3 * 16384);
    tma_load_2cta<2>(s, &tm2, leader_bar, c2);
    tma_load_2cta<3>(s, &tm3, leader_bar, c3);
    tma_load_2cta_multicast_2d(s + 16384, &tm2, leader_bar, 0x3, 0, 0);
    if (rank % 2 == 0) {
      mbar_wait(b, 0);
      tcgen05_fence_after();
      umma_bf16_ss_2cta(slot, umma_desc_kmajor_sw128(s), umma_desc_kmajor_sw128(s + 16384),
                        make_umma_idesc_bf16(256, 256), 0);
      umma_commit_2cta_multicast(b, 0x3);
    }
  }
  tcgen05_fence_before();
  cluster_sync();
  tcgen05_fence_after();
  if (threadIdx.x < 32) tmem_dealloc_2cta(slot, 256);
  cluster_sync();
}
