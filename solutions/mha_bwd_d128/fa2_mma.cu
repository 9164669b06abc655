// mha_bwd_d128 on Hopper: FlashAttention-2 style backward with mma.sync (m16n8k16, bf16 -> fp32).
//
// Given Q, K, V, O, dO and the natural-log LSE L of the forward (scale = 1/sqrt(D)):
//   P = exp(Q K^T scale - L), Dlt = rowsum(dO * O), dS = P * (dO V^T - Dlt),
//   dV = P^T dO, dK = dS^T Q scale, dQ = dS K scale.
// Three kernels on the caller's stream:
//   1. bwd_delta : Dlt[b,h,i] = sum_d dO * O (fp32 scratch from cudaMallocAsync, freed on the stream).
//   2. bwd_dkdv  : one CTA per 64 keys; walks the query tiles, recomputes S^T = K Q^T and P^T, and
//                  accumulates dV += P^T dO and dK += dS^T Q in registers (no atomics).
//   3. bwd_dq    : one CTA per 64 queries; walks the key tiles, recomputes P and dS, dQ += dS K.
// 4 warps per CTA, 16 rows per warp; tiles are streamed by cp.async into XOR-swizzled shared memory
// (double-buffered) and read with ldmatrix. Generic tensor-core path (no wgmma/TMA).
// Precision: dS is fed to the tensor cores as hi = bf16(dS) plus, for a warp's 16 x 64 tile holding some
// |dS| >= kDsSplitMin, lo = bf16(dS - hi) (a second product into the same fp32 accumulator), so the
// large dS entries of rows with few keys (the first causal rows) are not rounded to 8 bits.
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

