// ptx_wgmma.cuh -- Hopper warpgroup MMA (wgmma.mma_async, sm_90a only) for BF16 inputs with FP32
// accumulation: D[64 x N] (+)= A[64 x 16] * B[16 x N], every N from 8 to 256 in steps of 8, in two forms:
//   wgmma_m64n<N>k16_ss<TRANS_A, TRANS_B>(acc, desc_a, desc_b, scale_d)  A and B in shared memory
//   wgmma_m64n<N>k16_rs<TRANS_B>(acc, a_frag, desc_b, scale_d)           A in registers, B in shared memory
// scale_d = 0: D = A*B (first k-step of a tile); 1: D += A*B. TRANS_x = 0: operand is K-major (K contiguous);
// 1: MN-major. Executed by all 128 threads of a warpgroup, converged. Needs ptx_sync.cuh.
//
// Accumulator fragment (acc has N/2 floats per thread): thread t of the warpgroup, warp w = t/32, lane l:
//   row r = 16*w + l/4; for each 8-column chunk j (0 <= j < N/8), c = 8*j + 2*(l%4):
//   acc[4j+0] = D[r][c], acc[4j+1] = D[r][c+1], acc[4j+2] = D[r+8][c], acc[4j+3] = D[r+8][c+1].
// Register A fragment (4 x bf16x2 per thread, lower column in the low half), same r and c0 = 2*(l%4):
//   a[0] = A[r][c0..c0+1], a[1] = A[r+8][c0..c0+1], a[2] = A[r][c0+8..c0+9], a[3] = A[r+8][c0+8..c0+9].
//   The accumulator of S = Q*K^T (two adjacent 8-col chunks j=2i, 2i+1) maps to the A fragment of k-step i
//   via pack_bf16x2: a[0]=(acc[8i],acc[8i+1]) a[1]=(acc[8i+2],acc[8i+3]) a[2]=(acc[8i+4],acc[8i+5]) a[3]=(acc[8i+6],acc[8i+7]).

// ---- ordering -------------------------------------------------------------------------------------------
// Before the first wgmma of a batch, and whenever registers (accumulators or A fragments) were touched by
// other instructions since the last wgmma.
PTXB_DEV void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
// Close all prior uncommitted wgmma of this warpgroup into one wgmma-group.
PTXB_DEV void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Wait until at most N wgmma-groups are pending. Accumulators of completed groups may then be read.
template <int N> PTXB_DEV void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" :: "n"(N) : "memory"); }
// Compiler-only fence on accumulator registers: keeps the compiler from moving reads/writes of `acc`
// across wgmma_fence/commit/wait. Apply to every accumulator array around each wgmma batch.
template <int K> PTXB_DEV void wgmma_fence_acc(float (&acc)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) asm volatile("" : "+f"(acc[i]) :: "memory");
}
template <int K> PTXB_DEV void wgmma_fence_regs(uint32_t (&r)[K]) {
#pragma unroll
  for (int i = 0; i < K; ++i) asm volatile("" : "+r"(r[i]) :: "memory");
}

// ---- operand lists (accumulators are operands %0 .. %(N/2-1)) -------------------------------------------
#define PTXB_ACC8 "%0, %1, %2, %3"
#define PTXB_ACC16 PTXB_ACC8 ", %4, %5, %6, %7"
#define PTXB_ACC24 PTXB_ACC16 ", %8, %9, %10, %11"
#define PTXB_ACC32 PTXB_ACC24 ", %12, %13, %14, %15"
#define PTXB_ACC40 PTXB_ACC32 ", %16, %17, %18, %19"
#define PTXB_ACC48 PTXB_ACC40 ", %20, %21, %22, %23"
#define PTXB_ACC56 PTXB_ACC48 ", %24, %25, %26, %27"
#define PTXB_ACC64 PTXB_ACC56 ", %28, %29, %30, %31"
#define PTXB_ACC72 PTXB_ACC64 ", %32, %33, %34, %35"
#define PTXB_ACC80 PTXB_ACC72 ", %36, %37, %38, %39"
#define PTXB_ACC88 PTXB_ACC80 ", %40, %41, %42, %43"
#define PTXB_ACC96 PTXB_ACC88 ", %44, %45, %46, %47"
#define PTXB_ACC104 PTXB_ACC96 ", %48, %49, %50, %51"
#define PTXB_ACC112 PTXB_ACC104 ", %52, %53, %54, %55"
#define PTXB_ACC120 PTXB_ACC112 ", %56, %57, %58, %59"
#define PTXB_ACC128 PTXB_ACC120 ", %60, %61, %62, %63"
#define PTXB_ACC136 PTXB_ACC128 ", %64, %65, %66, %67"
#define PTXB_ACC144 PTXB_ACC136 ", %68, %69, %70, %71"
#define PTXB_ACC152 PTXB_ACC144 ", %72, %73, %74, %75"
#define PTXB_ACC160 PTXB_ACC152 ", %76, %77, %78, %79"
#define PTXB_ACC168 PTXB_ACC160 ", %80, %81, %82, %83"
#define PTXB_ACC176 PTXB_ACC168 ", %84, %85, %86, %87"
#define PTXB_ACC184 PTXB_ACC176 ", %88, %89, %90, %91"
#define PTXB_ACC192 PTXB_ACC184 ", %92, %93, %94, %95"
#define PTXB_ACC200 PTXB_ACC192 ", %96, %97, %98, %99"
#define PTXB_ACC208 PTXB_ACC200 ", %100, %101, %102, %103"
#define PTXB_ACC216 PTXB_ACC208 ", %104, %105, %106, %107"
#define PTXB_ACC224 PTXB_ACC216 ", %108, %109, %110, %111"
#define PTXB_ACC232 PTXB_ACC224 ", %112, %113, %114, %115"
#define PTXB_ACC240 PTXB_ACC232 ", %116, %117, %118, %119"
#define PTXB_ACC248 PTXB_ACC240 ", %120, %121, %122, %123"
#define PTXB_ACC256 PTXB_ACC248 ", %124, %125, %126, %127"

