// gemm_n7168_k5120 on Hopper (sm_90a): C[M,N] = A[M,K] @ B[N,K]^T, bf16 in/out, fp32 accumulation.
//
// Warp-specialized TMA + wgmma kernel:
//   * CTA tile 128 x 256, K slice 64 (128-byte rows, TMA SWIZZLE_128B), 4-stage smem ring (192 KiB).
//   * Warpgroup 0 is the producer: one thread issues cp.async.bulk.tensor loads for A and B into the
//     ring, completing on a per-stage "full" mbarrier (expect_tx = stage bytes).
//   * Warpgroups 1 and 2 are consumers: each owns 64 rows of the tile and issues
//     wgmma.mma_async.m64n256k16 (A and B from shared-memory descriptors, both K-major), keeps one
//     wgmma group in flight, and releases a stage on its "empty" mbarrier (one arrival per warp).
//   * setmaxnreg moves registers from the producer (40) to the consumers (232): 128 fp32 accumulators.
//   * Grouped tile order (16 row-tiles per group) for L2 reuse of B.
// The tensor maps are encoded on the host through the driver entry point fetched from the runtime
// (no -lcuda needed to build). TVM-FFI ABI, destination-passing style.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

namespace {

constexpr int BM = 128;
constexpr int BN = 256;
constexpr int BK = 64;                 // 64 bf16 = 128 bytes = one swizzle row
constexpr int STAGES = 4;
constexpr int GROUP_M = 16;            // row-tiles per raster group
constexpr int kConsumerWarps = 8;      // two consumer warpgroups
constexpr int kThreads = 384;          // producer warpgroup + two consumer warpgroups
constexpr int A_STAGE_BYTES = BM * BK * 2;   // 16 KiB
constexpr int B_STAGE_BYTES = BN * BK * 2;   // 32 KiB
constexpr int STAGE_BYTES = A_STAGE_BYTES + B_STAGE_BYTES;
constexpr int SMEM_BYTES = STAGES * STAGE_BYTES + 2 * STAGES * 8 + 1024;  // + barriers + alignment slack

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

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t done = 0;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}\n"
        : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}

__device__ __forceinline__ void tma_load_2d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1) : "memory");
}

// Shared-memory matrix descriptor for a K-major tile written by TMA with SWIZZLE_128B:
// start address >> 4, LBO = 1 (unused for swizzled K-major), SBO = 1024 B (8 rows x 128 B), mode 1 = 128B.
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

// D[64x256] (+)= A[64x16] * B[16x256]; A and B from descriptors, both K-major (no transpose).
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

// ---------------------------------------------------------------- kernel
__global__ void __launch_bounds__(kThreads, 1)
gemm_tma_wgmma_kernel(const __grid_constant__ CUtensorMap tmap_a, const __grid_constant__ CUtensorMap tmap_b,
                      __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  // TMA SWIZZLE_128B and the wgmma descriptors (base offset 0) need 1024-byte aligned stages.
  uint8_t* smem = smem_raw + ((1024 - (smem_u32(smem_raw) & 1023)) & 1023);
  const uint32_t sA = smem_u32(smem);
  const uint32_t sB = sA + STAGES * A_STAGE_BYTES;
  const uint32_t bar_full = sB + STAGES * B_STAGE_BYTES;
  const uint32_t bar_empty = bar_full + STAGES * 8;

  const int tiles_m = (M + BM - 1) / BM;
  const int tiles_n = (N + BN - 1) / BN;
  const int group = GROUP_M * tiles_n;
  const int first_m = (blockIdx.x / group) * GROUP_M;
  const int rows_in_group = min(tiles_m - first_m, GROUP_M);
  const int tile_m = first_m + (blockIdx.x % group) % rows_in_group;
  const int tile_n = (blockIdx.x % group) / rows_in_group;
  const int m0 = tile_m * BM, n0 = tile_n * BN;
  const int k_tiles = (K + BK - 1) / BK;

  const int warpgroup = threadIdx.x / 128;
  const int lane = threadIdx.x % 32;

  if (threadIdx.x == 0) {
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bar_full + 8 * s, 1);
      mbar_init(bar_empty + 8 * s, kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ------------------------------------------------------------ producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x == 0) {
      for (int kt = 0; kt < k_tiles; ++kt) {
        const int s = kt % STAGES;
        if (kt >= STAGES) mbar_wait(bar_empty + 8 * s, ((kt / STAGES) + 1) & 1);
        mbar_expect_tx(bar_full + 8 * s, STAGE_BYTES);
        tma_load_2d(sA + s * A_STAGE_BYTES, &tmap_a, bar_full + 8 * s, kt * BK, m0);
        tma_load_2d(sB + s * B_STAGE_BYTES, &tmap_b, bar_full + 8 * s, kt * BK, n0);
      }
    }
    return;
  }

  // -------------------------------------------------------------- consumers
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int cw = warpgroup - 1;  // 0 or 1: rows [64*cw, 64*cw + 64) of the tile
  float d[128];
