// mha_bwd_d128_causal on Hopper (sm_90a): attention backward with TMA + wgmma (warp-specialized).
//
// Given Q, K, V, O, dO and the natural-log LSE L of the forward (scale = 1/sqrt(D), D = 128):
//   P = exp(Q K^T scale - L), Dlt = rowsum(dO * O), dS = P * (dO V^T - Dlt),
//   dV = P^T dO, dK = dS^T Q scale, dQ = dS K scale.
// Three kernels on the caller's stream (Dlt lives in a cudaMallocAsync scratch freed on the stream):
//   1. bwd_delta : {L log2e, Dlt = rowsum(dO * O)} per row, one warp per row (rows padded per head).
//   2. bwd_dkdv  : CTA = 128 keys (two consumer warpgroups x 64) of one head. The producer warpgroup
//                  loads K and V once and streams 64-query tiles of Q and dO (2-stage ring, TMA,
//                  SWIZZLE_128B). Per tile each consumer issues
//                    S^T  = K Q^T    (wgmma m64n64k16,  A = K, B = Q, both K-major descriptors)
//                    dP^T = V dO^T   (wgmma m64n64k16,  A = V, B = dO)
//                    dV  += P^T dO   (wgmma m64n128k16, A = P^T from registers, B = dO MN-major)
//                    dK  += dS^T Q   (wgmma m64n128k16, A = dS^T from registers, B = Q MN-major)
//   3. bwd_dq    : CTA = 128 queries; streams 64-key tiles of K and V:
//                    S = Q K^T, dP = dO V^T (m64n64k16), dQ += dS K (m64n128k16, A from registers).
// No atomics: dK/dV and dQ are each owned by one CTA. setmaxnreg: producer 24, consumers 240.
// Precision: dS enters the dK / dQ products as hi = bf16(dS); when some |dS| of a warpgroup's 64 x 64
// tile reaches kDsSplitMin (a vote through bar.red.or), lo = bf16(dS - hi) is multiplied into the same
// fp32 accumulator too, so the large dS entries of rows with few keys (first causal rows) keep 16 bits.
// TVM-FFI ABI, destination-passing style; tensor maps encoded through the runtime's driver entry point.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cstdint>
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

