// mha_with_lse_d128 on Hopper (sm_90a): FlashAttention-3 style forward with TMA + wgmma.
//
// O[b,h,i,:] = softmax(Q K^T / sqrt(D)) V and LSE[b,h,i] = natural-log logsumexp of the scaled scores.
//   * One CTA = 128 query rows of one (batch, head), D = 128, key/value tiles of 128 rows.
//   * Warpgroup 0 = producer: one thread loads Q once and streams K and V tiles into a 2-stage ring
//     with cp.async.bulk.tensor (3-D tensor maps [B*H, S, D], 64-column boxes, SWIZZLE_128B);
//     separate K and V "full" mbarriers so S = Q K^T starts before V has landed.
//   * Warpgroups 1 and 2 = consumers, 64 query rows each:
//       S = Q K^T   : wgmma m64n128k16, A = Q and B = K from K-major shared-memory descriptors;
//       softmax     : online, in registers, log2 domain;
//       O += P V    : wgmma m64n128k16 with A = P taken straight from the S accumulators (registers)
//                     and B = V from an MN-major descriptor (transpose bit set; LBO = the 64-column
//                     half stride, SBO = 8 rows x 128 B).
//     The two consumer warpgroups run out of phase, so one's softmax overlaps the other's wgmma.
//   * setmaxnreg: producer 40, consumers 232.
// TVM-FFI ABI, destination-passing style; the tensor maps are encoded through the driver entry point
// fetched from the runtime (no -lcuda needed to build).
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

namespace {

constexpr bool kCausal = false;
constexpr int D = 128;
constexpr int BM = 128;                    // query rows per CTA (2 consumer warpgroups x 64)
constexpr int BN = 128;                    // keys per tile
constexpr int STAGES = 2;
constexpr int kThreads = 384;
constexpr int kConsumerWarps = 8;
constexpr int HALF_BYTES = 128 * 64 * 2;   // one 128-row x 64-column box = 16 KiB
constexpr int TILE_BYTES = 2 * HALF_BYTES; // a 128 x 128 tile = two column halves
constexpr int OFF_Q = 0;
constexpr int OFF_K = OFF_Q + TILE_BYTES;
constexpr int OFF_V = OFF_K + STAGES * TILE_BYTES;
constexpr int OFF_BAR = OFF_V + STAGES * TILE_BYTES;
constexpr int SMEM_BYTES = OFF_BAR + (1 + 3 * STAGES) * 8 + 1024;  // + barriers + alignment slack

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
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");
}

