"""Tokenizer specs: tiktoken offline, a local Hugging Face tokenizer.json (made here), the auto fallback."""

from __future__ import annotations

import pytest

from ptxcore.adapt.budget import HfTokenizerCounter, chatml, count_messages, resolve_counter
from ptxcore.adapt.errors import AdaptError

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "add two numbers"}]


@pytest.fixture(scope="module")
def tokenizer_json(tmp_path_factory):
    """A tiny word-level tokenizer with ChatML markers as special tokens, saved as tokenizer.json."""
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["be", "brief", "add", "two", "numbers", "system", "user", "[UNK]"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    path = tmp_path_factory.mktemp("tok") / "tokenizer.json"
    tok.save(str(path))
    return path


def test_chatml_rendering():
    assert chatml(MSGS) == "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nadd two numbers<|im_end|>\n"


def test_tiktoken_counts_offline():
    counter, note = resolve_counter("tiktoken:o200k_base")
    assert counter.name == "tiktoken:o200k_base" and note == ""
    assert count_messages(counter, MSGS) == counter.count(chatml(MSGS)) > 10


def test_a_local_hugging_face_tokenizer_is_used_where_present(tokenizer_json):
    counter, note = resolve_counter(f"hf:{tokenizer_json}")
    assert isinstance(counter, HfTokenizerCounter) and note == ""
    # <|im_start|> system be brief <|im_end|> <|im_start|> user add two numbers <|im_end|>: 11 tokens
    assert count_messages(counter, MSGS) == 11
    by_dir, _ = resolve_counter(f"auto:{tokenizer_json.parent}")
    assert by_dir.name == f"hf:{tokenizer_json.parent}" and count_messages(by_dir, MSGS) == 11


def test_auto_falls_back_to_tiktoken_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    counter, note = resolve_counter("auto:Qwen/Qwen3.6-27B")
    assert counter.name == "tiktoken:o200k_base" and "no local Hugging Face tokenizer for Qwen/Qwen3.6-27B" in note


@pytest.mark.parametrize("spec, message", [
    ("o200k_base", "expected tiktoken:ENC"), ("sentencepiece:x", "unknown kind"),
    ("hf:/nonexistent/dir", "no tokenizer.json"), ("tiktoken:not_an_encoding", "not available offline"),
])
def test_bad_tokenizer_specs(spec, message):
    with pytest.raises(AdaptError, match=message):
        resolve_counter(spec)


def test_a_file_that_is_no_tokenizer_is_one_error(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"not": "a tokenizer"}')
    with pytest.raises(AdaptError, match="cannot load tokenizer"):
        resolve_counter(f"hf:{bad}")
