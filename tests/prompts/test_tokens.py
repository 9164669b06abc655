from __future__ import annotations

import os

import pytest

from ptxcore.prompts import TiktokenCounter, TokenizerUnavailableError, default_counter
from ptxcore.prompts.report import pack_tokens, table6_rows
from ptxcore.prompts.tokens import bundled_tiktoken_cache


def test_default_tokenizer_loads_offline_and_leaves_env_alone():
    before = os.environ.get("TIKTOKEN_CACHE_DIR")
    counter = default_counter()
    assert counter.name == "tiktoken:o200k_base"
    assert counter.count("wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16") > 5
    assert counter.count("<|endoftext|>") > 1  # special tokens are plain text here
    assert os.environ.get("TIKTOKEN_CACHE_DIR") == before


def test_bundled_cache_holds_the_o200k_file():
    cache = bundled_tiktoken_cache()
    assert cache is not None
    assert (cache / "fb374d419588a4632f3f557e76b4b70aebbca790").is_file()  # sha1 of the o200k_base URL


def test_unknown_encoding_is_a_clear_error():
    with pytest.raises(TokenizerUnavailableError, match="no_such_encoding"):
        TiktokenCounter("no_such_encoding")


def test_table6_rows_sum_up(words):
    packs = [pack_tokens("hopper", counter=words), pack_tokens("blackwell", counter=words)]
    rows = dict(table6_rows(packs))
    assert rows["Total (pack)"] == [p.parameters + p.templates + p.contract for p in packs]
    assert rows["Full level (pack + guidance)"] == [p.pack_total + p.guidance for p in packs]
    assert rows["+ pattern:fa_forward_tcgen05"] == [None, packs[1].patterns["fa_forward_tcgen05"]]
    assert all(p.tokenizer == "fake:words" for p in packs)
