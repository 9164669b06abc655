"""The problem catalog: every problem loads, names and shapes match the paper's workloads."""

from __future__ import annotations

import math

import pytest

from ptxcore.arch import ARCHITECTURES, get_architecture
from ptxcore.problems import CatalogError, ProblemNotFoundError, get_problem, load_catalog
from ptxcore.problems.catalog import load_problem

PRIMARY = {"gemm_n7168_k5120", "mha_with_lse_d128", "mha_with_lse_d128_causal", "mha_bwd_d128", "mha_bwd_d128_causal"}
GENERALIZATION = {
    *(f"mha_{kind}_d{d}{c}" for kind in ("with_lse", "bwd") for d in (64, 96) for c in ("", "_causal")),
    "gqa_ragged_prefill_causal_h32_kv4_d128",
    "gqa_paged_prefill_causal_h24_kv8_d128_ps1",
    "gqa_paged_decode_h24_kv8_d128_ps1",
}


def test_catalog_holds_every_paper_problem():
    catalog = load_catalog()
    assert set(catalog) == PRIMARY | GENERALIZATION
    assert {n for n, p in catalog.items() if p.extension.primary} == PRIMARY


@pytest.mark.parametrize("name", sorted(PRIMARY | GENERALIZATION))
def test_problem_is_consistent(name):
    p = get_problem(name)
    ext, d = p.extension, p.definition
    assert ext.definition == d.name
    for w in p.workloads:
        assert set(w.axes) == set(d.var_axes()), "workload sets exactly the variable axes"
        assert set(w.inputs) == set(d.inputs)
        for inp, spec in d.inputs.items():
            kind = w.inputs[inp].type
            assert kind == ("scalar" if spec.shape is None else "random")
            if spec.shape is not None:
                assert inp in ext.inputs, f"{inp} has no distribution"
    for arch_key, families in ext.targets.items():
        arch = get_architecture(arch_key)
        assert set(families) <= {f.name for f in arch.all_families}
    assert set(ext.targets) == set(ARCHITECTURES)
    assert "def run(" in d.reference


def test_paper_shapes():
    gemm = get_problem("gemm_n7168_k5120")
    assert gemm.definition.const_axes() == {"N": 7168, "K": 5120}
    assert gemm.primary_workload.axes == {"M": 8192}
    assert gemm.primary_workload.uuid == "94920358-01a8-4c5b-9209-3103fd490e94"
    fwd = get_problem("mha_with_lse_d128_causal")
    assert fwd.definition.const_axes() == {"B": 4, "H": 48, "D": 128}
    assert fwd.primary_workload.axes == {"S": 4096}
    assert list(fwd.definition.outputs) == ["O", "LSE"]
    bwd = get_problem("mha_bwd_d128")
    assert list(bwd.definition.inputs) == ["Q", "K", "V", "O", "dO", "L"]
    assert list(bwd.definition.outputs) == ["dQ", "dK", "dV"]


def test_gqa_structures_match_the_workload_sizes():
    ragged = get_problem("gqa_ragged_prefill_causal_h32_kv4_d128")
    s = ragged.extension.structure
    assert len(s.q_lens) == 33 and sum(s.q_lens) == 16294 == sum(s.kv_lens)
    assert ragged.primary_workload.axes["len_indptr"] == 34
    paged = get_problem("gqa_paged_prefill_causal_h24_kv8_d128_ps1")
    assert paged.extension.structure.q_lens == [892] and paged.extension.structure.num_pages == 43676
    decode = get_problem("gqa_paged_decode_h24_kv8_d128_ps1")
    ds = decode.extension.structure
    assert len(ds.kv_lens) == 15 and sum(ds.kv_lens) == 9625 and ds.num_pages == 42784
    w = decode.primary_workload
    assert w.inputs["sm_scale"].value == pytest.approx(1 / math.sqrt(128))
    assert decode.extension.lse_base == "2" and get_problem("mha_with_lse_d64").extension.lse_base == "e"


def test_unknown_problem_names_the_input():
    with pytest.raises(ProblemNotFoundError, match="nope"):
        get_problem("nope")


def test_missing_extension_is_a_catalog_error(tmp_path):
    src = get_problem("gemm_n7168_k5120").definition_path
    (tmp_path / "definitions" / "gemm").mkdir(parents=True)
    target = tmp_path / "definitions" / "gemm" / src.name
    target.write_text(src.read_text())
    with pytest.raises(CatalogError, match="extension"):
        load_problem(target, tmp_path)
