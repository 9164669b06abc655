// ptx_tcgen05.cuh -- Blackwell 5th-generation tensor cores (tcgen05.*, sm_100a): tensor memory (TMEM)
// allocation, MMA kind::f16 (BF16/F16 inputs, FP32 accumulation in TMEM) with cta_group 1 and 2,
// instruction and shared-memory descriptors, commit to mbarrier (and multicast), TMEM <-> register
// ld/st, shared -> TMEM copy, fences and waits, and TMA loads for CTA pairs. Needs ptx_sync.cuh,
// ptx_mbarrier.cuh and ptx_tma.cuh.
// TMEM: 128 lanes x 512 columns of 32-bit cells per SM. Address = (lane << 16) | column.

// ---- allocation (one whole warp executes each; the same warp allocates and deallocates) ---------------
// ncols: power of two, 32..512. The TMEM base address is written to the 4-byte smem slot dst_smem;
// read it after a fence_before / barrier / fence_after sequence.
PTXB_DEV void tmem_alloc(uint32_t dst_smem, uint32_t ncols) {
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" :: "r"(dst_smem), "r"(ncols) : "memory");
}
PTXB_DEV void tmem_relinquish_alloc_permit() {  // this CTA will not allocate again (lets others allocate)
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
}
PTXB_DEV void tmem_dealloc(uint32_t taddr, uint32_t ncols) {  // all TMEM reads/writes/MMAs must be complete
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" :: "r"(taddr), "r"(ncols) : "memory");
}
// CTA-pair variants: one warp in EACH of the two CTAs executes them; allocates the same columns in both.
PTXB_DEV void tmem_alloc_2cta(uint32_t dst_smem, uint32_t ncols) {
  asm volatile("tcgen05.alloc.cta_group::2.sync.aligned.shared::cta.b32 [%0], %1;" :: "r"(dst_smem), "r"(ncols) : "memory");
}
PTXB_DEV void tmem_relinquish_alloc_permit_2cta() {
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::2.sync.aligned;" ::: "memory");
}
PTXB_DEV void tmem_dealloc_2cta(uint32_t taddr, uint32_t ncols) {
  asm volatile("tcgen05.dealloc.cta_group::2.sync.aligned.b32 %0, %1;" :: "r"(taddr), "r"(ncols) : "memory");
}
__host__ __device__ constexpr uint32_t tmem_addr(uint32_t base, uint32_t lane, uint32_t col) {
  return base + (lane << 16) + col;
}

// ---- descriptors ----------------------------------------------------------------------------------------
// Shared-memory matrix descriptor (64 bit): [0,14) start >> 4 | [16,30) LBO >> 4 | [32,46) SBO >> 4 |
// [46,49) fixed 0b001 | [49,52) base offset | [52] LBO mode (0 = relative) | [61,64) swizzle.
// Same LBO/SBO meaning as Hopper wgmma descriptors; different swizzle codes and the version bit 46.
enum UmmaSwizzle : uint32_t {
  UMMA_SWIZZLE_NONE = 0, UMMA_SWIZZLE_128B_BASE32B = 1, UMMA_SWIZZLE_128B = 2, UMMA_SWIZZLE_64B = 4, UMMA_SWIZZLE_32B = 6
};
__host__ __device__ constexpr uint64_t make_umma_smem_desc(uint32_t smem_addr, uint32_t lbo_bytes, uint32_t sbo_bytes,
                                                           UmmaSwizzle swizzle, uint32_t base_offset = 0) {
  return (uint64_t)((smem_addr & 0x3FFFFu) >> 4) | ((uint64_t)((lbo_bytes >> 4) & 0x3FFFu) << 16) |
         ((uint64_t)((sbo_bytes >> 4) & 0x3FFFu) << 32) | (1ull << 46) | ((uint64_t)(base_offset & 7u) << 49) |
         ((uint64_t)swizzle << 61);
}
// K-major, 128B swizzle (TMA box inner dim = 64 bf16): SBO = 1024 (8 rows x 128 B), LBO unused (16).
// Next k16 slice: start + 32 B. Next 8-row group: + 1024 B.
__host__ __device__ constexpr uint64_t umma_desc_kmajor_sw128(uint32_t smem_addr) {
  return make_umma_smem_desc(smem_addr, 16, 1024, UMMA_SWIZZLE_128B);
}
// Instruction descriptor (32 bit) for kind::f16 with BF16 A/B and FP32 D:
// [4,6) D type (1 = F32) | [7,10) A type (1 = BF16) | [10,13) B type (1 = BF16) | [13] negate A | [14] negate B |
// [15] A MN-major | [16] B MN-major | [17,23) N >> 3 | [24,29) M >> 4. Dense: bits 0-3 zero.
// Shapes: cta_group::1: M = 64 or 128, N = 8..256 step 8 (M=64) / 16..256 step 16 (M=128 needs N%16==0);
//         cta_group::2: M = 128 or 256 (the pair's total), N = 16..256 step 16. K = 16 per instruction.
__host__ __device__ constexpr uint32_t make_umma_idesc_bf16(uint32_t M, uint32_t N, uint32_t a_mn_major = 0,
                                                            uint32_t b_mn_major = 0) {
  return (1u << 4) | (1u << 7) | (1u << 10) | ((a_mn_major & 1u) << 15) | ((b_mn_major & 1u) << 16) |
         ((N >> 3) << 17) | ((M >> 4) << 24);
}

