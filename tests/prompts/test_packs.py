from __future__ import annotations

import pytest

from ptxcore.prompts import PackError, load_manifest, load_pack, load_parameters
from ptxcore.schema import Language

ARCHS = ["hopper", "blackwell"]


@pytest.mark.parametrize("arch", ARCHS)
def test_every_parameter_names_a_source(arch):
    sheet = load_parameters(load_manifest(arch, Language.CUDA).parameters)
    rows = [r for s in sheet.sections for r in s.rows]
    assert len(rows) >= 15
    assert all(len(r.source) > 10 for r in rows)
    names = " ".join(r.name.lower() for r in rows)
    for topic in (
        "sm",
        "shared memory",
        "registers",
        "l2",
        "hbm",
        "clock",
        "bf16",
        "cluster",
        "tma",
        "mbarrier",
    ):
        assert topic in names, topic


def test_parameter_rows_without_source_are_rejected(pack_copy):
    path = pack_copy / "hopper" / "parameters.yaml"
    path.write_text(path.read_text().replace("source: NVIDIA H100 datasheet (SXM5)\n", "source: ''\n", 1))
    with pytest.raises(PackError, match="source"):
        load_parameters("hopper/parameters.yaml", pack_copy)


def test_missing_pack_file_is_named(pack_copy):
    (pack_copy / "hopper" / "contract_wgmma.md").unlink()
    with pytest.raises(PackError, match="contract_wgmma.md"):
        load_pack("hopper", Language.CUDA, pack_copy)


@pytest.mark.parametrize("arch", ARCHS)
def test_cuda_pack_renders_headers_as_code_and_contract_topics(arch):
    pack = load_pack(arch, Language.CUDA)
    assert pack.templates.count("```cpp") == len(pack.manifest.templates)
    contract = pack.contract.lower()
    for topic in ("descriptor", "swizzle", "tx", "fence_proxy_async", "setmaxnreg", "parity", "multicast"):
        assert topic in contract, topic
    if arch == "hopper":
        assert "warpgroup is 4 consecutive warps" in contract and "lbo" in contract
    else:
        assert "tmem_dealloc" in contract and "cta_group::2" in contract


def test_triton_pack_uses_python_example_and_triton_instructions():
    pack = load_pack("hopper", Language.TRITON)
    assert "```python" in pack.example and "@triton.jit" in pack.example
    assert "kernel.py" in pack.instructions and pack.templates == ""


def test_guidance_has_seven_rules_and_patterns_carry_the_corrections():
    pack = load_pack("hopper", Language.CUDA)
    assert [line.split(".")[0] for line in pack.guidance.splitlines() if line[:2].rstrip(".").isdigit()] == [
        str(i) for i in range(1, 8)
    ]
    fa3 = pack.patterns["fa3_forward"]
    for fact in ("for j = 1 .. T_c - 1", "m_old = m", "pk, pv", "O = O / l", "LSE = (m + log2(l)) * ln(2)"):
        assert fact in fa3, fact
    bwd = pack.patterns["fa_backward"]
    for fact in ("D   = rowsum(dO * O)", "P   = exp(Q K^T * s - L)", "dS  = P * (dP - D)", "dQ"):
        assert fact in bwd, fact


def test_expand_pack_includes_inlines_recursively_and_names_missing_files(tmp_path):
    from ptxcore.prompts import expand_pack_includes

    (tmp_path / "inc").mkdir()
    (tmp_path / "inc" / "b.cuh").write_text("#pragma once\nint b();\n")
    (tmp_path / "inc" / "a.cuh").write_text('#pragma once\n#include "b.cuh"\nint a();\n')
    (tmp_path / "main.cu").write_text('#include <cstdint>\n#include "inc/a.cuh"\nint main();\n')
    out = expand_pack_includes(tmp_path / "main.cu")
    assert "#include <cstdint>" in out and '#include "' not in out and "#pragma once" not in out
    assert out.index("int b();") < out.index("int a();") < out.index("int main();")
    (tmp_path / "bad.cu").write_text('#include "inc/missing.cuh"\n')
    with pytest.raises(PackError, match="missing.cuh"):
        expand_pack_includes(tmp_path / "bad.cu")
    (tmp_path / "loop.cuh").write_text('#include "loop.cuh"\n')
    with pytest.raises(PackError, match="cycle"):
        expand_pack_includes(tmp_path / "loop.cuh")