namespace {

constexpr bool kCausal = false;
constexpr int D = 128;
constexpr int BT = 64;                 // rows per tile (keys or queries)
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int TILE = BT * D;           // elements in one [64][128] tile
constexpr int SMEM_BYTES = 6 * TILE * 2 + 4 * BT * 4;  // 6 tiles (96 KiB) + L / Dlt for two query tiles
constexpr float kLog2e = 1.4426950408889634f;
constexpr float kDsSplitMin = 0.5f;   // a warp tile with some |dS| >= this also multiplies lo = dS - bf16(dS)

__device__ __forceinline__ int swz(int row, int col) {
  return row * D + (((col >> 3) ^ (row & 7)) << 3) + (col & 7);
}
__device__ __forceinline__ uint32_t smem_u32(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
__device__ __forceinline__ void cp_async_16(uint32_t dst, const void* src, bool valid) {
  const int bytes = valid ? 16 : 0;
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

__device__ __forceinline__ void load_tile(__nv_bfloat16* tile, const __nv_bfloat16* head, int row0, int S) {
  for (int c = threadIdx.x; c < BT * (D / 8); c += kThreads) {
    const int r = c / (D / 8), ch = c % (D / 8);
    const bool valid = row0 + r < S;
    const __nv_bfloat16* src = head + static_cast<int64_t>(valid ? row0 + r : 0) * D + ch * 8;
    cp_async_16(smem_u32(tile + swz(r, ch * 8)), src, valid);
  }
}

// acc[16 x 64] = A[16 x 128] * B^T where A = rows [16 w, 16 w + 16) of tile `a` and B = the 64 rows of
// tile `b` (both [64][128] with D contiguous): 8 k-steps over D, 8 n-blocks of 8 rows of b.
__device__ __forceinline__ void gemm_abt(float (&acc)[8][4], const __nv_bfloat16* a, const __nv_bfloat16* b,
                                         int warp, int lane) {
#pragma unroll
  for (int n = 0; n < 8; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    uint32_t af[4];
    ldsm_x4(smem_u32(a + swz(warp * 16 + (lane % 16), ks * 16 + (lane / 16) * 8)), af[0], af[1], af[2], af[3]);
#pragma unroll
    for (int np = 0; np < 4; ++np) {
      uint32_t b0, b1, b2, b3;
      const int row = np * 16 + (lane % 8) + (lane / 16) * 8;
      ldsm_x4(smem_u32(b + swz(row, ks * 16 + ((lane / 8) % 2) * 8)), b0, b1, b2, b3);
      mma_bf16(acc[2 * np], af, b0, b1);
      mma_bf16(acc[2 * np + 1], af, b2, b3);
    }
  }
}

// acc[16 x 128] += P[16 x 64] * B where P is given as accumulator fragments p[8][4] (columns = the 64
// rows of tile `b`) and B = tile `b` ([64][128], D contiguous) used as a [k = row][n = D] operand.
__device__ __forceinline__ void gemm_pb(float (&acc)[16][4], const float (&p)[8][4], const __nv_bfloat16* b,
                                        int lane) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const uint32_t pa[4] = {pack_bf16(p[2 * kk][0], p[2 * kk][1]), pack_bf16(p[2 * kk][2], p[2 * kk][3]),
                            pack_bf16(p[2 * kk + 1][0], p[2 * kk + 1][1]),
                            pack_bf16(p[2 * kk + 1][2], p[2 * kk + 1][3])};
#pragma unroll
    for (int dp = 0; dp < D / 16; ++dp) {
      uint32_t b0, b1, b2, b3;
      const int row = kk * 16 + (lane % 8) + ((lane / 8) % 2) * 8;
      ldsm_x4_t(smem_u32(b + swz(row, dp * 16 + (lane / 16) * 8)), b0, b1, b2, b3);
      mma_bf16(acc[2 * dp], pa, b0, b1);
      mma_bf16(acc[2 * dp + 1], pa, b2, b3);
    }
  }
}

// x -= bf16(x) on every element: the residue that bf16 rounding of x drops (exact in fp32).
__device__ __forceinline__ void to_bf16_residue(float (&x)[8][4]) {
#pragma unroll
  for (int n = 0; n < 8; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) x[n][e] -= __bfloat162float(__float2bfloat16_rn(x[n][e]));
}

// acc += dS * B with dS split as hi = bf16(dS) and, when some |dS| of the warp's tile reaches
// kDsSplitMin (a warp-uniform vote), lo = bf16(dS - hi). ds is clobbered.
__device__ __forceinline__ void gemm_ds_b(float (&acc)[16][4], float (&ds)[8][4], const __nv_bfloat16* b, bool big,
                                          int lane) {
  const bool split = __any_sync(0xffffffffu, big);
#pragma unroll 1
  for (int part = 0; part < (split ? 2 : 1); ++part) {
    if (part == 1) to_bf16_residue(ds);
    gemm_pb(acc, ds, b, lane);
  }
}

// Store a warp's [16 x 128] fp32 accumulator tile (times `mul`) as bf16 rows row0 + g, row0 + g + 8.
__device__ __forceinline__ void store_rows(__nv_bfloat16* head, const float (&acc)[16][4], int row0, int S,
                                           float mul, int lane) {
  const int g = lane / 4, t = lane % 4;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + g + 8 * r;
    if (row >= S) continue;
    __nv_bfloat16* out = head + static_cast<int64_t>(row) * D + 2 * t;
#pragma unroll
    for (int n = 0; n < D / 8; ++n)
      *reinterpret_cast<__nv_bfloat162*>(out + 8 * n) =
          __floats2bfloat162_rn(acc[n][2 * r] * mul, acc[n][2 * r + 1] * mul);
  }
}

// ---------------------------------------------------------------- 1. Dlt = rowsum(dO * O)
__global__ void bwd_delta(const __nv_bfloat16* __restrict__ O, const __nv_bfloat16* __restrict__ dO,
                          float* __restrict__ delta, int64_t rows) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (row >= rows) return;
  const __nv_bfloat162* o2 = reinterpret_cast<const __nv_bfloat162*>(O + row * D) + lane * 2;
  const __nv_bfloat162* d2 = reinterpret_cast<const __nv_bfloat162*>(dO + row * D) + lane * 2;
  float acc = 0.f;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const float2 a = __bfloat1622float2(o2[i]), b = __bfloat1622float2(d2[i]);
    acc += a.x * b.x + a.y * b.y;
  }
