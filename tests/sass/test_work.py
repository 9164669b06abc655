"""Target work from SASS shapes x executed counts (issue 25): the rule, on synthetic ncu rows.

The rule: a GMMA row of shape MxNxK counted T times in thread_inst_executed_true did T/128 warpgroup instructions
of 2*M*N*K FLOPs; the target carries the work when those FLOPs reach the threshold share (0.5) of the problem's;
a tcgen05 MMA's shape is not in the SASS, so only an upper bound can rule it out; a TMA transfer moves at most
one shared-memory-sized box, which can rule a TMA path out but never in.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from ptxcore.arch import get_architecture
from ptxcore.arch.registry import CARRY_THRESHOLD
from ptxcore.sass.work import carry_threshold, evidence_work, shape_flops, share_verdict, target_ops
from ptxcore.schema import StaticTarget, TargetInstruction, TargetInstructionEvidence, TargetWork

HOPPER, BLACKWELL = get_architecture("hopper"), get_architecture("blackwell")
GEMM_FLOPS = 2 * 8192 * 7168 * 5120  # gemm_n7168_k5120
GEMM_BYTES = (8192 * 5120 + 7168 * 5120 + 8192 * 7168) * 2


@dataclass(frozen=True)
class Row:
    text: str
    inst_executed: int
    thread_inst_executed_true: int

    @property
    def opcode(self) -> str:
        return self.text.split()[0]


def _verdict(rows, arch=HOPPER, flops=GEMM_FLOPS, min_bytes=GEMM_BYTES):
    return share_verdict(target_ops(rows, arch), flops, min_bytes, arch, arch.carry_threshold)


def test_shapes():
    assert shape_flops("HGMMA.64x256x16.F32.BF16") == (2 * 64 * 256 * 16,) * 2
    assert shape_flops("QGMMA.64x128x32.F32.E4M3.E4M3") == (2 * 64 * 128 * 32,) * 2
    assert shape_flops("HGMMA.64x128x32.F32.BF16.SP") == (64 * 128 * 32,) * 2  # sparse: half the MACs
    assert shape_flops("UTCHMMA") == (None, 2 * 128 * 256 * 16)
    assert shape_flops("UTCHMMA.2CTA") == (None, 2 * 256 * 256 * 16)
    assert shape_flops("UTCQMMA.2CTA") == (None, 2 * 256 * 256 * 32)
    assert shape_flops("UTCBAR") == (None, None) and shape_flops("FFMA") == (None, None)


def test_our_wgmma_gemm_counts_give_share_one():
    """Our wgmma GEMM on the H200: 146,800,640 thread-instructions of HGMMA.64x256x16 for 8192x7168x5120."""
    rows = [Row("HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24, gsb0 ;", 146_800_640 // 32, 146_800_640)]
    v = _verdict(rows)
    assert v.target_flops == 146_800_640 // 128 * 2 * 64 * 256 * 16 == GEMM_FLOPS
    assert v.flops_share == 1.0 and v.carries is TargetWork.CARRIES


def test_a_dummy_wgmma_does_not_carry():
    """Issue 25's first hack: a CUDA-core GEMM plus one m64n8k16 wgmma per call (128 thread-instructions)."""
    rows = [Row("HGMMA.64x8x16.F32.BF16 R2, gdesc[UR4], RZ, !UPT, gsb0 ;", 4, 128),
            Row("FFMA R1, R2, R3, R1 ;", 10**9, 3 * 10**10)]
    v = _verdict(rows)
    assert v.target_flops == 2 * 64 * 8 * 16
    assert v.flops_share == pytest.approx(2.72e-8, rel=1e-2) and v.carries is TargetWork.DOES_NOT_CARRY


def test_a_dummy_wgmma_plus_one_tma_load_does_not_carry_either():
    rows = [Row("HGMMA.64x8x16.F32.BF16 R2, gdesc[UR4], RZ, !UPT, gsb0 ;", 4, 128), Row("UTMALDG.2D [UR8], [UR4] ;", 1, 1)]
    v = _verdict(rows)
    assert v.tma_instructions == 1 and v.tma_bytes_bound == 227 * 1024
    assert v.carries is TargetWork.DOES_NOT_CARRY and "at most 232,448 bytes" in v.reason


def test_a_tma_path_that_could_move_the_bytes_is_unknown_not_carried():
    rows = [Row("UTMALDG.2D [UR8], [UR4] ;", 573_440, 573_440)]
    v = _verdict(rows)
    assert v.target_flops == 0 and v.carries is TargetWork.UNKNOWN and "box sizes" in v.reason


def test_the_commit_closing_dummy_is_not_work():
    rows = [Row("HGMMA.64x8x16.F16 RZ, gdesc[URZ], RZ, !UPT, gsb0 ;", 3584, 114_688)]
    assert target_ops(rows, HOPPER) == []
    assert _verdict(rows).carries is TargetWork.DOES_NOT_CARRY


def test_mma_sync_is_not_target_work_on_hopper():
    rows = [Row("HMMA.16816.F32.BF16 R8, R12, R16, R8 ;", 91_750_400, 2_936_012_800)]
    assert target_ops(rows, HOPPER) == [] and _verdict(rows).carries is TargetWork.DOES_NOT_CARRY