// ---- MMA (issued by ONE thread; asynchronous; completion only through umma_commit) -----------------------
// D[tmem] (+)= A * B. accumulate = 0 overwrites D (first k-step), 1 accumulates.
PTXB_DEV void umma_bf16_ss(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc, uint32_t accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
               "tcgen05.mma.cta_group::1.kind::f16 [%0], %1, %2, %3, p;\n}"
               :: "r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate) : "memory");
}
// A read from TMEM (K-major, e.g. P of attention kept in TMEM), B from shared memory.
PTXB_DEV void umma_bf16_ts(uint32_t d_tmem, uint32_t a_tmem, uint64_t b_desc, uint32_t idesc, uint32_t accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
               "tcgen05.mma.cta_group::1.kind::f16 [%0], [%1], %2, %3, p;\n}"
               :: "r"(d_tmem), "r"(a_tmem), "l"(b_desc), "r"(idesc), "r"(accumulate) : "memory");
}
// CTA pair (cluster of >= 2, pair = ranks 2i, 2i+1): issued by one thread of the EVEN-rank CTA only.
// Each CTA holds its half of A (M/2 rows) and its half of B (N/2 columns) at the same smem offsets,
// D rows 0..M/2-1 land in the even CTA's TMEM, the rest in the odd CTA's TMEM.
PTXB_DEV void umma_bf16_ss_2cta(uint32_t d_tmem, uint64_t a_desc, uint64_t b_desc, uint32_t idesc, uint32_t accumulate) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %4, 0;\n"
               "tcgen05.mma.cta_group::2.kind::f16 [%0], %1, %2, %3, p;\n}"
               :: "r"(d_tmem), "l"(a_desc), "l"(b_desc), "r"(idesc), "r"(accumulate) : "memory");
}
// Arrive (count 1) on `mbar` once all prior tcgen05.mma/cp issued by THIS thread complete. Use it to free
// smem stages and to signal "accumulator ready"; waiters call tcgen05_fence_after() after their wait.
PTXB_DEV void umma_commit(uint32_t mbar) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" :: "r"(mbar) : "memory");
}
// Pair version: arrive on the mbarrier at the same offset in every CTA of cta_mask (e.g. 0b11 << pair_base).
PTXB_DEV void umma_commit_2cta_multicast(uint32_t mbar, uint16_t cta_mask) {
  asm volatile("tcgen05.commit.cta_group::2.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
               :: "r"(mbar), "h"(cta_mask) : "memory");
}
PTXB_DEV void umma_commit_multicast(uint32_t mbar, uint16_t cta_mask) {
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.multicast::cluster.b64 [%0], %1;"
               :: "r"(mbar), "h"(cta_mask) : "memory");
}