#pragma unroll
  for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
  if (lane == 0) delta[row] = acc;
}

// ---------------------------------------------------------------- 2. dK, dV
__global__ void __launch_bounds__(kThreads)
bwd_dkdv(const __nv_bfloat16* __restrict__ Q, const __nv_bfloat16* __restrict__ K,
         const __nv_bfloat16* __restrict__ V, const __nv_bfloat16* __restrict__ dO,
         const float* __restrict__ L, const float* __restrict__ delta, __nv_bfloat16* __restrict__ dK,
         __nv_bfloat16* __restrict__ dV, int S, float scale) {
  extern __shared__ __align__(128) uint8_t smem_raw[];
  __nv_bfloat16* sK = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* sV = sK + TILE;
  __nv_bfloat16* sQ = sV + TILE;         // [2][TILE]
  __nv_bfloat16* sdO = sQ + 2 * TILE;    // [2][TILE]
  float* sL = reinterpret_cast<float*>(sdO + 2 * TILE);  // [2][BT], already times log2(e)
  float* sDl = sL + 2 * BT;                              // [2][BT]

  const int k0 = blockIdx.x * BT;
  const int64_t bh = blockIdx.y;
  const int64_t head = bh * S * D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const float scale_log2 = scale * kLog2e;

  const int first_q_tile = kCausal ? k0 / BT : 0;
  const int n_q_tiles = (S + BT - 1) / BT;

  auto load_q_tile = [&](int i, int buf) {
    load_tile(sQ + buf * TILE, Q + head, i * BT, S);
    load_tile(sdO + buf * TILE, dO + head, i * BT, S);
    for (int r = threadIdx.x; r < BT; r += kThreads) {
      const int q = i * BT + r;
      sL[buf * BT + r] = q < S ? L[bh * S + q] * kLog2e : INFINITY;  // rows past S get P = 0
      sDl[buf * BT + r] = q < S ? delta[bh * S + q] : 0.f;
    }
  };

  load_tile(sK, K + head, k0, S);
  load_tile(sV, V + head, k0, S);
  if (first_q_tile < n_q_tiles) load_q_tile(first_q_tile, 0);
  cp_async_commit();

  float dk[16][4], dv[16][4];
#pragma unroll
  for (int n = 0; n < 16; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) dk[n][e] = dv[n][e] = 0.f;

  const int key_row[2] = {k0 + warp * 16 + g, k0 + warp * 16 + g + 8};
  for (int i = first_q_tile; i < n_q_tiles; ++i) {
    const int buf = (i - first_q_tile) & 1;
    cp_async_wait_all();
    __syncthreads();  // tile i landed (and its L / Dlt stores are visible); tile i-1's buffer is free
    if (i + 1 < n_q_tiles) {
      load_q_tile(i + 1, buf ^ 1);
      cp_async_commit();
    }
    const __nv_bfloat16* q_t = sQ + buf * TILE;
    const __nv_bfloat16* do_t = sdO + buf * TILE;
    const float* l_t = sL + buf * BT;
    const float* dl_t = sDl + buf * BT;
    const int q0 = i * BT;

    // P^T = exp2(K Q^T * scale * log2e - L * log2e): rows = this warp's 16 keys, columns = 64 queries.
    float pt[8][4];
    gemm_abt(pt, sK, q_t, warp, lane);
    const bool need_mask = kCausal && q0 < k0 + warp * 16 + 15;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int qc = n * 8 + 2 * t + (e & 1);
        float p = exp2f(pt[n][e] * scale_log2 - l_t[qc]);
        if (need_mask && q0 + qc < key_row[e >> 1]) p = 0.f;
        pt[n][e] = p;
      }
    // dV += P^T dO
    gemm_pb(dv, pt, do_t, lane);
    // dP^T = V dO^T, dS^T = P^T * (dP^T - Dlt)
    float dst[8][4];
    gemm_abt(dst, sV, do_t, warp, lane);
    bool big = false;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        dst[n][e] = pt[n][e] * (dst[n][e] - dl_t[n * 8 + 2 * t + (e & 1)]);
        big |= fabsf(dst[n][e]) >= kDsSplitMin;
      }
    // dK += dS^T Q (hi, and lo for tiles with large dS)
    gemm_ds_b(dk, dst, q_t, big, lane);
  }

  store_rows(dK + head, dk, k0 + warp * 16, S, scale, lane);
  store_rows(dV + head, dv, k0 + warp * 16, S, 1.f, lane);
}