#define PTXB_C4(d, j) "+f"(d[4 * j]), "+f"(d[4 * j + 1]), "+f"(d[4 * j + 2]), "+f"(d[4 * j + 3])
#define PTXB_CON8(d) PTXB_C4(d, 0)
#define PTXB_CON16(d) PTXB_CON8(d), PTXB_C4(d, 1)
#define PTXB_CON24(d) PTXB_CON16(d), PTXB_C4(d, 2)
#define PTXB_CON32(d) PTXB_CON24(d), PTXB_C4(d, 3)
#define PTXB_CON40(d) PTXB_CON32(d), PTXB_C4(d, 4)
#define PTXB_CON48(d) PTXB_CON40(d), PTXB_C4(d, 5)
#define PTXB_CON56(d) PTXB_CON48(d), PTXB_C4(d, 6)
#define PTXB_CON64(d) PTXB_CON56(d), PTXB_C4(d, 7)
#define PTXB_CON72(d) PTXB_CON64(d), PTXB_C4(d, 8)
#define PTXB_CON80(d) PTXB_CON72(d), PTXB_C4(d, 9)
#define PTXB_CON88(d) PTXB_CON80(d), PTXB_C4(d, 10)
#define PTXB_CON96(d) PTXB_CON88(d), PTXB_C4(d, 11)
#define PTXB_CON104(d) PTXB_CON96(d), PTXB_C4(d, 12)
#define PTXB_CON112(d) PTXB_CON104(d), PTXB_C4(d, 13)
#define PTXB_CON120(d) PTXB_CON112(d), PTXB_C4(d, 14)
#define PTXB_CON128(d) PTXB_CON120(d), PTXB_C4(d, 15)
#define PTXB_CON136(d) PTXB_CON128(d), PTXB_C4(d, 16)
#define PTXB_CON144(d) PTXB_CON136(d), PTXB_C4(d, 17)
#define PTXB_CON152(d) PTXB_CON144(d), PTXB_C4(d, 18)
#define PTXB_CON160(d) PTXB_CON152(d), PTXB_C4(d, 19)
#define PTXB_CON168(d) PTXB_CON160(d), PTXB_C4(d, 20)
#define PTXB_CON176(d) PTXB_CON168(d), PTXB_C4(d, 21)
#define PTXB_CON184(d) PTXB_CON176(d), PTXB_C4(d, 22)
#define PTXB_CON192(d) PTXB_CON184(d), PTXB_C4(d, 23)
#define PTXB_CON200(d) PTXB_CON192(d), PTXB_C4(d, 24)
#define PTXB_CON208(d) PTXB_CON200(d), PTXB_C4(d, 25)
#define PTXB_CON216(d) PTXB_CON208(d), PTXB_C4(d, 26)
#define PTXB_CON224(d) PTXB_CON216(d), PTXB_C4(d, 27)
#define PTXB_CON232(d) PTXB_CON224(d), PTXB_C4(d, 28)
#define PTXB_CON240(d) PTXB_CON232(d), PTXB_C4(d, 29)
#define PTXB_CON248(d) PTXB_CON240(d), PTXB_C4(d, 30)
#define PTXB_CON256(d) PTXB_CON248(d), PTXB_C4(d, 31)

