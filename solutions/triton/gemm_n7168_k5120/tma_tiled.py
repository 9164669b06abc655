# C = A @ B.T (bf16 in, fp32 accumulate, bf16 out). Definition order: inputs (A [M, K], B [N, K]), outputs (C).
# One program per 128 x 256 output tile, row tiles grouped by 8 for L2 reuse. Operands and result move through
# host-side tensor descriptors (TensorDescriptor, passed as kernel arguments: TMA without device-side
# descriptor creation, so no allocator); tl.dot on bf16 tiles with 8 warps lowers to wgmma.
import triton
import triton.language as tl
from triton.tools.tensor_descriptor import TensorDescriptor

BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M = 128, 256, 64, 8
NUM_STAGES, NUM_WARPS = 3, 8


@triton.jit
def gemm_nt_tma_tiled(a_desc, b_desc, c_desc, M, N, K,
                      BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr, GROUP: tl.constexpr):
    num_m = tl.cdiv(M, BM)
    num_n = tl.cdiv(N, BN)
    pid = tl.program_id(0)
    group_width = GROUP * num_n
    first_m = (pid // group_width) * GROUP
    rows = tl.minimum(num_m - first_m, GROUP)
    row = (first_m + (pid % group_width) % rows) * BM
    col = ((pid % group_width) // rows) * BN
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in tl.range(0, K, BK):
        acc = tl.dot(a_desc.load([row, k0]), b_desc.load([col, k0]).T, acc)
    c_desc.store([row, col], acc.to(tl.bfloat16))


def run(A, B, C):
    """Writes A @ B.T into the preallocated C."""
    M, K = A.shape
    N = B.shape[0]
    a_desc = TensorDescriptor.from_tensor(A, [BLOCK_M, BLOCK_K])
    b_desc = TensorDescriptor.from_tensor(B, [BLOCK_N, BLOCK_K])
    c_desc = TensorDescriptor.from_tensor(C, [BLOCK_M, BLOCK_N])
    grid = (triton.cdiv(M, BLOCK_M) * triton.cdiv(N, BLOCK_N),)
    gemm_nt_tma_tiled[grid](a_desc, b_desc, c_desc, M, N, K, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K,
                            GROUP=GROUP_M, num_warps=NUM_WARPS, num_stages=NUM_STAGES)