// ---------------------------------------------------------------- 3. dQ
__global__ void __launch_bounds__(kThreads)
bwd_dq(const __nv_bfloat16* __restrict__ Q, const __nv_bfloat16* __restrict__ K,
       const __nv_bfloat16* __restrict__ V, const __nv_bfloat16* __restrict__ dO, const float* __restrict__ L,
       const float* __restrict__ delta, __nv_bfloat16* __restrict__ dQ, int S, float scale) {
  extern __shared__ __align__(128) uint8_t smem_raw[];
  __nv_bfloat16* sQ = reinterpret_cast<__nv_bfloat16*>(smem_raw);
  __nv_bfloat16* sdO = sQ + TILE;
  __nv_bfloat16* sK = sdO + TILE;   // [2][TILE]
  __nv_bfloat16* sV = sK + 2 * TILE;  // [2][TILE]

  const int q_tile = kCausal ? (gridDim.x - 1 - blockIdx.x) : blockIdx.x;  // longest causal rows first
  const int q0 = q_tile * BT;
  const int64_t bh = blockIdx.y;
  const int64_t head = bh * S * D;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int g = lane / 4, t = lane % 4;
  const float scale_log2 = scale * kLog2e;

  const int kv_end = kCausal ? min(S, q0 + BT) : S;
  const int n_k_tiles = (kv_end + BT - 1) / BT;

  load_tile(sQ, Q + head, q0, S);
  load_tile(sdO, dO + head, q0, S);
  load_tile(sK, K + head, 0, S);
  load_tile(sV, V + head, 0, S);
  cp_async_commit();

  const int q_row[2] = {q0 + warp * 16 + g, q0 + warp * 16 + g + 8};
  float l2[2], dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l2[r] = q_row[r] < S ? L[bh * S + q_row[r]] * kLog2e : INFINITY;
    dl[r] = q_row[r] < S ? delta[bh * S + q_row[r]] : 0.f;
  }

  float dq[16][4];
#pragma unroll
  for (int n = 0; n < 16; ++n) dq[n][0] = dq[n][1] = dq[n][2] = dq[n][3] = 0.f;

  for (int j = 0; j < n_k_tiles; ++j) {
    const int buf = j & 1;
    cp_async_wait_all();
    __syncthreads();
    if (j + 1 < n_k_tiles) {
      load_tile(sK + (buf ^ 1) * TILE, K + head, (j + 1) * BT, S);
      load_tile(sV + (buf ^ 1) * TILE, V + head, (j + 1) * BT, S);
      cp_async_commit();
    }
    const __nv_bfloat16* k_t = sK + buf * TILE;
    const __nv_bfloat16* v_t = sV + buf * TILE;
    const int n0 = j * BT;

    float p[8][4];
    gemm_abt(p, sQ, k_t, warp, lane);
    const bool need_mask = (n0 + BT > S) || (kCausal && n0 + BT - 1 > q0 + warp * 16);
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = exp2f(p[n][e] * scale_log2 - l2[e >> 1]);
        if (need_mask) {
          const int key = n0 + n * 8 + 2 * t + (e & 1);
          if (key >= S || (kCausal && key > q_row[e >> 1])) x = 0.f;
        }
        p[n][e] = x;
      }
    float ds[8][4];
    gemm_abt(ds, sdO, v_t, warp, lane);
    bool big = false;