// ---- the instructions; I0..I6 are the operand numbers that follow the N/2 accumulators -----------------
#define PTXB_WGMMA_BF16(N, I0, I1, I2, I3, I4, I5, I6)                                                          \
  template <int TRANS_A = 0, int TRANS_B = 0>                                                                   \
  PTXB_DEV void wgmma_m64n##N##k16_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, int scale_d) {       \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #I2 ", 0;\n"                                              \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" PTXB_ACC##N "}, %" #I0 ", %" #I1  \
                 ", p, 1, 1, %" #I3 ", %" #I4 ";\n}"                                                            \
                 : PTXB_CON##N(d)                                                                               \
                 : "l"(desc_a), "l"(desc_b), "r"(scale_d), "n"(TRANS_A), "n"(TRANS_B));                         \
  }                                                                                                             \
  template <int TRANS_B = 0>                                                                                    \
  PTXB_DEV void wgmma_m64n##N##k16_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b, int scale_d) { \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" #I5 ", 0;\n"                                              \
                 "wgmma.mma_async.sync.aligned.m64n" #N "k16.f32.bf16.bf16 {" PTXB_ACC##N "}, {%" #I0 ", %" #I1 \
                 ", %" #I2 ", %" #I3 "}, %" #I4 ", p, 1, 1, %" #I6 ";\n}"                                       \
                 : PTXB_CON##N(d)                                                                               \
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(scale_d), "n"(TRANS_B));        \
  }

PTXB_WGMMA_BF16(8, 4, 5, 6, 7, 8, 9, 10)
PTXB_WGMMA_BF16(16, 8, 9, 10, 11, 12, 13, 14)
PTXB_WGMMA_BF16(24, 12, 13, 14, 15, 16, 17, 18)
PTXB_WGMMA_BF16(32, 16, 17, 18, 19, 20, 21, 22)
PTXB_WGMMA_BF16(40, 20, 21, 22, 23, 24, 25, 26)
PTXB_WGMMA_BF16(48, 24, 25, 26, 27, 28, 29, 30)
PTXB_WGMMA_BF16(56, 28, 29, 30, 31, 32, 33, 34)
PTXB_WGMMA_BF16(64, 32, 33, 34, 35, 36, 37, 38)
PTXB_WGMMA_BF16(72, 36, 37, 38, 39, 40, 41, 42)
PTXB_WGMMA_BF16(80, 40, 41, 42, 43, 44, 45, 46)
PTXB_WGMMA_BF16(88, 44, 45, 46, 47, 48, 49, 50)
PTXB_WGMMA_BF16(96, 48, 49, 50, 51, 52, 53, 54)
PTXB_WGMMA_BF16(104, 52, 53, 54, 55, 56, 57, 58)
PTXB_WGMMA_BF16(112, 56, 57, 58, 59, 60, 61, 62)
PTXB_WGMMA_BF16(120, 60, 61, 62, 63, 64, 65, 66)
PTXB_WGMMA_BF16(128, 64, 65, 66, 67, 68, 69, 70)
PTXB_WGMMA_BF16(136, 68, 69, 70, 71, 72, 73, 74)
PTXB_WGMMA_BF16(144, 72, 73, 74, 75, 76, 77, 78)
PTXB_WGMMA_BF16(152, 76, 77, 78, 79, 80, 81, 82)
PTXB_WGMMA_BF16(160, 80, 81, 82, 83, 84, 85, 86)
PTXB_WGMMA_BF16(168, 84, 85, 86, 87, 88, 89, 90)
PTXB_WGMMA_BF16(176, 88, 89, 90, 91, 92, 93, 94)
PTXB_WGMMA_BF16(184, 92, 93, 94, 95, 96, 97, 98)
PTXB_WGMMA_BF16(192, 96, 97, 98, 99, 100, 101, 102)
PTXB_WGMMA_BF16(200, 100, 101, 102, 103, 104, 105, 106)
PTXB_WGMMA_BF16(208, 104, 105, 106, 107, 108, 109, 110)
PTXB_WGMMA_BF16(216, 108, 109, 110, 111, 112, 113, 114)
PTXB_WGMMA_BF16(224, 112, 113, 114, 115, 116, 117, 118)
PTXB_WGMMA_BF16(232, 116, 117, 118, 119, 120, 121, 122)
PTXB_WGMMA_BF16(240, 120, 121, 122, 123, 124, 125, 126)
PTXB_WGMMA_BF16(248, 124, 125, 126, 127, 128, 129, 130)
PTXB_WGMMA_BF16(256, 128, 129, 130, 131, 132, 133, 134)

// ---- epilogue: accumulator fragment -> bf16 row-major global matrix ---------------------------------------
// The warpgroup's 64 x N tile goes to rows row0.., columns col0..; elements with row >= m_limit or
// col >= n_limit are skipped. Paired stores need ld and col0 even and a 4-byte aligned `out`.
template <int N>
PTXB_DEV void wgmma_store_acc_bf16(const float (&acc)[N / 2], __nv_bfloat16* out, int64_t ld, int row0, int col0,
                                   int m_limit, int n_limit) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
  const int r = row0 + 16 * w + l / 4;
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    const int c = col0 + 8 * j + 2 * (l % 4);
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // h = 0: row r, h = 1: row r + 8
      const int rr = r + 8 * h;
      if (rr >= m_limit || c >= n_limit) continue;
      __nv_bfloat16* p = out + (int64_t)rr * ld + c;
      if (c + 1 < n_limit) {
        *reinterpret_cast<uint32_t*>(p) = pack_bf16x2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
      } else {
        *p = __float2bfloat16(acc[4 * j + 2 * h]);
      }
    }
  }
}

