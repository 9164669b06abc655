// Exercises every wrapper of the Hopper pack (compile-only proof: nvcc + SASS families, no GPU needed).
// tests/knowledge_packs/test_pack_headers.py checks that every wrapper name in the pack headers is called here.
#include <cstdint>
#include <cuda_bf16.h>
#include "../../../knowledge_packs/common/headers/ptx_sync.cuh"
#include "../../../knowledge_packs/common/headers/ptx_mbarrier.cuh"
#include "../../../knowledge_packs/common/headers/ptx_tma.cuh"
#include "../../../knowledge_packs/hopper/headers/ptx_gmma_desc.cuh"
#include "../../../knowledge_packs/hopper/headers/ptx_wgmma.cuh"

#include "common_exercise.cuh"

__global__ void __launch_bounds__(128, 1) exercise_wgmma(float* out, __nv_bfloat16* C, int M, int N) {
  __shared__ alignas(1024) uint8_t buf[65536];
  const uint32_t s = smem_u32(buf);
  const uint64_t da = gmma_desc_kmajor(s, GMMA_SWIZZLE_128B);
  const uint64_t db = gmma_desc_advance(gmma_desc_mnmajor(s + 32768, 8192, 1024, GMMA_SWIZZLE_128B), 32);
  const uint64_t d64 = gmma_desc_kmajor(s, GMMA_SWIZZLE_64B) ^ gmma_desc_kmajor(s, GMMA_SWIZZLE_32B) ^
                       gmma_desc_noswizzle(s, 128, 256) ^ make_gmma_desc(s, 16, 1024, GMMA_SWIZZLE_128B, 0);
  out[1] = (float)(d64 & 0xff) + (float)swizzle_offset(threadIdx.x * 16, GMMA_SWIZZLE_128B);
  uint32_t a[4] = {0, 0, 0, 0};
  float sum = 0.f;
  { float acc[4]; zero(acc); wgmma_fence(); wgmma_m64n8k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n8k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n8k16_rs<0>(acc, a, db, 1); wgmma_m64n8k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[3]; }
  { float acc[8]; zero(acc); wgmma_fence(); wgmma_m64n16k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n16k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n16k16_rs<0>(acc, a, db, 1); wgmma_m64n16k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[7]; }
  { float acc[12]; zero(acc); wgmma_fence(); wgmma_m64n24k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n24k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n24k16_rs<0>(acc, a, db, 1); wgmma_m64n24k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[11]; }
  { float acc[16]; zero(acc); wgmma_fence(); wgmma_m64n32k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n32k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n32k16_rs<0>(acc, a, db, 1); wgmma_m64n32k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[15]; }
  { float acc[20]; zero(acc); wgmma_fence(); wgmma_m64n40k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n40k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n40k16_rs<0>(acc, a, db, 1); wgmma_m64n40k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[19]; }
  { float acc[24]; zero(acc); wgmma_fence(); wgmma_m64n48k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n48k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n48k16_rs<0>(acc, a, db, 1); wgmma_m64n48k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[23]; }
  { float acc[28]; zero(acc); wgmma_fence(); wgmma_m64n56k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n56k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n56k16_rs<0>(acc, a, db, 1); wgmma_m64n56k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[27]; }
  { float acc[32]; zero(acc); wgmma_fence(); wgmma_m64n64k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n64k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n64k16_rs<0>(acc, a, db, 1); wgmma_m64n64k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[31]; }
  { float acc[36]; zero(acc); wgmma_fence(); wgmma_m64n72k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n72k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n72k16_rs<0>(acc, a, db, 1); wgmma_m64n72k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[35]; }
  { float acc[40]; zero(acc); wgmma_fence(); wgmma_m64n80k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n80k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n80k16_rs<0>(acc, a, db, 1); wgmma_m64n80k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[39]; }
  { float acc[44]; zero(acc); wgmma_fence(); wgmma_m64n88k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n88k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n88k16_rs<0>(acc, a, db, 1); wgmma_m64n88k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[43]; }
  { float acc[48]; zero(acc); wgmma_fence(); wgmma_m64n96k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n96k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n96k16_rs<0>(acc, a, db, 1); wgmma_m64n96k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[47]; }
  { float acc[52]; zero(acc); wgmma_fence(); wgmma_m64n104k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n104k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n104k16_rs<0>(acc, a, db, 1); wgmma_m64n104k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[51]; }
  { float acc[56]; zero(acc); wgmma_fence(); wgmma_m64n112k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n112k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n112k16_rs<0>(acc, a, db, 1); wgmma_m64n112k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[55]; }
  { float acc[60]; zero(acc); wgmma_fence(); wgmma_m64n120k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n120k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n120k16_rs<0>(acc, a, db, 1); wgmma_m64n120k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[59]; }
  { float acc[64]; zero(acc); wgmma_fence(); wgmma_m64n128k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n128k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n128k16_rs<0>(acc, a, db, 1); wgmma_m64n128k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[63]; }
  { float acc[68]; zero(acc); wgmma_fence(); wgmma_m64n136k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n136k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n136k16_rs<0>(acc, a, db, 1); wgmma_m64n136k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[67]; }
  { float acc[72]; zero(acc); wgmma_fence(); wgmma_m64n144k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n144k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n144k16_rs<0>(acc, a, db, 1); wgmma_m64n144k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[71]; }
  { float acc[76]; zero(acc); wgmma_fence(); wgmma_m64n152k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n152k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n152k16_rs<0>(acc, a, db, 1); wgmma_m64n152k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[75]; }
  { float acc[80]; zero(acc); wgmma_fence(); wgmma_m64n160k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n160k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n160k16_rs<0>(acc, a, db, 1); wgmma_m64n160k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[79]; }
  { float acc[84]; zero(acc); wgmma_fence(); wgmma_m64n168k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n168k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n168k16_rs<0>(acc, a, db, 1); wgmma_m64n168k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[83]; }
  { float acc[88]; zero(acc); wgmma_fence(); wgmma_m64n176k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n176k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n176k16_rs<0>(acc, a, db, 1); wgmma_m64n176k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[87]; }
  { float acc[92]; zero(acc); wgmma_fence(); wgmma_m64n184k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n184k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n184k16_rs<0>(acc, a, db, 1); wgmma_m64n184k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[91]; }
  { float acc[96]; zero(acc); wgmma_fence(); wgmma_m64n192k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n192k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n192k16_rs<0>(acc, a, db, 1); wgmma_m64n192k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[95]; }
  { float acc[100]; zero(acc); wgmma_fence(); wgmma_m64n200k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n200k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n200k16_rs<0>(acc, a, db, 1); wgmma_m64n200k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[99]; }
  { float acc[104]; zero(acc); wgmma_fence(); wgmma_m64n208k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n208k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n208k16_rs<0>(acc, a, db, 1); wgmma_m64n208k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[103]; }
  { float acc[108]; zero(acc); wgmma_fence(); wgmma_m64n216k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n216k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n216k16_rs<0>(acc, a, db, 1); wgmma_m64n216k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[107]; }
  { float acc[112]; zero(acc); wgmma_fence(); wgmma_m64n224k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n224k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n224k16_rs<0>(acc, a, db, 1); wgmma_m64n224k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[111]; }
  { float acc[116]; zero(acc); wgmma_fence(); wgmma_m64n232k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n232k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n232k16_rs<0>(acc, a, db, 1); wgmma_m64n232k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[115]; }
  { float acc[120]; zero(acc); wgmma_fence(); wgmma_m64n240k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n240k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n240k16_rs<0>(acc, a, db, 1); wgmma_m64n240k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[119]; }
  { float acc[124]; zero(acc); wgmma_fence(); wgmma_m64n248k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n248k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n248k16_rs<0>(acc, a, db, 1); wgmma_m64n248k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[123]; }
  { float acc[128]; zero(acc); wgmma_fence(); wgmma_m64n256k16_ss<0, 0>(acc, da, db, 0); wgmma_m64n256k16_ss<1, 1>(acc, da, db, 1); wgmma_m64n256k16_rs<0>(acc, a, db, 1); wgmma_m64n256k16_rs<1>(acc, a, db, 1); wgmma_commit(); wgmma_wait<0>(); wgmma_fence_acc(acc); sum += acc[127]; }
  // attention helpers and epilogues on a 64 x 128 accumulator
  float acc[64];
  zero(acc);
  wgmma_fence();
  wgmma_m64n128k16_ss(acc, da, db, 0);
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_acc(acc);
  float mx[2], sm[2];
  wgmma_acc_row_max<128>(acc, mx);
  wgmma_acc_row_sum<128>(acc, sm);
  wgmma_acc_scale_rows<128>(acc, sm);
  wgmma_acc_to_afrag<128>(acc, 1, a);
  wgmma_fence_regs(a);
  wgmma_fence();
  wgmma_m64n128k16_rs<1>(acc, a, db, 1);
  wgmma_commit();
  wgmma_wait<0>();
  wgmma_fence_acc(acc);
  wgmma_store_acc_bf16<128>(acc, C, N, 0, 0, M, N);
  wgmma_store_acc_bf16_smem_sw128<128>(acc, s);
  out[0] = sum + mx[0] + mx[1];
}
