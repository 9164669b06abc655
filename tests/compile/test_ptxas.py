"""ptxas -v report parsing (text captured from nvcc 13.0)."""

from __future__ import annotations

from ptxcore.compile import parse_ptxas

LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4gemmPK13__nv_bfloat16' for 'sm_90a'
ptxas info    : Function properties for _Z4gemmPK13__nv_bfloat16
    16 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 1024 bytes smem, 512 bytes cmem[0]
ptxas info    : Compiling entry function '_Z6helperPf' for 'sm_90a'
ptxas info    : Function properties for _Z6helperPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 356 bytes cmem[0]
ptxas warning : (C7508) Potential Performance Loss: setmaxnreg ignored; unable to determine register count at entry
ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient register resources for the wgmma pipeline in the function '_Z4gemmPK13__nv_bfloat16'
"""


def test_parses_every_kernel_and_the_advisories():
    r = parse_ptxas(LOG)
    assert [k.function for k in r.kernels] == ["_Z4gemmPK13__nv_bfloat16", "_Z6helperPf"]
    g = r.kernels[0]
    assert (g.registers, g.barriers, g.shared_bytes, g.constant_bytes) == (168, 1, 1024, 512)
    assert (g.stack_frame_bytes, g.spill_store_bytes, g.spill_load_bytes) == (16, 8, 12)
    assert r.kernels[1].registers == 8 and r.kernels[1].shared_bytes == 0
    assert r.max_registers == 168 and r.total_spill_bytes == 20
    assert len(r.performance_warnings) == 2
    assert any("C7508" in w for w in r.performance_warnings)
    assert any("C7510" in w for w in r.performance_warnings)


def test_empty_log():
    r = parse_ptxas("")
    assert r.kernels == [] and r.performance_warnings == []
