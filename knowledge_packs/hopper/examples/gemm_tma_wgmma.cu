// GEMM C[M,N] = A[M,K] @ B[N,K]^T (bf16 in/out, fp32 accumulation) for gemm_n7168_k5120, built only
// from the Hopper pack's wrappers: TMA tile loads into a 4-stage mbarrier ring, wgmma m64n256k16 (SS)
// and the pack's accumulator epilogue. TVM-FFI ABI, destination-passing style.
//
// CTA tile 128 x 256 x 64, 384 threads = 3 warpgroups:
//   warpgroup 0: producer (setmaxnreg 24), one elected thread issues the TMA loads;
//   warpgroups 1, 2: consumers (setmaxnreg 240), each owns 64 rows x 256 columns (128 fp32 regs/thread).
// Shared memory per stage: A 128 rows x 128 B (16 KB) + B 256 rows x 128 B (32 KB), 128B-swizzled,
// each tile 1024-B aligned. full[s]: 1 arrival + 48 KB tx; empty[s]: 2 arrivals (one per consumer WG).
//
// For the model-facing prompt the includes below are replaced by the header text
// (ptxcore.prompts.expand_pack_includes); the candidate is the expanded single file.
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

#include "../../common/headers/ptx_sync.cuh"
#include "../../common/headers/ptx_mbarrier.cuh"
#include "../../common/headers/ptx_tma.cuh"
#include "../headers/ptx_gmma_desc.cuh"
#include "../headers/ptx_wgmma.cuh"

namespace pack_gemm {

constexpr int BM = 128, BN = 256, BK = 64, STAGES = 4, GROUP_M = 16;
constexpr int THREADS = 384;
constexpr uint32_t A_TILE_BYTES = BM * BK * 2;                    // 16384
constexpr uint32_t B_TILE_BYTES = BN * BK * 2;                    // 32768
constexpr uint32_t STAGE_BYTES = A_TILE_BYTES + B_TILE_BYTES;     // 49152 = tx per stage
constexpr size_t SMEM_BYTES = (size_t)STAGES * STAGE_BYTES + 1024;  // + slack for 1024-B alignment

#define CHECK_CUDA(expr)                                                                                 \
  do {                                                                                                   \
    cudaError_t err_ = (expr);                                                                           \
    if (err_ != cudaSuccess) TVM_FFI_THROW(RuntimeError) << #expr << ": " << cudaGetErrorString(err_);  \
  } while (0)

// Grouped tile order: GROUP_M consecutive M-tiles sweep all N-tiles, so co-resident CTAs share A and B in L2.
__device__ __forceinline__ void tile_coords(int num_m, int num_n, int& m_tile, int& n_tile) {
  const int bid = blockIdx.x;
  const int per_group = GROUP_M * num_n;
  const int first_m = (bid / per_group) * GROUP_M;
  const int group_m = min(num_m - first_m, GROUP_M);
  m_tile = first_m + (bid % per_group) % group_m;
  n_tile = (bid % per_group) / group_m;
}

__global__ void __launch_bounds__(THREADS, 1)
gemm_tma_wgmma_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                      __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  extern __shared__ uint8_t smem_raw[];
  __shared__ uint64_t full_bar[STAGES];
  __shared__ uint64_t empty_bar[STAGES];

  const uint32_t smem_base = (smem_u32(smem_raw) + 1023u) & ~1023u;
  const uint32_t sA = smem_base;                                 // STAGES x 16 KB
  const uint32_t sB = smem_base + STAGES * A_TILE_BYTES;         // STAGES x 32 KB
  const int num_m = (M + BM - 1) / BM, num_n = (N + BN - 1) / BN;
  const int k_tiles = (K + BK - 1) / BK;
  int m_tile, n_tile;
  tile_coords(num_m, num_n, m_tile, n_tile);