namespace {

constexpr bool kCausal = true;
constexpr int D = 128;
constexpr int BIG = 128;                      // rows owned by a CTA (keys in dkdv, queries in dq)
constexpr int SMALL = 64;                     // rows of a streamed tile
constexpr int STAGES = 2;
constexpr int kThreads = 384;
constexpr int kConsumerWarps = 8;
constexpr int BIG_HALF = BIG * 64 * 2;        // 16 KiB: 128 rows x 64 columns
constexpr int SMALL_HALF = SMALL * 64 * 2;    // 8 KiB: 64 rows x 64 columns
constexpr int BIG_TILE = 2 * BIG_HALF;        // 32 KiB
constexpr int SMALL_TILE = 2 * SMALL_HALF;    // 16 KiB
constexpr int OFF_FIX0 = 0;                   // K (dkdv) or Q (dq)
constexpr int OFF_FIX1 = BIG_TILE;            // V (dkdv) or dO (dq)
constexpr int OFF_RING = 2 * BIG_TILE;        // [STAGES] x {Q, dO} (dkdv) or {K, V} (dq)
constexpr int STAGE_BYTES = 2 * SMALL_TILE;
constexpr int OFF_BAR = OFF_RING + STAGES * STAGE_BYTES;
constexpr int SMEM_BYTES = OFF_BAR + (1 + 2 * STAGES) * 8 + 1024;
constexpr float kLog2e = 1.4426950408889634f;
__host__ __device__ constexpr int pad_rows(int S) { return (S + BIG - 1) / BIG * BIG; }  // scratch rows per head
constexpr float kDsSplitMin = 0.5f;           // a warpgroup tile with some |dS| >= this also multiplies lo

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
// Load a [rows x 128] tile as two 64-column boxes (column half h at dst + h * half_bytes).
__device__ __forceinline__ void tma_tile(uint32_t dst, const CUtensorMap* map, uint32_t bar, int row, int bh,
                                         int half_bytes) {
  tma_load_3d(dst, map, bar, 0, row, bh);
  tma_load_3d(dst + half_bytes, map, bar, 64, row, bh);
}

// K-major operand written by TMA with SWIZZLE_128B (rows of 128 B, 8-row groups 1024 B apart).
__device__ __forceinline__ uint64_t desc_kmajor(uint32_t addr) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}
// MN-major operand (rows = K dimension, 128 columns = N as two 64-column halves half_bytes apart).
__device__ __forceinline__ uint64_t desc_mnmajor(uint32_t addr, uint32_t half_bytes) {
  return static_cast<uint64_t>((addr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(half_bytes >> 4) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
template <int N>
__device__ __forceinline__ void fence_acc(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// D[64x64] (+)= A[64x16] * B[16x64]; A and B from K-major descriptors.
__device__ __forceinline__ void wgmma_n64_ss(float (&d)[32], uint64_t desc_a, uint64_t desc_b, int scale_d) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15,"
      "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
      "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]),
        "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]),
        "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]),
        "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
      : "l"(desc_a), "l"(desc_b), "r"(scale_d));
}

// D[64x128] += A[64x16] * B[16x128]; A from registers, B from an MN-major descriptor.
__device__ __forceinline__ void wgmma_n128_rs(float (&d)[64], const uint32_t (&a)[4], uint64_t desc_b) {
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

// Accumulator registers [8 kk, 8 kk + 8) of an m64n64 tile = A fragment of k-step kk (16 columns).
__device__ __forceinline__ void pack_a(const float (&x)[32], int kk, uint32_t (&a)[4]) {
  a[0] = pack_bf16(x[8 * kk + 0], x[8 * kk + 1]);
  a[1] = pack_bf16(x[8 * kk + 2], x[8 * kk + 3]);
  a[2] = pack_bf16(x[8 * kk + 4], x[8 * kk + 5]);
  a[3] = pack_bf16(x[8 * kk + 6], x[8 * kk + 7]);
}

// A fragment of k-step kk from the bf16 rounding residues x - bf16(x) (exact in fp32).
__device__ __forceinline__ float bf16_residue(float x) { return x - __bfloat162float(__float2bfloat16_rn(x)); }
__device__ __forceinline__ void pack_a_residue(const float (&x)[32], int kk, uint32_t (&a)[4]) {
#pragma unroll
  for (int i = 0; i < 4; ++i) a[i] = pack_bf16(bf16_residue(x[8 * kk + 2 * i]), bf16_residue(x[8 * kk + 2 * i + 1]));
}

// OR of `x` over the 128 threads of consumer warpgroup cw (named barrier 1 + cw; 0 is __syncthreads).
// The redux.sync of the (already equal) lane values puts the vote in a uniform register, so ptxas
// sees the branch around the lo wgmmas as non-divergent and does not serialize the kernel's wgmmas.
__device__ __forceinline__ bool warpgroup_any(bool x, int cw) {
  uint32_t r;
  asm volatile(
      "{\n .reg .pred p, q;\n setp.ne.u32 p, %1, 0;\n bar.red.or.pred q, %2, 128, p;\n selp.u32 %0, 1, 0, q;\n}\n"
      : "=r"(r) : "r"(static_cast<uint32_t>(x)), "r"(1 + cw) : "memory");
  return __reduce_or_sync(0xffffffffu, r) != 0;
}

// Store a warpgroup's [64 x 128] fp32 accumulator (times mul) as bf16 rows row0 + (thread rows).
__device__ __forceinline__ void store_acc(__nv_bfloat16* head, const float (&acc)[64], int row0, int S, float mul) {
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + warp * 16 + lane / 4 + 8 * r;
    if (row >= S) continue;
    __nv_bfloat16* out = head + static_cast<int64_t>(row) * D + 2 * (lane % 4);
#pragma unroll
    for (int c = 0; c < 16; ++c)
      *reinterpret_cast<__nv_bfloat162*>(out + 8 * c) =
          __floats2bfloat162_rn(acc[4 * c + 2 * r] * mul, acc[4 * c + 2 * r + 1] * mul);
  }
}

__device__ __forceinline__ uint32_t smem_base(uint8_t* raw) { return (smem_u32(raw) + 1023) & ~1023u; }

// ---------------------------------------------------------------- 1. Dlt = rowsum(dO * O)
// Writes {L log2e, Dlt} of row s of head bh to delta[bh * S_pad + s]; rows S <= s < S_pad get {+inf, 0}
// (P = 0, dS = 0), so the backward kernels read it without bounds checks (fewer live registers).
__global__ void bwd_delta(const __nv_bfloat16* __restrict__ O, const __nv_bfloat16* __restrict__ dO,
                          const float* __restrict__ L, float2* __restrict__ delta, int S, int S_pad, int64_t bh_count) {
  const int64_t pad_row = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  if (pad_row >= bh_count * S_pad) return;
  const int s = static_cast<int>(pad_row % S_pad);
  if (s >= S) {
    if (lane == 0) delta[pad_row] = make_float2(INFINITY, 0.f);
    return;
  }
  const int64_t row = pad_row / S_pad * S + s;
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
  if (lane == 0) delta[pad_row] = make_float2(L[row] * kLog2e, acc);
}

// Producer of both backward kernels: two fixed 128-row tiles, then `n` streamed pairs of 64-row tiles.
__device__ __forceinline__ void produce(uint32_t base, const CUtensorMap* fix0, const CUtensorMap* fix1,
                                        const CUtensorMap* ring0, const CUtensorMap* ring1, int fix_row, int first,
                                        int n, int bh) {
  const uint32_t bar_fix = base + OFF_BAR, bar_full = bar_fix + 8, bar_empty = bar_full + 8 * STAGES;
  mbar_expect_tx(bar_fix, 2 * BIG_TILE);
  tma_tile(base + OFF_FIX0, fix0, bar_fix, fix_row, bh, BIG_HALF);
  tma_tile(base + OFF_FIX1, fix1, bar_fix, fix_row, bh, BIG_HALF);
  for (int j = 0; j < n; ++j) {
    const int s = j % STAGES;
    if (j >= STAGES) mbar_wait(bar_empty + 8 * s, ((j / STAGES) + 1) & 1);
    const uint32_t stage = base + OFF_RING + s * STAGE_BYTES;
    mbar_expect_tx(bar_full + 8 * s, STAGE_BYTES);
    tma_tile(stage, ring0, bar_full + 8 * s, (first + j) * SMALL, bh, SMALL_HALF);
    tma_tile(stage + SMALL_TILE, ring1, bar_full + 8 * s, (first + j) * SMALL, bh, SMALL_HALF);
  }
}

__device__ __forceinline__ void init_barriers(uint32_t base) {
  if (threadIdx.x == 0) {
    mbar_init(base + OFF_BAR, 1);
    for (int s = 0; s < STAGES; ++s) {
      mbar_init(base + OFF_BAR + 8 + 8 * s, 1);
      mbar_init(base + OFF_BAR + 8 + 8 * STAGES + 8 * s, kConsumerWarps);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
}

// Issue acc = A_fix(rows of this warpgroup) x B_stage^T over D = 128 (8 k-steps), as one commit group.
__device__ __forceinline__ void issue_abt(float (&acc)[32], uint32_t a_tile, uint32_t b_tile, int cw) {
#pragma unroll
  for (int ks = 0; ks < D / 16; ++ks) {
    const uint32_t koff = (ks % 4) * 32;
    wgmma_n64_ss(acc, desc_kmajor(a_tile + (ks / 4) * BIG_HALF + cw * 64 * 128 + koff),
                 desc_kmajor(b_tile + (ks / 4) * SMALL_HALF + koff), ks > 0 ? 1 : 0);
  }
}

// ---------------------------------------------------------------- 2. dK, dV
__global__ void __launch_bounds__(kThreads, 1)
bwd_dkdv(const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v,
         const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_do,
         const float2* __restrict__ delta, __nv_bfloat16* __restrict__ dK,
         __nv_bfloat16* __restrict__ dV, int S, float scale) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t base = smem_base(smem_raw);
  const int k0 = blockIdx.x * BIG;
  const int bh = blockIdx.y;
  const int first = kCausal ? k0 / SMALL : 0;
  const int n = (S + SMALL - 1) / SMALL - first;
  init_barriers(base);
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (threadIdx.x == 0) produce(base, &tm_k, &tm_v, &tm_q, &tm_do, k0, first, n, bh);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  const int cw = threadIdx.x / 128 - 1;
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int key_row[2] = {k0 + cw * 64 + warp * 16 + lane / 4, k0 + cw * 64 + warp * 16 + lane / 4 + 8};
  const int warp_key_max = k0 + cw * 64 + warp * 16 + 15;
  const float scale_log2 = scale * kLog2e;
  const uint32_t bar_full = base + OFF_BAR + 8, bar_empty = bar_full + 8 * STAGES;
  const float2* ld_head = delta + static_cast<int64_t>(bh) * pad_rows(S);  // {L log2e, Dlt} per query

  float dk[64], dv[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) dk[i] = dv[i] = 0.f;
  mbar_wait(base + OFF_BAR, 0);

  for (int j = 0; j < n; ++j) {
    const int s = j % STAGES;
    const int q0 = (first + j) * SMALL;
    const uint32_t sQ = base + OFF_RING + s * STAGE_BYTES, sdO = sQ + SMALL_TILE;
    float pt[32], dpt[32];
    mbar_wait(bar_full + 8 * s, (j / STAGES) & 1);
    wgmma_fence();
    issue_abt(pt, base + OFF_FIX0, sQ, cw);   // S^T = K Q^T
    wgmma_commit();
    issue_abt(dpt, base + OFF_FIX1, sdO, cw); // dP^T = V dO^T
    wgmma_commit();
    wgmma_wait<1>();
    fence_acc(pt);
    // P^T = exp2(S^T scale log2e - L log2e); columns are queries q0 + 8 c + 2 (lane % 4) + e.
    const bool need_mask = kCausal && q0 < warp_key_max;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int q = q0 + 8 * (i / 4) + 2 * (lane % 4) + (i & 1);
      float p = exp2f(pt[i] * scale_log2 - __ldg(ld_head + q).x);  // 0 past S
      if (need_mask && q < key_row[(i / 2) & 1]) p = 0.f;
      pt[i] = p;
    }
    wgmma_wait<0>();
    fence_acc(dpt);
    // dS^T = P^T (dP^T - Dlt), packed per k-step of 16 queries as A fragments: P^T for dV, hi(dS^T) and
    // lo(dS^T) for dK. All A fragments are packed before the fence (no register feeding a wgmma changes
    // after it); lo is packed whether or not it is used, which keeps the register allocation spill-free.
    uint32_t pa[SMALL / 16][4], sa[SMALL / 16][4], sl[SMALL / 16][4];
    bool big = false;
#pragma unroll
    for (int kk = 0; kk < SMALL / 16; ++kk) {
#pragma unroll
      for (int i = 8 * kk; i < 8 * kk + 8; ++i) {
        const int q = q0 + 8 * (i / 4) + 2 * (lane % 4) + (i & 1);
        dpt[i] = pt[i] * (dpt[i] - __ldg(ld_head + q).y);
        big |= fabsf(dpt[i]) >= kDsSplitMin;
      }
      pack_a(pt, kk, pa[kk]);
      pack_a(dpt, kk, sa[kk]);
      pack_a_residue(dpt, kk, sl[kk]);
    }
    const bool split = warpgroup_any(big, cw);
    // dV += P^T dO, dK += dS^T Q (+ lo(dS)^T Q when split): 4 k-steps of 16 queries (16 rows x 128 B =
    // 2048 B of each tile).
    fence_acc(dv);
    fence_acc(dk);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < SMALL / 16; ++kk) {
      wgmma_n128_rs(dv, pa[kk], desc_mnmajor(sdO + kk * 2048, SMALL_HALF));
      wgmma_n128_rs(dk, sa[kk], desc_mnmajor(sQ + kk * 2048, SMALL_HALF));
    }
    if (split) {  // warpgroup-uniform (warpgroup_any); the fence opens the branch's wgmmas
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < SMALL / 16; ++kk) wgmma_n128_rs(dk, sl[kk], desc_mnmajor(sQ + kk * 2048, SMALL_HALF));
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_acc(dv);
    fence_acc(dk);
    if (lane == 0) mbar_arrive(bar_empty + 8 * s);
  }
  const int64_t head = static_cast<int64_t>(bh) * S * D;
  store_acc(dK + head, dk, k0 + cw * 64, S, scale);
  store_acc(dV + head, dv, k0 + cw * 64, S, 1.f);
}

// ---------------------------------------------------------------- 3. dQ
__global__ void __launch_bounds__(kThreads, 1)
bwd_dq(const __grid_constant__ CUtensorMap tm_q, const __grid_constant__ CUtensorMap tm_do,
       const __grid_constant__ CUtensorMap tm_k, const __grid_constant__ CUtensorMap tm_v,
       const float2* __restrict__ delta, __nv_bfloat16* __restrict__ dQ, int S,
       float scale) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  const uint32_t base = smem_base(smem_raw);
  const int q_blk = kCausal ? (gridDim.x - 1 - blockIdx.x) : blockIdx.x;  // longest causal rows first
  const int q0 = q_blk * BIG;
  const int bh = blockIdx.y;
  const int kv_end = kCausal ? min(S, q0 + BIG) : S;
  const int n = (kv_end + SMALL - 1) / SMALL;
  init_barriers(base);
  if (threadIdx.x < 128) {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 24;\n" ::: "memory");
    if (threadIdx.x == 0) produce(base, &tm_q, &tm_do, &tm_k, &tm_v, q0, 0, n, bh);
    return;
  }
  asm volatile("setmaxnreg.inc.sync.aligned.u32 240;\n" ::: "memory");
  const int cw = threadIdx.x / 128 - 1;
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const int q_row[2] = {q0 + cw * 64 + warp * 16 + lane / 4, q0 + cw * 64 + warp * 16 + lane / 4 + 8};
  const int warp_q_min = q0 + cw * 64 + warp * 16;
  const float scale_log2 = scale * kLog2e;
  const uint32_t bar_full = base + OFF_BAR + 8, bar_empty = bar_full + 8 * STAGES;
  float l2[2], dl[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float2 ld = delta[static_cast<int64_t>(bh) * pad_rows(S) + q_row[r]];
    l2[r] = ld.x;  // rows past S: P = 0
    dl[r] = ld.y;
  }

  float dq[64];
#pragma unroll
  for (int i = 0; i < 64; ++i) dq[i] = 0.f;
  mbar_wait(base + OFF_BAR, 0);

  for (int j = 0; j < n; ++j) {
    const int s = j % STAGES;
    const int n0 = j * SMALL;
    const uint32_t sK = base + OFF_RING + s * STAGE_BYTES, sV = sK + SMALL_TILE;
    float p[32], ds[32];
    mbar_wait(bar_full + 8 * s, (j / STAGES) & 1);
    wgmma_fence();
    issue_abt(p, base + OFF_FIX0, sK, cw);    // S = Q K^T
    wgmma_commit();
    issue_abt(ds, base + OFF_FIX1, sV, cw);   // dP = dO V^T
    wgmma_commit();
    wgmma_wait<1>();
    fence_acc(p);
    const bool need_mask = (n0 + SMALL > S) || (kCausal && n0 + SMALL - 1 > warp_q_min);
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      float x = exp2f(p[i] * scale_log2 - l2[(i / 2) & 1]);
      if (need_mask) {
        const int key = n0 + 8 * (i / 4) + 2 * (lane % 4) + (i & 1);
        if (key >= S || (kCausal && key > q_row[(i / 2) & 1])) x = 0.f;
      }
      p[i] = x;
    }
    wgmma_wait<0>();
    fence_acc(ds);
    bool big = false;
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      ds[i] = p[i] * (ds[i] - dl[(i / 2) & 1]);
      big |= fabsf(ds[i]) >= kDsSplitMin;
    }
    const bool split = warpgroup_any(big, cw);
    // dQ += dS K (+ lo(dS) K when split): 4 k-steps of 16 keys (A fragments packed before the fence).
    uint32_t sa[SMALL / 16][4], sl[SMALL / 16][4];
