// mha_with_lse_d128_causal on Hopper: FlashAttention-2 style forward with mma.sync (m16n8k16, bf16 -> fp32).
//
// O[b,h,i,:] = softmax(Q K^T / sqrt(D)) V and LSE[b,h,i] = natural-log logsumexp of the scaled scores.
//   * One CTA = 128 query rows of one (batch, head); 8 warps, 16 query rows per warp; D = 128.
//   * Q fragments live in registers; K/V tiles of 64 keys stream through a double-buffered shared
//     ring filled by cp.async (16-byte chunks, XOR-swizzled rows so ldmatrix is bank-conflict free).
//   * Online softmax in the log2 domain (exp2f), P reused from the S accumulators as the A operand.
// Generic tensor-core path (no wgmma/TMA): a correct baseline. TVM-FFI ABI, destination-passing style.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

namespace {

constexpr bool kCausal = true;
constexpr int D = 128;
constexpr int BM = 128;         // query rows per CTA
constexpr int BN = 64;          // keys per tile
constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int TILE_Q = BM * D;  // elements
constexpr int TILE_KV = BN * D;
constexpr int SMEM_BYTES = (TILE_Q + 4 * TILE_KV) * 2;  // Q + 2 x (K, V) = 96 KiB

// Element offset of (row, col) in a [rows][128] bf16 tile whose 16-byte chunks are XOR-swizzled by row % 8.
__device__ __forceinline__ int swz(int row, int col) {
  return row * D + ((((col >> 3) ^ (row & 7))) << 3) + (col & 7);
}

__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;  // 0 source bytes -> zero fill
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_group 0;" ::: "memory"); }

__device__ __forceinline__ void ldsm_x4(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t addr, uint32_t& r0, uint32_t& r1, uint32_t& r2, uint32_t& r3) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3) : "r"(addr));
}

// C[16x8] += A[16x16] * B[16x8], bf16 inputs, fp32 accumulators.
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// Copy rows [row0, row0 + rows) of a [S][128] head into a swizzled tile; rows past S are zero-filled.
__device__ __forceinline__ void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* head, int row0, int rows, int S) {
  for (int c = threadIdx.x; c < rows * (D / 8); c += kThreads) {
    const int r = c / (D / 8), ch = c % (D / 8);
    const bool valid = row0 + r < S;
    const __nv_bfloat16* src = head + static_cast<int64_t>(valid ? row0 + r : 0) * D + ch * 8;
    cp_async_16(smem_u32(tile + swz(r, ch * 8)), src, valid);
  }
}

__global__ void __launch_bounds__(kThreads, 1)
mha_fwd_kernel(const __nv_bfloat16* __restrict__ Q, const __nv_bfloat16* __restrict__ K,
               const __nv_bfloat16* __restrict__ V, __nv_bfloat16* __restrict__ O, float* __restrict__ LSE,
               int S, float scale_log2) {
  extern __shared__ __align__(128) uint8_t smem_raw[];
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* sK = sQ + TILE_Q;        // two buffers of TILE_KV
  __nv_bfloat16* sV = sK + 2 * TILE_KV;   // two buffers of TILE_KV

  const int q_block = kCausal ? (gridDim.x - 1 - blockIdx.x) : blockIdx.x;  // longest causal rows first
  const int q0 = q_block * BM;
  const int64_t head_off = static_cast<int64_t>(blockIdx.y) * S * D;
  const __nv_bfloat16* q_head = Q + head_off;
  const __nv_bfloat16* k_head = K + head_off;
  const __nv_bfloat16* v_head = V + head_off;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;

  const int kv_end = kCausal ? min(S, q0 + BM) : S;
  const int n_tiles = (kv_end + BN - 1) / BN;

  load_tile(sQ, q_head, q0, BM, S);
  load_tile(sK, k_head, 0, BN, S);
  load_tile(sV, v_head, 0, BN, S);
  cp_async_commit();
  cp_async_wait_all();
  __syncthreads();

  // Q fragments of this warp's 16 rows: 8 k-steps of 16 columns.
  uint32_t qf[D / 16][4];
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const int r = warp * 16 + (lane % 16), c = ks * 16 + (lane / 16) * 8;
    ldsm_x4(smem_u32(sQ + swz(r, c)), qf[ks][0], qf[ks][1], qf[ks][2], qf[ks][3]);
  }

  float o[D / 8][4];