// Descriptor of a K-major operand written by TMA with SWIZZLE_128B (rows of 128 B, 8-row groups 1024 B apart).
__device__ __forceinline__ uint64_t desc_kmajor(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}
// Descriptor of an MN-major operand (V: keys x 128 columns, stored as two 64-column halves of 128 B rows):
// LBO = distance between the 64-column halves, SBO = distance between 8-key groups, 128B swizzle.
__device__ __forceinline__ uint64_t desc_mnmajor(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(HALF_BYTES >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
__device__ __forceinline__ void fence_acc(float (&d)[64]) {
#pragma unroll
  for (int i = 0; i < 64; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64x128] (+)= A[64x16] * B[16x128]: A and B from K-major descriptors.
__device__ __forceinline__ void wgmma_ss(float (&d)[64], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64x128] += A[64x16] * B[16x128]: A from registers (4 x bf16x2), B from an MN-major descriptor.
__device__ __forceinline__ void wgmma_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
  asm volatile(
      "{\n"
      "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31,"
      "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47,"
      "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, {%64, %65, %66, %67}, %68, 1, 1, 1, 1;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]),
        "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]),
        "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]),
        "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]),
        "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b));
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

// ---------------------------------------------------------------- kernel
__global__ void __launch_bounds__(kThreads, 1)
mha_fwd_wgmma_kernel(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_k,
                     const __grid_constant__ CUtensorMap tm_v, __nv_bfloat16* __restrict__ O,
                     float* __restrict__ LSE, int S, float scale_log2) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t base = (smem_u32(smem_raw) + 1023) & ~1023u;
  const uint32_t sQ = base + OFF_Q, sK = base + OFF_K, sV = base + OFF_V;
  const uint32_t bar_q = base + OFF_BAR;
  const uint32_t bar_k = bar_q + 8;                 // [STAGES]
  const uint32_t bar_v = bar_k + 8 * STAGES;        // [STAGES]
  const uint32_t bar_empty = bar_v + 8 * STAGES;    // [STAGES]

  const int q_block = kCausal ? (gridDim.x - 1 - blockIdx.x) : blockIdx.x;  // longest causal rows first
  const int q0 = q_block * BM;
  const int bh = blockIdx.y;
  const int kv_end = kCausal ? min(S, q0 + BM) : S;
  const int n_tiles = (kv_end + BN - 1) / BN;
  const int warpgroup = threadIdx.x / 128;

  if (threadIdx.x == 0) {
    mbar_init(bar_q, 1);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(bar_k + 8 * s, 1);
      mbar_init(bar_v + 8 * s, 1);
      mbar_init(bar_empty + 8 * s, kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();

  if (warpgroup == 0) {
    // ------------------------------------------------------------ producer
    asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n" ::: "memory");
    if (threadIdx.x == 0) {
      mbar_expect_tx(bar_q, TILE_BYTES);
      tma_load_3d(sQ, &tm_q, bar_q, 0, q0, bh);
      tma_load_3d(sQ + HALF_BYTES, &tm_q, bar_q, 64, q0, bh);
      for (int j = 0; j < n_tiles; ++j) {
        const int s = j % STAGES;
        if (j >= STAGES) mbar_wait(bar_empty + 8 * s, ((j / STAGES) + 1) & 1);
        mbar_expect_tx(bar_k + 8 * s, TILE_BYTES);
        tma_load_3d(sK + s * TILE_BYTES, &tm_k, bar_k + 8 * s, 0, j * BN, bh);
        tma_load_3d(sK + s * TILE_BYTES + HALF_BYTES, &tm_k, bar_k + 8 * s, 64, j * BN, bh);
        mbar_expect_tx(bar_v + 8 * s, TILE_BYTES);
        tma_load_3d(sV + s * TILE_BYTES, &tm_v, bar_v + 8 * s, 0, j * BN, bh);
        tma_load_3d(sV + s * TILE_BYTES + HALF_BYTES, &tm_v, bar_v + 8 * s, 64, j * BN, bh);
      }
    }
    return;
  }

  // -------------------------------------------------------------- consumers
  asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n" ::: "memory");
  const int cw = warpgroup - 1;                       // rows [64 cw, 64 cw + 64) of the CTA tile
  const int t = threadIdx.x % 128;
  const int warp = t / 32, lane = t % 32;
  const int row_in_tile = cw * 64 + warp * 16 + lane / 4;   // and row_in_tile + 8
  const int q_row[2] = {q0 + row_in_tile, q0 + row_in_tile + 8};
  const int warp_q_min = q0 + cw * 64 + warp * 16;

  float o[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) o[i] = 0.f;
  float m_row[2] = {-INFINITY, -INFINITY};
  float l_row[2] = {0.f, 0.f};

  mbar_wait(bar_q, 0);
  for (int j = 0; j < n_tiles; ++j) {
    const int s = j % STAGES;
    const uint32_t phase = (j / STAGES) & 1;
    const int n0 = j * BN;

    // S = Q K^T (64 x 128 per warpgroup), 8 k-steps of 16 over D.
    float sc[64];
    mbar_wait(bar_k + 8 * s, phase);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      const uint32_t half = (ks / 4) * HALF_BYTES, koff = (ks % 4) * 32;
      const uint64_t da = desc_kmajor(sQ + half + cw * 64 * 128 + koff);
      const uint64_t db = desc_kmajor(sK + s * TILE_BYTES + half + koff);
      wgmma_ss(sc, da, db, ks > 0 ? 1 : 0);
    }
    wgmma_commit();
    wgmma_wait0();
    fence_acc(sc);

    // Scale to the log2 domain; mask causal positions and keys past S.
    const bool need_mask = (n0 + BN > S) || (kCausal && n0 + BN - 1 > warp_q_min);
#pragma unroll
    for (int i = 0; i < 64; ++i) {
      float x = sc[i] * scale_log2;
      if (need_mask) {
        const int key = n0 + 8 * (i / 4) + 2 * (lane % 4) + (i & 1);
        const int q = q_row[(i / 2) & 1];
        if (key >= S || (kCausal && key > q)) x = -INFINITY;
      }
      sc[i] = x;
    }

    // Online softmax; register i holds row (i/2)&1 of this thread (a row is spread over a lane quad).
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = -INFINITY;
#pragma unroll
      for (int c = 0; c < 16; ++c) mx = fmaxf(mx, fmaxf(sc[4 * c + 2 * r], sc[4 * c + 2 * r + 1]));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      const float m_new = fmaxf(m_row[r], mx);
      const float m_use = (m_new == -INFINITY) ? 0.f : m_new;
      const float alpha = exp2f(m_row[r] - m_use);
      m_row[r] = m_new;
      float sum = 0.f;
#pragma unroll
      for (int c = 0; c < 16; ++c) {
        sc[4 * c + 2 * r] = exp2f(sc[4 * c + 2 * r] - m_use);
        sc[4 * c + 2 * r + 1] = exp2f(sc[4 * c + 2 * r + 1] - m_use);
        sum += sc[4 * c + 2 * r] + sc[4 * c + 2 * r + 1];
        o[4 * c + 2 * r] *= alpha;
        o[4 * c + 2 * r + 1] *= alpha;
      }
      l_row[r] = l_row[r] * alpha + sum;
    }

    // P as wgmma A fragments: keys [16 kk, 16 kk + 16) are accumulator registers [8 kk, 8 kk + 8).
    uint32_t pa[8][4];
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) {
      pa[kk][0] = pack_bf16(sc[8 * kk + 0], sc[8 * kk + 1]);
      pa[kk][1] = pack_bf16(sc[8 * kk + 2], sc[8 * kk + 3]);
      pa[kk][2] = pack_bf16(sc[8 * kk + 4], sc[8 * kk + 5]);
      pa[kk][3] = pack_bf16(sc[8 * kk + 6], sc[8 * kk + 7]);
    }

    // O += P V, 8 k-steps of 16 keys; V tile stage s, 16 keys = 16 rows x 128 B = 2048 B further.
    mbar_wait(bar_v + 8 * s, phase);
    fence_acc(o);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 8; ++kk) wgmma_rs(o, pa[kk], desc_mnmajor(sV + s * TILE_BYTES + kk * 2048));
    wgmma_commit();
    wgmma_wait0();
    fence_acc(o);
    if (lane == 0) mbar_arrive(bar_empty + 8 * s);
  }

  // Epilogue: finish the row sums across the quad, normalize, store O (bf16) and LSE (natural log).
  const float ln2 = 0.69314718055994531f;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_row[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const float inv = 1.f / l;
    const int q = q_row[r];
    if (q < S) {
      __nv_bfloat16* out = O + (static_cast<int64_t>(bh) * S + q) * D + 2 * (lane % 4);
#pragma unroll
      for (int c = 0; c < 16; ++c)
        *reinterpret_cast<__nv_bfloat162*>(out + 8 * c) =
            __floats2bfloat162_rn(o[4 * c + 2 * r] * inv, o[4 * c + 2 * r + 1] * inv);
      if (lane % 4 == 0) LSE[static_cast<int64_t>(bh) * S + q] = (m_row[r] + log2f(l)) * ln2;
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

// [B*H, S, D] bf16 with D contiguous; box = 64 columns x 128 rows x 1 head, 128B swizzle, OOB rows -> 0.
CUtensorMap make_head_map(const void* base, uint64_t bh, uint64_t seq) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(D), seq, bh};
  const cuuint64_t strides[2] = {D * sizeof(__nv_bfloat16), seq * D * sizeof(__nv_bfloat16)};
  const cuuint32_t box[3] = {64, 128, 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  CUresult res = get_encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, strides,
                                 box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (res != CUDA_SUCCESS) TVM_FFI_THROW(RuntimeError) << "cuTensorMapEncodeTiled failed with code " << res;
  return map;
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
  const CUtensorMap tm_q = make_head_map(Q.data_ptr(), static_cast<uint64_t>(B) * H, S);
  const CUtensorMap tm_k = make_head_map(K.data_ptr(), static_cast<uint64_t>(B) * H, S);
  const CUtensorMap tm_v = make_head_map(V.data_ptr(), static_cast<uint64_t>(B) * H, S);
  const float scale_log2 = 1.4426950408889634f / sqrtf(static_cast<float>(D));
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(Q.device().device_type, Q.device().device_id));
  cudaError_t err = cudaFuncSetAttribute(mha_fwd_wgmma_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "cudaFuncSetAttribute: " << cudaGetErrorString(err);
  dim3 grid((S + BM - 1) / BM, B * H);
  mha_fwd_wgmma_kernel<<<grid, kThreads, SMEM_BYTES, stream>>>(tm_q, tm_k, tm_v, static_cast<__nv_bfloat16*>(O.data_ptr()),
                                                               static_cast<float*>(LSE.data_ptr()), S, scale_log2);
  err = cudaGetLastError();
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "kernel launch: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
