"""Every problem states its useful work (issue 25): FLOPs and minimum bytes, checked against hand arithmetic.

The rule: FLOPs are 2 per multiply-add of the matmuls the definition needs (GEMM 2*M*N*K; attention forward
4*D*heads*pairs, backward 10*D*heads*pairs), counting only unmasked (query, key) pairs, exactly, for the
workload's lengths (causal bottom-right); minimum bytes read every input once and write every output once,
of a paged KV cache only the referenced pages.
"""

from __future__ import annotations

import json
import shutil

import pytest
import yaml
from typer.testing import CliRunner

from ptxcore.problems import CatalogError, WorkError, get_problem, load_catalog, problem_work
from ptxcore.problems.catalog import load_problem
from ptxcore.problems.work import causal_pairs, pairs


def _brute_causal(q: int, k: int) -> int:
    return sum(1 for i in range(q) for j in range(k) if j <= i + k - q)


@pytest.mark.parametrize(("q", "k"), [(1, 1), (4, 4), (3, 5), (5, 3), (1, 7), (7, 1), (6, 2), (0, 3), (3, 0)])
def test_causal_pairs_are_the_exact_bottom_right_count(q, k):
    assert causal_pairs(q, k) == _brute_causal(q, k)


def test_pairs_hand_values():
    assert pairs(4096, 4096, causal=True) == 4096 * 4097 // 2 == 8_390_656
    assert pairs(4096, 4096, causal=False) == 16_777_216
    assert pairs(3, 5, causal=True) == 3 + 4 + 5  # query 0 sees keys 0..2 (bottom-right: offset 2)
    assert pairs(5, 3, causal=True) == 0 + 0 + 1 + 2 + 3  # the first two queries see no key


def test_every_problem_states_its_work():
    for p in load_catalog().values():
        w = problem_work(p)
        assert w.flops > 0 and w.min_bytes > 0, p.name
        assert w.workload_uuid == p.primary_workload.uuid


def test_gemm_work_by_hand():
    w = problem_work(get_problem("gemm_n7168_k5120"))
    assert w.flops == 2 * 8192 * 7168 * 5120 == 601_295_421_440
    # A [8192, 5120] + B [7168, 5120] read, C [8192, 7168] written, all bf16
    assert w.min_bytes == (8192 * 5120 + 7168 * 5120 + 8192 * 7168) * 2 == 274_726_912