#pragma unroll
  for (int i = 0; i < 128; ++i) d[i] = 0.f;

  for (int kt = 0; kt < k_tiles; ++kt) {
    const int s = kt % STAGES;
    mbar_wait(bar_full + 8 * s, (kt / STAGES) & 1);
    const uint64_t da = make_desc_k128(sA + s * A_STAGE_BYTES + cw * 64 * 128);
    const uint64_t db = make_desc_k128(sB + s * B_STAGE_BYTES);
    fence_acc(d);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      // 16 bf16 = 32 bytes further along the swizzled 128-byte row: +2 in 16-byte units.
      wgmma_m64n256k16(d, da + 2 * kk, db + 2 * kk, 1);
    }
    wgmma_commit();
    wgmma_wait<1>();  // the group of iteration kt-1 is complete: its stage can be refilled
    fence_acc(d);
    if (kt > 0 && lane == 0) mbar_arrive(bar_empty + 8 * ((kt - 1) % STAGES));
  }
  wgmma_wait<0>();
  fence_acc(d);

  // -------------------------------------------------------------- epilogue: registers -> global
  const int t = threadIdx.x % 128;
  const int warp = t / 32;
  const int row = m0 + cw * 64 + warp * 16 + lane / 4;
  const int col_base = n0 + 2 * (lane % 4);
#pragma unroll
  for (int i = 0; i < 32; ++i) {
    const int col = col_base + 8 * i;
    if (col < N) {
      if (row < M)
        *reinterpret_cast<__nv_bfloat162*>(C + static_cast<int64_t>(row) * N + col) =
            __floats2bfloat162_rn(d[4 * i + 0], d[4 * i + 1]);
      if (row + 8 < M)
        *reinterpret_cast<__nv_bfloat162*>(C + static_cast<int64_t>(row + 8) * N + col) =
            __floats2bfloat162_rn(d[4 * i + 2], d[4 * i + 3]);
    }
  }
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
CUtensorMap make_kmajor_map(const void* base, uint64_t rows, uint64_t cols, uint32_t box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {cols * sizeof(__nv_bfloat16)};
  const cuuint32_t box[2] = {static_cast<cuuint32_t>(BK), box_rows};
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

}  // namespace

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  check_bf16_2d(A, "A");
  check_bf16_2d(B, "B");
  check_bf16_2d(C, "C");
  const int M = static_cast<int>(A.size(0)), K = static_cast<int>(A.size(1));
  const int N = static_cast<int>(B.size(0));
  TVM_FFI_CHECK(B.size(1) == K && C.size(0) == M && C.size(1) == N, ValueError) << "shape mismatch";
  TVM_FFI_CHECK(K % 8 == 0 && N % 8 == 0, ValueError) << "K and N must be multiples of 8 (16-byte TMA strides)";
  if (M == 0 || N == 0) return;

  const CUtensorMap map_a = make_kmajor_map(A.data_ptr(), M, K, BM);
  const CUtensorMap map_b = make_kmajor_map(B.data_ptr(), N, K, BN);
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(A.device().device_type, A.device().device_id));
  cudaError_t err = cudaFuncSetAttribute(gemm_tma_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "cudaFuncSetAttribute: " << cudaGetErrorString(err);
  const int tiles = ((M + BM - 1) / BM) * ((N + BN - 1) / BN);
  gemm_tma_wgmma_kernel<<<tiles, kThreads, SMEM_BYTES, stream>>>(map_a, map_b, static_cast<__nv_bfloat16*>(C.data_ptr()),
                                                                 M, N, K);
  err = cudaGetLastError();
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "kernel launch: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