// ---- ordering ------------------------------------------------------------------------------------------
// Around a thread synchronisation (bar.sync / mbarrier) that orders tcgen05 work between threads:
// producer side: tcgen05 op ... fence_before ... sync;  consumer side: sync ... fence_after ... tcgen05 op.
PTXB_DEV void tcgen05_fence_before() { asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory"); }
PTXB_DEV void tcgen05_fence_after() { asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory"); }
PTXB_DEV void tmem_wait_ld() { asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory"); }  // before using ld results
PTXB_DEV void tmem_wait_st() { asm volatile("tcgen05.wait::st.sync.aligned;" ::: "memory"); }  // before MMA reads st data

// ---- shared -> TMEM copy (one thread; asynchronous, tracked by umma_commit like an MMA) ------------------
// 128 lanes x 256 bits (8 cells) per instruction, source described by a smem descriptor.
PTXB_DEV void tmem_cp_128x256b(uint32_t taddr, uint64_t src_desc) {
  asm volatile("tcgen05.cp.cta_group::1.128x256b [%0], %1;" :: "r"(taddr), "l"(src_desc) : "memory");
}
PTXB_DEV void tmem_cp_128x128b(uint32_t taddr, uint64_t src_desc) {
  asm volatile("tcgen05.cp.cta_group::1.128x128b [%0], %1;" :: "r"(taddr), "l"(src_desc) : "memory");
}
PTXB_DEV void tmem_cp_4x256b(uint32_t taddr, uint64_t src_desc) {
  asm volatile("tcgen05.cp.cta_group::1.4x256b [%0], %1;" :: "r"(taddr), "l"(src_desc) : "memory");
}

// ---- TMEM <-> registers, shape 32x32b: warp w of a warpgroup reaches lanes 32*(w%4) .. 32*(w%4)+31 only.
// Thread i of the warp gets lane (32*(w%4) + i), columns col .. col+NUM-1 (one 32-bit cell per register).
// For an M=128 cta_group::1 FP32 accumulator: lane = row of D, column = col of D (base + n).
// For M=64: rows 16*w' .. live in lanes 32*w' .. 32*w'+15 (upper 16 lanes of each quarter unused).
// All 32 lanes pass the same taddr (the warp's first lane | column). Call tmem_wait_ld() before use.
#define PTXB_TS1 "%0"
#define PTXB_TS2 "%0, %1"
#define PTXB_TS4 "%0, %1, %2, %3"
#define PTXB_TS8_0 "%0, %1, %2, %3, %4, %5, %6, %7"
#define PTXB_TS8_1 ", %8, %9, %10, %11, %12, %13, %14, %15"
#define PTXB_TS8_2 ", %16, %17, %18, %19, %20, %21, %22, %23"
#define PTXB_TS8_3 ", %24, %25, %26, %27, %28, %29, %30, %31"
#define PTXB_TS8_4 ", %32, %33, %34, %35, %36, %37, %38, %39"
#define PTXB_TS8_5 ", %40, %41, %42, %43, %44, %45, %46, %47"
#define PTXB_TS8_6 ", %48, %49, %50, %51, %52, %53, %54, %55"
#define PTXB_TS8_7 ", %56, %57, %58, %59, %60, %61, %62, %63"
#define PTXB_TS8 PTXB_TS8_0
#define PTXB_TS16 PTXB_TS8 PTXB_TS8_1
#define PTXB_TS32 PTXB_TS16 PTXB_TS8_2 PTXB_TS8_3
#define PTXB_TS64 PTXB_TS32 PTXB_TS8_4 PTXB_TS8_5 PTXB_TS8_6 PTXB_TS8_7
#define PTXB_TO1(r, b) "=r"(r[b])
#define PTXB_TO2(r, b) PTXB_TO1(r, b), PTXB_TO1(r, b + 1)
#define PTXB_TO4(r, b) PTXB_TO2(r, b), PTXB_TO2(r, b + 2)
#define PTXB_TO8(r, b) PTXB_TO4(r, b), PTXB_TO4(r, b + 4)
#define PTXB_TO16(r, b) PTXB_TO8(r, b), PTXB_TO8(r, b + 8)
#define PTXB_TO32(r, b) PTXB_TO16(r, b), PTXB_TO16(r, b + 16)
#define PTXB_TO64(r, b) PTXB_TO32(r, b), PTXB_TO32(r, b + 32)
#define PTXB_TI1(r, b) "r"(r[b])
#define PTXB_TI2(r, b) PTXB_TI1(r, b), PTXB_TI1(r, b + 1)
#define PTXB_TI4(r, b) PTXB_TI2(r, b), PTXB_TI2(r, b + 2)
#define PTXB_TI8(r, b) PTXB_TI4(r, b), PTXB_TI4(r, b + 4)
#define PTXB_TI16(r, b) PTXB_TI8(r, b), PTXB_TI8(r, b + 8)
#define PTXB_TI32(r, b) PTXB_TI16(r, b), PTXB_TI16(r, b + 16)
#define PTXB_TI64(r, b) PTXB_TI32(r, b), PTXB_TI32(r, b + 32)
#define PTXB_TMEM_LDST(NUM)                                                                                 \
  PTXB_DEV void tmem_ld_32x32b_x##NUM(uint32_t taddr, uint32_t (&r)[NUM]) {                                 \
    asm volatile("tcgen05.ld.sync.aligned.32x32b.x" #NUM ".b32 {" PTXB_TS##NUM "}, [%" #NUM "];"           \
                 : PTXB_TO##NUM(r, 0) : "r"(taddr) : "memory");                                              \
  }                                                                                                         \
  PTXB_DEV void tmem_st_32x32b_x##NUM(uint32_t taddr, const uint32_t (&r)[NUM]) {                           \
    asm volatile("tcgen05.st.sync.aligned.32x32b.x" #NUM ".b32 [%" #NUM "], {" PTXB_TS##NUM "};"           \
                 :: PTXB_TI##NUM(r, 0), "r"(taddr) : "memory");                                              \
  }
PTXB_TMEM_LDST(1)
PTXB_TMEM_LDST(2)
PTXB_TMEM_LDST(4)
PTXB_TMEM_LDST(8)
PTXB_TMEM_LDST(16)
PTXB_TMEM_LDST(32)
PTXB_TMEM_LDST(64)

// ---- TMA for CTA pairs (sm_100a): each CTA loads its own half-tile into its own smem, but the
// complete_tx goes to the mbarrier of the EVEN (leader) CTA of the pair, which expects the bytes of both
// halves. mbar_leader = map_shared_to_rank(smem_u32(&bar), cluster_ctarank() & ~1u).
template <int R>
PTXB_DEV void tma_load_2cta(uint32_t dst_smem, const CUtensorMap* tmap, uint32_t mbar_leader, const int32_t (&c)[R]) {
  const uint64_t t = tmap_u64(tmap);
  if constexpr (R == 2) {
    asm volatile("cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];"
                 :: "r"(dst_smem), "l"(t), "r"(mbar_leader), "r"(c[0]), "r"(c[1]) : "memory");
  } else {
    static_assert(R == 3, "2-CTA wrapper: rank 2 or 3");
    asm volatile("cp.async.bulk.tensor.3d.cta_group::2.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];"
                 :: "r"(dst_smem), "l"(t), "r"(mbar_leader), "r"(c[0]), "r"(c[1]), "r"(c[2]) : "memory");
  }
}
// Multicast within the cluster + pair signalling (e.g. B tile shared by several pairs).
PTXB_DEV void tma_load_2cta_multicast_2d(uint32_t dst_smem, const CUtensorMap* tmap, uint32_t mbar_leader,
                                         uint16_t cta_mask, int32_t c0, int32_t c1) {
  asm volatile("cp.async.bulk.tensor.2d.cta_group::2.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               ".multicast::cluster [%0], [%1, {%4, %5}], [%2], %3;"
               :: "r"(dst_smem), "l"(tmap_u64(tmap)), "r"(mbar_leader), "h"(cta_mask), "r"(c0), "r"(c1) : "memory");
}

// ---- epilogue: M = 128 FP32 accumulator in TMEM -> bf16 row-major global matrix ---------------------------
// Executed by the 4 warps of one warpgroup (w % 4 = 0..3), after mbar_wait(acc_full) + tcgen05_fence_after().
// Accumulator columns [acc_col, acc_col + N) (N multiple of 32); tile row 32*(w%4) + lane goes to global
// row row0 + that; columns col0.. . Vector stores need ld and col0 multiples of 8 and a 16-B aligned `out`.
template <int N>
PTXB_DEV void umma_store_acc_bf16(uint32_t tmem_base, uint32_t acc_col, __nv_bfloat16* out, int64_t ld, int row0,
                                  int col0, int m_limit, int n_limit) {
  const uint32_t quarter = (threadIdx.x / 32) % 4;
  const int row = row0 + 32 * (int)quarter + (int)lane_id();
#pragma unroll 1
  for (int c = 0; c < N; c += 32) {
    uint32_t r[32];
    tmem_ld_32x32b_x32(tmem_addr(tmem_base, 32 * quarter, acc_col + c), r);  // warp-collective: all lanes
    tmem_wait_ld();
    if (row >= m_limit) continue;
    __nv_bfloat16* dst = out + (int64_t)row * ld + col0 + c;
#pragma unroll
    for (int k = 0; k < 32; k += 8) {
      const int col = col0 + c + k;
      if (col + 8 <= n_limit) {
        uint4 v;
        v.x = pack_bf16x2(__uint_as_float(r[k]), __uint_as_float(r[k + 1]));
        v.y = pack_bf16x2(__uint_as_float(r[k + 2]), __uint_as_float(r[k + 3]));
        v.z = pack_bf16x2(__uint_as_float(r[k + 4]), __uint_as_float(r[k + 5]));
        v.w = pack_bf16x2(__uint_as_float(r[k + 6]), __uint_as_float(r[k + 7]));
        st_global_v4(dst + k, v);
      } else {
        for (int e = 0; e < 8 && col + e < n_limit; ++e) dst[k + e] = __float2bfloat16(__uint_as_float(r[k + e]));
      }
    }
  }
}

// ---- P (probabilities) into TMEM for a TS MMA (A operand from tensor memory) ------------------------------
// Row `lane` of this warp's quarter gets NUM2 = 2*NUM bf16 values packed two per 32-bit cell (lower column
// in the low half), cells tcol .. tcol + NUM - 1. A 128 x 16 bf16 A slice therefore spans 8 columns.
// Follow with tmem_wait_st(), tcgen05_fence_before() and a barrier before the MMA thread issues umma_bf16_ts.
template <int NUM>
PTXB_DEV void tmem_store_bf16_pairs(uint32_t tmem_base, uint32_t tcol, const float (&p)[2 * NUM]) {
  static_assert(NUM == 8 || NUM == 16 || NUM == 32 || NUM == 64, "NUM cells: 8, 16, 32 or 64");
  uint32_t r[NUM];
#pragma unroll
  for (int i = 0; i < NUM; ++i) r[i] = pack_bf16x2(p[2 * i], p[2 * i + 1]);
  const uint32_t taddr = tmem_addr(tmem_base, 32 * ((threadIdx.x / 32) % 4), tcol);
  if constexpr (NUM == 8) tmem_st_32x32b_x8(taddr, r);
  else if constexpr (NUM == 16) tmem_st_32x32b_x16(taddr, r);
  else if constexpr (NUM == 32) tmem_st_32x32b_x32(taddr, r);
  else tmem_st_32x32b_x64(taddr, r);
}