def test_tcgen05_is_ruled_out_by_its_bound_and_otherwise_unknown():
    one = [Row("UTCHMMA gdesc[UR4], gdesc[UR6], tmem[UR8], tmem[UR10], idesc[UR12], UPT ;", 1, 1),
           Row("UTCBAR [UR5], URZ ;", 1, 1)]
    v = _verdict(one, BLACKWELL)
    assert v.target_flops is None and v.target_flops_bound == 2 * 128 * 256 * 16
    assert v.carries is TargetWork.DOES_NOT_CARRY
    many = [Row("UTCHMMA.2CTA gdesc[UR4], gdesc[UR6], tmem[UR8], tmem[UR10], idesc[UR12], UPT ;", 300_000, 300_000)]
    v = _verdict(many, BLACKWELL)
    assert v.target_flops_bound == 300_000 * 2 * 256 * 256 * 16 and v.carries is TargetWork.UNKNOWN


def test_threshold_comes_from_the_problem_then_the_registry():
    assert HOPPER.carry_threshold == CARRY_THRESHOLD == 0.5
    assert carry_threshold(HOPPER, None) == 0.5 and carry_threshold(HOPPER, 0.8) == 0.8
    half = [Row("HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24, gsb0 ;", 1, 146_800_640 // 2)]
    assert share_verdict(target_ops(half, HOPPER), GEMM_FLOPS, GEMM_BYTES, HOPPER, 0.5).carries is TargetWork.CARRIES
    assert share_verdict(target_ops(half, HOPPER), GEMM_FLOPS, GEMM_BYTES, HOPPER, 0.8).carries is \
        TargetWork.DOES_NOT_CARRY


def _ev(status, ops=()):
    return TargetInstructionEvidence(status=status, static=StaticTarget.PRESENT, target_ops=list(ops), reason="r")


def test_evidence_without_counts_never_carries():
    for status in (TargetInstruction.ABSENT, TargetInstruction.NOT_EXECUTED):
        w = evidence_work(_ev(status), GEMM_FLOPS, GEMM_BYTES, HOPPER, 0.5)
        assert w.carries is TargetWork.DOES_NOT_CARRY and w.flops_share == 0.0
    assert evidence_work(_ev(TargetInstruction.UNKNOWN), GEMM_FLOPS, GEMM_BYTES, HOPPER, 0.5).carries is \
        TargetWork.UNKNOWN
    old = evidence_work(_ev(TargetInstruction.EXECUTED), GEMM_FLOPS, GEMM_BYTES, HOPPER, 0.5)
    assert old.carries is TargetWork.UNKNOWN and "per-shape counts" in old.reason
    ops = target_ops([Row("HGMMA.64x256x16.F32.BF16 R24, gdesc[UR4], R24, gsb0 ;", 1, 146_800_640)], HOPPER)
    assert evidence_work(_ev(TargetInstruction.EXECUTED, ops), GEMM_FLOPS, GEMM_BYTES, HOPPER, 0.5).carries is \
        TargetWork.CARRIES


def _raw(text: str, thread: int, inst: int | None = None) -> dict:
    return {"function": "k", "address": "0x0", "sass": text, "inst_executed": thread // 32 if inst is None else inst,
            "thread_inst_executed_true": thread}


WGMMA_ROW = "HGMMA.64x256x16.F32.BF16 R24, gdesc[UR16], R24, gsb0"


def test_evidence_recorded_before_work_shares_is_credited_from_its_own_rows():
    """Verdicts recorded on the H200 before `target_ops` existed keep every family row (fewer than the cap): the
    work share is rebuilt from them by the same rule, e.g. our wgmma GEMM's four HGMMA sites and two TMA loads."""
    rows = [_raw(WGMMA_ROW, 36_700_160) for _ in range(4)] + [_raw("UTMALDG.2D [UR12], [UR18]", 143_360)] * 2
    w = evidence_work(_ev(TargetInstruction.EXECUTED).model_copy(update={"raw_rows": rows}),
                      GEMM_FLOPS, GEMM_BYTES, HOPPER, 0.5)
    assert w.carries is TargetWork.CARRIES and w.target_flops == GEMM_FLOPS and w.flops_share == 1.0
    assert w.tma_instructions == 286_720 and "recorded rows" in w.reason
    predicated = [_raw("@P0 HGMMA.64x8x16.F32.BF16 R2, gdesc[UR4], RZ, !UPT, gsb0", 128)]  # issue 25's dummy
    dummy = evidence_work(_ev(TargetInstruction.EXECUTED).model_copy(update={"raw_rows": predicated}),
                          GEMM_FLOPS, GEMM_BYTES, HOPPER, 0.5)
    assert dummy.carries is TargetWork.DOES_NOT_CARRY and dummy.target_flops == 2 * 64 * 8 * 16


def test_rows_cut_at_the_cap_or_malformed_are_not_credited():
    from ptxcore.sass.work import RAW_ROW_CAP, ops_from_raw_rows

    assert ops_from_raw_rows([_raw(WGMMA_ROW, 36_700_160)] * RAW_ROW_CAP, HOPPER) is None  # rows may be missing
    assert ops_from_raw_rows([], HOPPER) is None
    assert ops_from_raw_rows([_raw(WGMMA_ROW, -1, 0)], HOPPER) is None
    assert ops_from_raw_rows([{"sass": WGMMA_ROW, "inst_executed": "9", "thread_inst_executed_true": 128}],
                             HOPPER) is None
    capped = _ev(TargetInstruction.EXECUTED).model_copy(update={"raw_rows": [_raw(WGMMA_ROW, 36_700_160)] * RAW_ROW_CAP})
    assert evidence_work(capped, GEMM_FLOPS, GEMM_BYTES, HOPPER, 0.5).carries is TargetWork.UNKNOWN