def test_mha_forward_counts_only_the_unmasked_half():
    full = problem_work(get_problem("mha_with_lse_d128"))
    causal = problem_work(get_problem("mha_with_lse_d128_causal"))
    assert full.flops == 4 * 4 * 48 * 4096 * 4096 * 128 == 1_649_267_441_664
    assert causal.flops == 4 * 4 * 48 * 128 * (4096 * 4097 // 2) == 824_835_047_424
    # Q, K, V read and O written (bf16 [4, 48, 4096, 128] each), LSE written (fp32 [4, 48, 4096])
    assert full.min_bytes == 4 * (4 * 48 * 4096 * 128 * 2) + 4 * 48 * 4096 * 4 == 808_452_096


def test_mha_backward_is_five_matmuls_per_pair():
    w = problem_work(get_problem("mha_bwd_d64_causal"))
    assert w.flops == 10 * 4 * 48 * 64 * 8_390_656 == 1_031_043_809_280
    # Q, K, V, O, dO read and dQ, dK, dV written (bf16 [4, 48, 4096, 64]), L read (fp32 [4, 48, 4096])
    assert w.min_bytes == 8 * (4 * 48 * 4096 * 64 * 2) + 4 * 48 * 4096 * 4 == 808_452_096


def test_gqa_ragged_sums_the_sequences_from_the_generation_rule():
    p = get_problem("gqa_ragged_prefill_causal_h32_kv4_d128")
    lens = p.extension.structure.q_lens
    w = problem_work(p)
    assert w.attention_pairs == sum(n * (n + 1) // 2 for n in lens)  # q_len == kv_len: the triangle
    assert w.flops == 4 * 32 * 128 * w.attention_pairs
    t = sum(lens)
    assert t == 16294
    # q [t, 32, 128] bf16, k and v [t, 4, 128] bf16, two indptr [34] int32 read; output [t, 32, 128] bf16 and
    # lse [t, 32] fp32 written
    assert w.min_bytes == t * 32 * 128 * 2 + 2 * t * 4 * 128 * 2 + 2 * 34 * 4 + t * 32 * 128 * 2 + t * 32 * 4


def test_gqa_paged_prefill_and_decode_by_hand():
    prefill = problem_work(get_problem("gqa_paged_prefill_causal_h24_kv8_d128_ps1"))
    assert prefill.attention_pairs == 892 * 893 // 2 == 398_278
    assert prefill.flops == 4 * 24 * 128 * 398_278
    decode = problem_work(get_problem("gqa_paged_decode_h24_kv8_d128_ps1"))
    assert decode.attention_pairs == 9625  # one query per sequence sees every key of its sequence
    assert decode.flops == 4 * 24 * 128 * 9625 == 118_272_000
    # q and output [15, 24, 128] bf16; of the 42,784-page cache only the 9,625 named pages of k and v (each
    # [1, 8, 128] bf16); kv_indptr [16] and kv_indices [9625] int32; lse [15, 24] fp32
    assert decode.min_bytes == 2 * (15 * 24 * 128 * 2) + 2 * (9625 * 8 * 128 * 2) + 16 * 4 + 9625 * 4 + 15 * 24 * 4


def _copy_gemm(tmp_path, edit) -> object:
    p = get_problem("gemm_n7168_k5120")
    ddir = tmp_path / "definitions" / "gemm"
    ddir.mkdir(parents=True)
    shutil.copy(p.definition_path, ddir)
    ext = yaml.safe_load(p.definition_path.with_name("gemm_n7168_k5120.ptxbench.yaml").read_text())
    edit(ext)
    (ddir / "gemm_n7168_k5120.ptxbench.yaml").write_text(yaml.safe_dump(ext))
    (tmp_path / "workloads" / "gemm").mkdir(parents=True)
    src = p.definition_path.parents[2] / "workloads" / "gemm" / "gemm_n7168_k5120.jsonl"
    shutil.copy(src, tmp_path / "workloads" / "gemm")
    return ddir / p.definition_path.name


def test_a_bad_work_block_is_a_catalog_error_naming_the_file(tmp_path):
    path = _copy_gemm(tmp_path, lambda e: e["work"].update(flops="magic"))
    with pytest.raises(CatalogError, match=r"(?s)gemm_n7168_k5120\.ptxbench\.yaml.*work\.flops"):
        load_problem(path, tmp_path)


def test_a_missing_work_block_is_a_catalog_error(tmp_path):
    path = _copy_gemm(tmp_path, lambda e: e.pop("work"))
    with pytest.raises(CatalogError, match="work"):
        load_problem(path, tmp_path)


def test_a_formula_whose_axes_are_missing_is_a_work_error(tmp_path):
    path = _copy_gemm(tmp_path, lambda e: e["work"].update(flops="attention_forward"))
    with pytest.raises(WorkError, match=r"needs axes \['B', 'H', 'S', 'D'\]"):
        problem_work(load_problem(path, tmp_path))


def test_a_structure_that_disagrees_with_the_workload_is_a_work_error():
    p = get_problem("gqa_paged_decode_h24_kv8_d128_ps1")
    st = p.extension.structure.model_copy(update={"kv_lens": [*p.extension.structure.kv_lens, 5]})
    broken = type(p)(p.definition, p.workloads, p.extension.model_copy(update={"structure": st}), p.definition_path)
    with pytest.raises(WorkError, match="batch_size=15 but the structure gives 16"):
        problem_work(broken)


def test_cli_show_json_has_the_work_and_a_bad_catalog_is_one_line(tmp_path, monkeypatch):
    from flows.cli.main import app

    runner = CliRunner()
    shown = json.loads(runner.invoke(app, ["problems", "show", "gemm_n7168_k5120", "--json"]).stdout)
    assert shown["work"]["flops"] == 601_295_421_440 and shown["work"]["min_bytes"] == 274_726_912
    assert shown["extension"]["work"] == {"flops": "gemm", "min_bytes": "io", "carry_threshold": None}
    _copy_gemm(tmp_path, lambda e: e["work"].update(min_bytes="everything"))
    monkeypatch.setenv("PTXBENCH_PROBLEMS_DIR", str(tmp_path))
    r = runner.invoke(app, ["problems", "show", "gemm_n7168_k5120", "--json"])
    assert r.exit_code != 0 and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1 and "gemm_n7168_k5120.ptxbench.yaml" in r.output
