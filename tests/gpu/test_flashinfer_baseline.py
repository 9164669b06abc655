"""ptxcore.gpu.harness.flashinfer on the CPU, with a fake `flashinfer` module.

Checks the adapters' mapping of the definitions onto FlashInfer's wrappers (heads, page size 1, causal,
sm_scale, NHD, last_page_len), the re-plan rule (only when the index arrays change) and the refusals.
The real wrappers run on the GPU host (benchmarks/device/flashinfer_warm.py).
"""

from __future__ import annotations

import sys
import types

import pytest
import torch

from ptxcore.gpu.harness import flashinfer as DRAFT
from ptxcore.problems import load_catalog


class FakeWrapper:
    calls: list = []

    def __init__(self, workspace: torch.Tensor, layout: str) -> None:
        assert layout == "NHD"
        self.kind = type(self).__name__

    def plan(self, *args: object, **kwargs: object) -> None:
        FakeWrapper.calls.append(("plan", self.kind, args, kwargs))

    def run(self, q: torch.Tensor, *kv: torch.Tensor, return_lse: bool) -> tuple[torch.Tensor, torch.Tensor]:
        FakeWrapper.calls.append(("run", self.kind, q.shape, return_lse))
        return q + 1, q[..., 0]


@pytest.fixture
def fake_flashinfer(monkeypatch):
    module = types.ModuleType("flashinfer")
    module.__version__ = "0.0-fake"
    for name in (
        "BatchPrefillWithRaggedKVCacheWrapper",
        "BatchPrefillWithPagedKVCacheWrapper",
        "BatchDecodeWithPagedKVCacheWrapper",
    ):
        setattr(module, name, type(name, (FakeWrapper,), {}))
    monkeypatch.setitem(sys.modules, "flashinfer", module)
    monkeypatch.setattr(DRAFT, "_workspace", lambda: None)
    FakeWrapper.calls = []
    return module


def test_adapters_cover_the_flashinfer_problems_of_the_catalog():
    keys = {
        p.extension.baseline.implementation
        for p in load_catalog().values()
        if p.extension.baseline.library.value == "flashinfer"
    }
    assert keys == set(DRAFT.IMPLEMENTATIONS) and len(keys) == 3


def test_missing_flashinfer_raises_import_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "flashinfer", None)  # import fails
    problem = load_catalog()["gqa_paged_decode_h24_kv8_d128_ps1"]
    with pytest.raises(ImportError):
        DRAFT.flashinfer_baseline(problem)


def test_unknown_implementation_is_refused(fake_flashinfer):
    problem = load_catalog()["mha_with_lse_d64"]
    with pytest.raises(KeyError, match="no FlashInfer adapter"):
        DRAFT.flashinfer_baseline(problem)


def _paged_inputs(kv_indices):
    return {
        "q": torch.zeros(3, 24, 128),
        "k_cache": torch.zeros(10, 1, 8, 128),
        "v_cache": torch.zeros(10, 1, 8, 128),
        "qo_indptr": torch.tensor([0, 1, 3], dtype=torch.int32),
        "kv_indptr": torch.tensor([0, 2, 5], dtype=torch.int32),
        "kv_indices": kv_indices,
        "sm_scale": 0.125,
    }


def test_paged_prefill_maps_the_definition_and_replans_only_on_new_indices(fake_flashinfer):
    run = DRAFT.flashinfer_baseline(load_catalog()["gqa_paged_prefill_causal_h24_kv8_d128_ps1"])
    inputs = _paged_inputs(torch.tensor([4, 1, 7, 0, 9], dtype=torch.int32))
    out = run(inputs)
    assert set(out) == {"output", "lse"}
    run(inputs)  # same arrays: no second plan
    run({**inputs, "kv_indices": torch.tensor([4, 1, 7, 0, 8], dtype=torch.int32)})
    plans = [c for c in FakeWrapper.calls if c[0] == "plan"]
    assert len(plans) == 2 and sum(c[0] == "run" for c in FakeWrapper.calls) == 3
    _, kind, args, kwargs = plans[0]
    assert kind == "BatchPrefillWithPagedKVCacheWrapper"
    qo, kvp, kvi, last, hq, hkv, d, page = args
    assert (hq, hkv, d, page) == (24, 8, 128, 1)
    assert last.tolist() == [1, 1] and kvi.tolist() == [4, 1, 7, 0, 9]
    assert kwargs["causal"] is True and kwargs["sm_scale"] == 0.125


def test_ragged_prefill_and_decode_arguments(fake_flashinfer):
    catalog = load_catalog()
    ragged = DRAFT.flashinfer_baseline(catalog["gqa_ragged_prefill_causal_h32_kv4_d128"])
    ragged({"q": torch.zeros(5, 32, 128), "k": torch.zeros(5, 4, 128), "v": torch.zeros(5, 4, 128),
            "qo_indptr": torch.tensor([0, 5], dtype=torch.int32),
            "kv_indptr": torch.tensor([0, 5], dtype=torch.int32), "sm_scale": 0.0883})
    decode = DRAFT.flashinfer_baseline(catalog["gqa_paged_decode_h24_kv8_d128_ps1"])
    inputs = _paged_inputs(torch.tensor([4, 1, 7, 0, 9], dtype=torch.int32))
    del inputs["qo_indptr"]
    decode(inputs)
    (r_plan, d_plan) = [c for c in FakeWrapper.calls if c[0] == "plan"]
    assert r_plan[1] == "BatchPrefillWithRaggedKVCacheWrapper"
    assert r_plan[2][2:5] == (32, 4, 128) and r_plan[3]["causal"] is True
    assert d_plan[1] == "BatchDecodeWithPagedKVCacheWrapper"
    assert d_plan[2][3:7] == (24, 8, 128, 1) and "causal" not in d_plan[3]
    assert d_plan[3]["pos_encoding_mode"] == "NONE" and d_plan[3]["sm_scale"] == 0.125