#pragma unroll
    for (int kk = 0; kk < SMALL / 16; ++kk) {
      pack_a(ds, kk, sa[kk]);
      if (split) pack_a_residue(ds, kk, sl[kk]);
    }
    fence_acc(dq);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < SMALL / 16; ++kk) wgmma_n128_rs(dq, sa[kk], desc_mnmajor(sK + kk * 2048, SMALL_HALF));
    if (split) {  // warpgroup-uniform (warpgroup_any); the fence opens the branch's wgmmas
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < SMALL / 16; ++kk) wgmma_n128_rs(dq, sl[kk], desc_mnmajor(sK + kk * 2048, SMALL_HALF));
    }
    wgmma_commit();
    wgmma_wait<0>();
    fence_acc(dq);
    if (lane == 0) mbar_arrive(bar_empty + 8 * s);
  }
  store_acc(dQ + static_cast<int64_t>(bh) * S * D, dq, q0 + cw * 64, S, scale);
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

// [B*H, S, D] bf16 with D contiguous; box = 64 columns x box_rows rows x 1 head, 128B swizzle, OOB -> 0.
CUtensorMap make_head_map(const void* base, uint64_t bh, uint64_t seq, uint32_t box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(D), seq, bh};
  const cuuint64_t strides[2] = {D * sizeof(__nv_bfloat16), seq * D * sizeof(__nv_bfloat16)};
  const cuuint32_t box[3] = {64, box_rows, 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  CUresult res = get_encode_fn()(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, const_cast<void*>(base), dims, strides,
                                 box, elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (res != CUDA_SUCCESS) TVM_FFI_THROW(RuntimeError) << "cuTensorMapEncodeTiled failed with code " << res;
  return map;
}

void check_bhsd(const tvm::ffi::TensorView& x, const char* name) {
  TVM_FFI_CHECK(x.ndim() == 4, ValueError) << name << " must be [B, H, S, D]";
  TVM_FFI_CHECK(x.dtype().code == kDLBfloat && x.dtype().bits == 16, TypeError) << name << " must be bfloat16";
  TVM_FFI_CHECK(x.size(3) == D, ValueError) << name << ": head dim must be " << D;
}

template <typename T>
T* ptr(const tvm::ffi::TensorView& x) { return static_cast<T*>(x.data_ptr()); }

}  // namespace