#pragma unroll
    for (int n = 0; n < 8; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        ds[n][e] = p[n][e] * (ds[n][e] - dl[e >> 1]);
        big |= fabsf(ds[n][e]) >= kDsSplitMin;
      }
    gemm_ds_b(dq, ds, k_t, big, lane);
  }
  store_rows(dQ + head, dq, q0 + warp * 16, S, scale, lane);
}

void check_bhsd(const tvm::ffi::TensorView& x, const char* name) {
  TVM_FFI_CHECK(x.ndim() == 4, ValueError) << name << " must be [B, H, S, D]";
  TVM_FFI_CHECK(x.dtype().code == kDLBfloat && x.dtype().bits == 16, TypeError) << name << " must be bfloat16";
  TVM_FFI_CHECK(x.size(3) == D, ValueError) << name << ": head dim must be " << D;
}

template <typename T>
const T* cptr(const tvm::ffi::TensorView& x) { return static_cast<const T*>(x.data_ptr()); }
template <typename T>
T* mptr(const tvm::ffi::TensorView& x) { return static_cast<T*>(x.data_ptr()); }

}  // namespace

void run(tvm::ffi::TensorView Q, tvm::ffi::TensorView K, tvm::ffi::TensorView V, tvm::ffi::TensorView O,
         tvm::ffi::TensorView dO, tvm::ffi::TensorView L, tvm::ffi::TensorView dQ, tvm::ffi::TensorView dK,
         tvm::ffi::TensorView dV) {
  check_bhsd(Q, "Q");
  check_bhsd(K, "K");
  check_bhsd(V, "V");
  check_bhsd(O, "O");
  check_bhsd(dO, "dO");
  check_bhsd(dQ, "dQ");
  check_bhsd(dK, "dK");
  check_bhsd(dV, "dV");
  TVM_FFI_CHECK(L.dtype().code == kDLFloat && L.dtype().bits == 32, TypeError) << "L must be float32";
  const int B = static_cast<int>(Q.size(0)), H = static_cast<int>(Q.size(1)), S = static_cast<int>(Q.size(2));
  if (B * H * S == 0) return;
  const int64_t rows = static_cast<int64_t>(B) * H * S;
  const float scale = 1.f / sqrtf(static_cast<float>(D));
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(Q.device().device_type, Q.device().device_id));

  float* delta = nullptr;
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&delta), rows * sizeof(float), stream);
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "cudaMallocAsync: " << cudaGetErrorString(err);
  bwd_delta<<<static_cast<unsigned>((rows + 7) / 8), 256, 0, stream>>>(cptr<__nv_bfloat16>(O),
                                                                        cptr<__nv_bfloat16>(dO), delta, rows);
  for (auto fn : {reinterpret_cast<const void*>(bwd_dkdv), reinterpret_cast<const void*>(bwd_dq)}) {
    err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "cudaFuncSetAttribute: " << cudaGetErrorString(err);
  }
  const dim3 grid((S + BT - 1) / BT, B * H);
  bwd_dkdv<<<grid, kThreads, SMEM_BYTES, stream>>>(cptr<__nv_bfloat16>(Q), cptr<__nv_bfloat16>(K),
                                                   cptr<__nv_bfloat16>(V), cptr<__nv_bfloat16>(dO), cptr<float>(L),
                                                   delta, mptr<__nv_bfloat16>(dK), mptr<__nv_bfloat16>(dV), S, scale);
  bwd_dq<<<grid, kThreads, SMEM_BYTES, stream>>>(cptr<__nv_bfloat16>(Q), cptr<__nv_bfloat16>(K),
                                                 cptr<__nv_bfloat16>(V), cptr<__nv_bfloat16>(dO), cptr<float>(L),
                                                 delta, mptr<__nv_bfloat16>(dQ), S, scale);
  err = cudaGetLastError();
  cudaFreeAsync(delta, stream);
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "kernel launch: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