// ---- attention helpers on a 64 x N accumulator (each thread owns rows r and r + 8) -----------------------
// Row maxima / sums over the full row (includes the quad shuffle): out[0] for row r, out[1] for row r + 8.
template <int N>
PTXB_DEV void wgmma_acc_row_max(const float (&acc)[N / 2], float (&out)[2]) {
  float m0 = -INFINITY, m1 = -INFINITY;
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    m0 = fmaxf(m0, fmaxf(acc[4 * j], acc[4 * j + 1]));
    m1 = fmaxf(m1, fmaxf(acc[4 * j + 2], acc[4 * j + 3]));
  }
  out[0] = quad_max(m0);
  out[1] = quad_max(m1);
}
template <int N>
PTXB_DEV void wgmma_acc_row_sum(const float (&acc)[N / 2], float (&out)[2]) {
  float s0 = 0.f, s1 = 0.f;
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    s0 += acc[4 * j] + acc[4 * j + 1];
    s1 += acc[4 * j + 2] + acc[4 * j + 3];
  }
  out[0] = quad_sum(s0);
  out[1] = quad_sum(s1);
}
// acc[row r] *= s[0], acc[row r + 8] *= s[1] (e.g. O *= exp2(m_old - m_new) in online softmax).
template <int N>
PTXB_DEV void wgmma_acc_scale_rows(float (&acc)[N / 2], const float (&s)[2]) {
#pragma unroll
  for (int j = 0; j < N / 8; ++j) {
    acc[4 * j] *= s[0]; acc[4 * j + 1] *= s[0];
    acc[4 * j + 2] *= s[1]; acc[4 * j + 3] *= s[1];
  }
}
// bf16 A fragment of k16 slice `ks` (columns 16*ks .. 16*ks+15) of a 64 x N fp32 accumulator:
// feeds P = softmax(S) into the RS wgmma computing O += P V without touching shared memory.
template <int N>
PTXB_DEV void wgmma_acc_to_afrag(const float (&acc)[N / 2], int ks, uint32_t (&a)[4]) {
  a[0] = pack_bf16x2(acc[8 * ks + 0], acc[8 * ks + 1]);
  a[1] = pack_bf16x2(acc[8 * ks + 2], acc[8 * ks + 3]);
  a[2] = pack_bf16x2(acc[8 * ks + 4], acc[8 * ks + 5]);
  a[3] = pack_bf16x2(acc[8 * ks + 6], acc[8 * ks + 7]);
}

// ---- epilogue through shared memory: accumulator -> bf16 128B-swizzled smem tile (for tma_store) --------
// The warpgroup's 64 x N tile (N multiple of 16) is written as N/64 boxes of 64 rows x 64 bf16
// (8 KB each, 1024-B aligned, box b at smem_tile + b * 8192), exactly the layout a TMA store with
// box {64, 64} and CU_TENSOR_MAP_SWIZZLE_128B reads. Afterwards: fence_proxy_async_shared(),
// named_barrier_sync(id, 128), then one thread issues tma_store<2> per box at {col0 + 64*b, row0},
// tma_store_commit(), and tma_store_wait_read<0>() before the smem is reused.
template <int N>
PTXB_DEV void wgmma_store_acc_bf16_smem_sw128(const float (&acc)[N / 2], uint32_t smem_tile) {
  const int t = threadIdx.x % 128, w = t / 32, l = t % 32;
  const int q = l / 8, i = l % 8;                 // this lane addresses row i of matrix q of the x4
#pragma unroll
  for (int j = 0; j < N / 8; j += 2) {            // two 8-column chunks = four 8x8 matrices per stmatrix
    const int jj = j + q / 2;                     // chunk of matrix q
    const int row = 16 * w + 8 * (q % 2) + i;     // tile row of the addressed 16-B row segment
    const uint32_t addr = smem_tile + (jj / 8) * 8192 + row * 128 + (((jj % 8) ^ (row % 8)) << 4);
    stmatrix_x4(addr, pack_bf16x2(acc[4 * j], acc[4 * j + 1]), pack_bf16x2(acc[4 * j + 2], acc[4 * j + 3]),
                pack_bf16x2(acc[4 * j + 4], acc[4 * j + 5]), pack_bf16x2(acc[4 * j + 6], acc[4 * j + 7]));
  }
}