void run(tvm::ffi::TensorView Q, tvm::ffi::TensorView K, tvm::ffi::TensorView V, tvm::ffi::TensorView O,
         tvm::ffi::TensorView dO, tvm::ffi::TensorView L, tvm::ffi::TensorView dQ, tvm::ffi::TensorView dK,
         tvm::ffi::TensorView dV) {
  for (auto [x, name] : {std::pair{&Q, "Q"}, {&K, "K"}, {&V, "V"}, {&O, "O"}, {&dO, "dO"}, {&dQ, "dQ"},
                         {&dK, "dK"}, {&dV, "dV"}})
    check_bhsd(*x, name);
  TVM_FFI_CHECK(L.dtype().code == kDLFloat && L.dtype().bits == 32, TypeError) << "L must be float32";
  const int B = static_cast<int>(Q.size(0)), H = static_cast<int>(Q.size(1)), S = static_cast<int>(Q.size(2));
  if (B * H * S == 0) return;
  const uint64_t bh = static_cast<uint64_t>(B) * H;
  const float scale = 1.f / sqrtf(static_cast<float>(D));
  cudaStream_t stream = static_cast<cudaStream_t>(TVMFFIEnvGetStream(Q.device().device_type, Q.device().device_id));

  const CUtensorMap q_big = make_head_map(Q.data_ptr(), bh, S, BIG), q_small = make_head_map(Q.data_ptr(), bh, S, SMALL);
  const CUtensorMap do_big = make_head_map(dO.data_ptr(), bh, S, BIG), do_small = make_head_map(dO.data_ptr(), bh, S, SMALL);
  const CUtensorMap k_big = make_head_map(K.data_ptr(), bh, S, BIG), k_small = make_head_map(K.data_ptr(), bh, S, SMALL);
  const CUtensorMap v_big = make_head_map(V.data_ptr(), bh, S, BIG), v_small = make_head_map(V.data_ptr(), bh, S, SMALL);

  const int64_t pad_rows_all = static_cast<int64_t>(bh) * pad_rows(S);
  float2* delta = nullptr;  // {L log2e, Dlt} per (head, row), rows padded to pad_rows(S)
  cudaError_t err = cudaMallocAsync(reinterpret_cast<void**>(&delta), pad_rows_all * sizeof(float2), stream);
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "cudaMallocAsync: " << cudaGetErrorString(err);
  bwd_delta<<<static_cast<unsigned>((pad_rows_all + 7) / 8), 256, 0, stream>>>(
      ptr<const __nv_bfloat16>(O), ptr<const __nv_bfloat16>(dO), ptr<const float>(L), delta, S, pad_rows(S),
      static_cast<int64_t>(bh));
  for (auto fn : {reinterpret_cast<const void*>(bwd_dkdv), reinterpret_cast<const void*>(bwd_dq)}) {
    err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, SMEM_BYTES);
    if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "cudaFuncSetAttribute: " << cudaGetErrorString(err);
  }
  const dim3 grid((S + BIG - 1) / BIG, static_cast<unsigned>(bh));
  bwd_dkdv<<<grid, kThreads, SMEM_BYTES, stream>>>(k_big, v_big, q_small, do_small, delta,
                                                   ptr<__nv_bfloat16>(dK), ptr<__nv_bfloat16>(dV), S, scale);
  bwd_dq<<<grid, kThreads, SMEM_BYTES, stream>>>(q_big, do_big, k_small, v_small, delta,
                                                 ptr<__nv_bfloat16>(dQ), S, scale);
  err = cudaGetLastError();
  cudaFreeAsync(delta, stream);
  if (err != cudaSuccess) TVM_FFI_THROW(RuntimeError) << "kernel launch: " << cudaGetErrorString(err);
}

TVM_FFI_DLL_EXPORT_TYPED_FUNC(run, run);
