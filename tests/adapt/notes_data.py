"""Small, hand-written notes corpora for the retrieval tests (kernels shaped like real inline-PTX kernels)."""

from __future__ import annotations

from ptxcore.adapt.retrieval import InstructionNote, NoteRecord, RepairPair
from ptxcore.schema import EvaluationStatus

WGMMA_WRONG = """\
#include <cuda_bf16.h>
// wgmma without a fence: the accumulator registers are read before the group completes
__global__ void attn(const __nv_bfloat16* q, float* o) {
  asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0}, %1, %2;" : "+f"(o[0]) : "l"(q), "l"(q));
  o[threadIdx.x] = 0.f;  /* missing wgmma.commit_group / wait_group */
}
"""
WGMMA_FIXED = WGMMA_WRONG.replace("o[threadIdx.x] = 0.f;", 'asm volatile("wgmma.fence.sync.aligned;");\n'
                                  '  asm volatile("wgmma.commit_group.sync.aligned;");\n'
                                  '  asm volatile("wgmma.wait_group.sync.aligned 0;");')
TMA_WRONG = """\
#include <cuda.h>
__global__ void gemm(const CUtensorMap* desc, void* smem, unsigned long long* mbar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile [%0], [%1, {%2, %3}], [%4];"
               :: "r"(smem), "l"(desc), "r"(0), "r"(0), "r"(mbar));
  // mbarrier never initialised: the expect_tx count is wrong
}
"""
TMA_FIXED = TMA_WRONG.replace("// mbarrier never initialised: the expect_tx count is wrong",
                              'asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"(mbar));')
SCALAR_WRONG = """\
__global__ void softmax_rows(float* x, int n) {
  float m = -1e30f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, x[j]);
  __shfl_xor_sync(0xffffffff, m, 16);
}
"""


def note(instruction: str, **kw: object) -> InstructionNote:
    return InstructionNote(instruction=instruction, **kw)


WGMMA_NOTES = [
    note("wgmma.fence.sync.aligned", shape_context="m64n128k16 bf16 -> f32",
         required_sequence=["wgmma.fence", "wgmma.mma_async", "wgmma.commit_group", "wgmma.wait_group 0"],
         diagnostics=["max_abs_error large: accumulators read early"], do_not_do=["read accumulators before wait"],
         correct_example='asm volatile("wgmma.fence.sync.aligned;");'),
    note("wgmma.commit_group.sync.aligned", operand_contract=["no operands"]),
    note("wgmma.wait_group.sync.aligned N", operand_contract=["N is an immediate"]),
]
TMA_NOTES = [
    note("mbarrier.init.shared.b64", operand_contract=["[addr] in shared::cta", "count = arriving threads"]),
    note("cp.async.bulk.tensor.2d", required_sequence=["mbarrier.init", "expect_tx", "cp.async.bulk.tensor"]),
]


def record(pair_id: str, problem: str, wrong: str, fixed: str, notes: list[InstructionNote],
           speedup: float | None = None) -> NoteRecord:
    return NoteRecord(pair_id=pair_id, problem=problem, arch="hopper", wrong_kernel=wrong, fixed_kernel=fixed,
                      fixed_speedup=speedup, summary=f"fix of {pair_id}", instruction_notes=notes,
                      teacher_model="test")


def corpus() -> list[NoteRecord]:
    """Two wrong kernels of mha_with_lse_d128 (one fixed twice), one of gemm."""
    slow_fix = WGMMA_FIXED + "\n// slow fix\n"
    return [
        record("p1", "mha_with_lse_d128", WGMMA_WRONG, WGMMA_FIXED, WGMMA_NOTES, speedup=0.4),
        record("p2", "mha_with_lse_d128", WGMMA_WRONG, slow_fix, [WGMMA_NOTES[0], TMA_NOTES[0]], speedup=0.1),
        record("p3", "mha_with_lse_d128", SCALAR_WRONG, SCALAR_WRONG + "\n", [note("__shfl_xor_sync result")]),
        record("p4", "gemm_n7168_k5120", TMA_WRONG, TMA_FIXED, TMA_NOTES, speedup=0.9),
    ]


def pair(pair_id: str, problem: str = "mha_with_lse_d128", wrong: str = WGMMA_WRONG,
         fixed: str = WGMMA_FIXED) -> RepairPair:
    return RepairPair(pair_id=pair_id, problem=problem, arch="hopper", prompt_variant="hopper-pack",
                      task_prompt=f'{{"name": "{problem}"}} task', wrong_kernel=wrong,
                      wrong_status=EvaluationStatus.INCORRECT_NUMERICAL, wrong_feedback="max_abs_error=3.5",
                      fixed_kernel=fixed, fixed_speedup=0.5)