#pragma unroll
  for (int n = 0; n < D / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.f;
  float m_row[2] = {-INFINITY, -INFINITY};
  float l_row[2] = {0.f, 0.f};
  const int q_row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};

  for (int j = 0; j < n_tiles; ++j) {
    const int buf = j & 1;
    if (j > 0) {
      cp_async_wait_all();
      __syncthreads();  // tile j landed; every warp is done with tile j-1 (buffer buf ^ 1)
    }
    if (j + 1 < n_tiles) {
      load_tile(sK + (buf ^ 1) * TILE_KV, k_head, (j + 1) * BN, BN, S);
      load_tile(sV + (buf ^ 1) * TILE_KV, v_head, (j + 1) * BN, BN, S);
      cp_async_commit();
    }
    const __nv_bfloat16* kt = sK + buf * TILE_KV;
    const __nv_bfloat16* vt = sV + buf * TILE_KV;
    const int n0 = j * BN;

    // S = Q K^T for 16 rows x 64 keys.
    float s[BN / 8][4];
#pragma unroll
    for (int n = 0; n < BN / 8; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.f;
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
#pragma unroll
      for (int np = 0; np < BN / 16; ++np) {
        const int key = np * 16 + (lane % 8) + (lane / 16) * 8;
        const int col = ks * 16 + ((lane / 8) % 2) * 8;
        uint32_t b0, b1, b2, b3;
        ldsm_x4(smem_u32(kt + swz(key, col)), b0, b1, b2, b3);
        mma_bf16(s[2 * np], qf[ks], b0, b1);
        mma_bf16(s[2 * np + 1], qf[ks], b2, b3);
      }
    }

    // Scale into the log2 domain and mask (causal and keys past S).
    const bool need_mask = (n0 + BN > S) || (kCausal && n0 + BN - 1 > q0 + warp * 16);
#pragma unroll
    for (int n = 0; n < BN / 8; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[n][e] * scale_log2;
        if (need_mask) {
          const int key = n0 + n * 8 + 2 * t + (e & 1);
          const int q = q_row[e >> 1];
          if (key >= S || (kCausal && key > q)) x = -INFINITY;
        }
        s[n][e] = x;
      }
    }

    // Online softmax per row (rows g and g + 8 of the warp; a row is spread over the 4 lanes of a quad).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) mx = fmaxf(mx, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_row[r], mx);
      const float m_use = (m_new == -INFINITY) ? 0.f : m_new;
      const float alpha = exp2f(m_row[r] - m_use);
      m_row[r] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int n = 0; n < BN / 8; ++n) {
        s[n][2 * r] = exp2f(s[n][2 * r] - m_use);
        s[n][2 * r + 1] = exp2f(s[n][2 * r + 1] - m_use);
        sum += s[n][2 * r] + s[n][2 * r + 1];
      }
      l_row[r] = l_row[r] * alpha + sum;
#pragma unroll
      for (int n = 0; n < D / 8; ++n) {
        o[n][2 * r] *= alpha;
        o[n][2 * r + 1] *= alpha;
      }
    }

    // O += P V: the S accumulators of keys [16kk, 16kk + 16) form the A fragment of k-step kk.
#pragma unroll
    for (int kk = 0; kk < BN / 16; ++kk) {
      const uint32_t pa[4] = {pack_bf16(s[2 * kk][0], s[2 * kk][1]), pack_bf16(s[2 * kk][2], s[2 * kk][3]),
                              pack_bf16(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              pack_bf16(s[2 * kk + 1][2], s[2 * kk + 1][3])};
#pragma unroll
      for (int dp = 0; dp < D / 16; ++dp) {
        const int key = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
        const int col = dp * 16 + (lane / 16) * 8;
        uint32_t b0, b1, b2, b3;
        ldsm_x4_t(smem_u32(vt + swz(key, col)), b0, b1, b2, b3);
        mma_bf16(o[2 * dp], pa, b0, b1);
        mma_bf16(o[2 * dp + 1], pa, b2, b3);
      }
    }
  }

  // Epilogue: finish the row sums across the quad, normalize, store O (bf16) and LSE (natural log).
  const float ln2 = 0.69314718055994531f;
  const int64_t lse_off = static_cast<int64_t>(blockIdx.y) * S;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_row[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = 1.f / l;
    const int q = q_row[r];
    if (q < S) {
      __nv_bfloat16* out = O + head_off + static_cast<int64_t>(q) * D + 2 * t;
#pragma unroll
      for (int n = 0; n < D / 8; ++n)
        *reinterpret_cast<__nv_bfloat162*>(out + n * 8) =
            __floats2bfloat162_rn(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
      if (t == 0) LSE[lse_off + q] = (m_row[r] + log2f(l)) * ln2;
    }
  }
}

void check_qkv(const tvm::ffi::TensorView& x, const char* name) {
  TVM_FFI_CHECK(x.ndim() == 4, ValueError) << name << " must be [B, H, S, D]";
  TVM_FFI_CHECK(x.dtype().code == kDLBfloat && x.dtype().bits == 16, TypeError) << name << " must be bfloat16";
  TVM_FFI_CHECK(x.size(3) == D, ValueError) << name << ": head dim must be " << D;
}

}  // namespace

void run(tvm::ffi::TensorView Q, tvm::ffi::TensorView K, tvm::ffi::TensorView V, tvm::ffi::TensorView O,
         tvm::ffi::TensorView LSE) {
  check_qkv(Q, "Q");
  check_qkv(K, "K");
  check_qkv(V, "V");
  check_qkv(O, "O");
  TVM_FFI_CHECK(LSE.dtype().code == kDLFloat && LSE.dtype().bits == 32, TypeError) << "LSE must be float32";
  const int B = static_cast<int>(Q.size(0)), H = static_cast<int>(Q.size(1)), S = static_cast<int>(Q.size(2));
  if (B * H * S == 0) return;
  const float scale_log2 = 1.4426950408889634f / sqrtf(static_cast<float>(D));
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(Q.device().device_type, Q.device().device_id));
  cudaError_t err = cudaFuncSetAttribute(mha_fwd_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "cudaFuncSetAttribute: " << cudaGetErrorString(err);
  dim3 grid((S + BM - 1) / BM, B * H);
  mha_fwd_kernel<<<grid, kThreads, SMEM_BYTES, stream>>>(
      static_cast<const __nv_bfloat16*>(Q.data_ptr()), static_cast<const __nv_bfloat16*>(K.data_ptr()),
      static_cast<const __nv_bfloat16*>(V.data_ptr()), static_cast<__nv_bfloat16*>(O.data_ptr()),
      static_cast<float*>(LSE.data_ptr()), S, scale_log2);
  err = cudaGetLastError();
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "kernel launch: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