  const uint32_t wg = warpgroup_id_uniform();
  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(smem_u32(&full_bar[s]), 1);
      mbar_init(smem_u32(&empty_bar[s]), 2);
    }
    fence_mbarrier_init_cluster();
  }
  __syncthreads();

  if (wg == 0) {  // ---------------- producer warpgroup ----------------
    setmaxnreg_dec<24>();
    if (warp_id_uniform() == 0 && elect_one_sync()) {
      tma_prefetch_desc(&tmap_a);
      tma_prefetch_desc(&tmap_b);
      PipeState ps{0, 0};
      for (int kt = 0; kt < k_tiles; ++kt) {
        mbar_wait(smem_u32(&empty_bar[ps.stage]), ps.phase ^ 1u);  // first pass returns at once
        const uint32_t full = smem_u32(&full_bar[ps.stage]);
        mbar_arrive_expect_tx(full, STAGE_BYTES);
        const int32_t ca[2] = {kt * BK, m_tile * BM};
        const int32_t cb[2] = {kt * BK, n_tile * BN};
        tma_load<2>(sA + ps.stage * A_TILE_BYTES, &tmap_a, full, ca);
        tma_load<2>(sB + ps.stage * B_TILE_BYTES, &tmap_b, full, cb);
        ps.advance(STAGES);
      }
    }
    return;
  }

  // ---------------- consumer warpgroups 1 and 2 ----------------
  setmaxnreg_inc<240>();
  const int c = static_cast<int>(wg) - 1;  // which 64-row half of the 128-row tile
  float acc[BN / 2];
#pragma unroll
  for (int i = 0; i < BN / 2; ++i) acc[i] = 0.f;

  PipeState ps{0, 0};
  uint32_t prev_stage = 0;
  for (int kt = 0; kt < k_tiles; ++kt) {
    mbar_wait(smem_u32(&full_bar[ps.stage]), ps.phase);
    const uint32_t a_tile = sA + ps.stage * A_TILE_BYTES + c * (64 * 128);  // 64 rows x 128 B
    const uint32_t b_tile = sB + ps.stage * B_TILE_BYTES;
    const uint64_t da = gmma_desc_kmajor(a_tile, GMMA_SWIZZLE_128B);
    const uint64_t db = gmma_desc_kmajor(b_tile, GMMA_SWIZZLE_128B);
    wgmma_fence_acc(acc);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {  // k16 slices: +32 B inside each 128-B swizzled row
      wgmma_m64n256k16_ss<0, 0>(acc, gmma_desc_advance(da, kk * 32), gmma_desc_advance(db, kk * 32), 1);
    }
    wgmma_commit();
    wgmma_fence_acc(acc);
    // Keep this k-tile's MMAs in flight; the previous tile's are complete after wait<1>, so free its stage.
    wgmma_wait<1>();
    wgmma_fence_acc(acc);
    if (kt > 0 && threadIdx.x % 128 == 0) mbar_arrive(smem_u32(&empty_bar[prev_stage]));
    prev_stage = ps.stage;
    ps.advance(STAGES);
  }
  wgmma_wait<0>();
  wgmma_fence_acc(acc);

  wgmma_store_acc_bf16<BN>(acc, C, N, m_tile * BM + c * 64, n_tile * BN, M, N);
}

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const int M = static_cast<int>(A.size(0)), K = static_cast<int>(A.size(1));
  const int N = static_cast<int>(B.size(0));
  if (B.size(1) != K || C.size(0) != M || C.size(1) != N) TVM_FFI_THROW(ValueError) << "shape mismatch";
  if (K % 8 != 0) TVM_FFI_THROW(ValueError) << "TMA needs K * 2 bytes to be a multiple of 16";
  const DLDevice dev = A.device();
  CHECK_CUDA(cudaSetDevice(dev.device_id));
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(dev.device_type, dev.device_id));
  if (M == 0 || N == 0) return;

  CUtensorMap tmap_a, tmap_b;
  CUresult ra = make_tma_desc_2d_bf16(&tmap_a, A.data_ptr(), M, K, K, BM, BK, CU_TENSOR_MAP_SWIZZLE_128B);
  CUresult rb = make_tma_desc_2d_bf16(&tmap_b, B.data_ptr(), N, K, K, BN, BK, CU_TENSOR_MAP_SWIZZLE_128B);
  if (ra != CUDA_SUCCESS || rb != CUDA_SUCCESS)
    TVM_FFI_THROW(RuntimeError) << "cuTensorMapEncodeTiled failed: A=" << (int)ra << " B=" << (int)rb;

  CHECK_CUDA(cudaFuncSetAttribute(gemm_tma_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)SMEM_BYTES));
  const int grid = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  gemm_tma_wgmma_kernel<<<grid, THREADS, SMEM_BYTES, stream>>>(tmap_a, tmap_b,
                                                              static_cast<__nv_bfloat16*>(C.data_ptr()), M, N, K);
  CHECK_CUDA(cudaGetLastError());
}

}  // namespace pack_gemm

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, pack_gemm::run);
