"""SASS text parsing and static family verdicts, including the exclusions of docs/architecture.md."""

from __future__ import annotations

from ptxcore.arch import get_architecture
from ptxcore.sass import classify, parse_sass
from ptxcore.schema import StaticTarget

HOPPER_SASS = """
	code for sm_90a
		Function : _Z4gemmv
	.headerflags	@"EF_CUDA_ACCELERATORS EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                      /* 0x00000a00ff017b82 */
        /*0010*/              @!P0 UTMALDG.2D [UR8], [UR4] ;                  /* 0x0000000004007dd4 */
        /*0020*/                   UTMAPF.L2.2D [UR4] ;                        /* 0x0000000004007dd4 */
        /*0030*/                   HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24, gsb0 ; /* 0x00000000081879f0 */
        /*0040*/                   HGMMA.64x8x16.F16 RZ, gdesc[URZ], RZ, !UPT, gsb0 ;   /* 0x000000ff0000779f */
        /*0050*/                   EXIT ;
		Function : _Z6helperv
        /*0000*/                   FFMA R0, R1, R2, R3 ;
        /*0010*/                   HMMA.16816.F32.BF16 R4, R8, R12, R4 ;
"""


def test_parse_assigns_functions_and_predicates():
    ins = parse_sass(HOPPER_SASS)
    assert [i.mnemonic for i in ins] == ["LDC", "UTMALDG", "UTMAPF", "HGMMA", "HGMMA", "EXIT", "FFMA", "HMMA"]
    assert {i.function for i in ins} == {"_Z4gemmv", "_Z6helperv"}
    assert ins[1].opcode == "UTMALDG.2D" and ins[1].address == 0x10


def test_hopper_families_exclude_dummy_hgmma_and_prefetch():
    report = classify(parse_sass(HOPPER_SASS), get_architecture("h100"))
    assert report.family_counts == {"gmma": 1, "mma_sync": 1, "tma": 1}
    assert report.target_static is StaticTarget.PRESENT
    assert len(report.excluded) == 1 and "gdesc[URZ]" in report.excluded[0]
    assert report.counts["HGMMA"] == 2 and report.functions["_Z6helperv"] == {"FFMA": 1, "HMMA": 1}


def test_only_dummy_or_prefetch_reads_absent():
    text = "\n".join(line for line in HOPPER_SASS.splitlines() if "HGMMA.64x128" not in line and "UTMALDG" not in line)
    report = classify(parse_sass(text), get_architecture("hopper"))
    assert report.target_static is StaticTarget.ABSENT
    assert report.family_counts.get("gmma", 0) == 0 and report.family_counts.get("tma", 0) == 0


def test_blackwell_needs_tcgen05_not_hopper_families():
    blackwell = get_architecture("b200")
    assert classify(parse_sass(HOPPER_SASS), blackwell).target_static is StaticTarget.ABSENT
    tc = "        /*0000*/  UTCHMMA gdesc[UR4], gdesc[UR6], tmem[UR8], tmem[UR10], idesc[UR11], UPT ;\n" \
         "        /*0010*/  LDTM.x4 R12, tmem[UR5] ;\n"
    report = classify(parse_sass(tc), blackwell)
    assert report.target_static is StaticTarget.PRESENT and report.family_counts["tcgen05"] == 2
