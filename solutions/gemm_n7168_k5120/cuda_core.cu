// A correct, plain CUDA-core GEMM for gemm_n7168_k5120: C[M,N] = A[M,K] @ B[N,K]^T (bf16 in/out,
// fp32 accumulation). 64x64 tiles, 256 threads, each thread 4x4 outputs. No tensor cores, no PTX:
// the static SASS verdict for Hopper is `absent`. TVM-FFI ABI, destination-passing style.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

namespace {

constexpr int TILE = 64;
constexpr int KTILE = 16;

__global__ void gemm_nt_kernel(const __nv_bfloat16* __restrict__ A, const __nv_bfloat16* __restrict__ B,
                               __nv_bfloat16* __restrict__ C, int M, int N, int K) {
  __shared__ float As[KTILE][TILE + 1];
  __shared__ float Bs[KTILE][TILE + 1];
  const int tx = threadIdx.x % 16, ty = threadIdx.x / 16;
  const int row0 = blockIdx.y * TILE, col0 = blockIdx.x * TILE;
  float acc[4][4] = {};
  for (int k0 = 0; k0 < K; k0 += KTILE) {
    for (int i = threadIdx.x; i < TILE * KTILE; i += blockDim.x) {
      const int r = i / KTILE, c = i % KTILE;
      const int gr = row0 + r, gc = col0 + r, gk = k0 + c;
      As[c][r] = (gr < M && gk < K) ? __bfloat162float(A[(int64_t)gr * K + gk]) : 0.f;
      Bs[c][r] = (gc < N && gk < K) ? __bfloat162float(B[(int64_t)gc * K + gk]) : 0.f;
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < KTILE; ++kk) {
      float a[4], b[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        a[i] = As[kk][ty * 4 + i];
        b[i] = Bs[kk][tx * 4 + i];
      }
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const int r = row0 + ty * 4 + i, c = col0 + tx * 4 + j;
      if (r < M && c < N) C[(int64_t)r * N + c] = __float2bfloat16(acc[i][j]);
    }
}

}  // namespace

void run(tvm::ffi::TensorView A, tvm::ffi::TensorView B, tvm::ffi::TensorView C) {
  const int M = static_cast<int>(A.size(0)), K = static_cast<int>(A.size(1));
  const int N = static_cast<int>(B.size(0));
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(A.device().device_type, A.device().device_id));
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  gemm_nt_kernel<<<grid, 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(A.data_ptr()),
                                           static_cast<const __nv_bfloat16*>(B.data_ptr()),
                                           static_cast<__nv_bfloat16*>(C.data_ptr()), M, N, K);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
