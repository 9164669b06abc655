"""Token budget of SFT rows: a configurable tokenizer, and the ChatML rendering the rows are counted in.

Tokenizer specs:
  `tiktoken:ENC`   tiktoken encoding (loaded offline from litellm's bundled BPE files, ptxcore.prompts.tokens)
  `hf:PATH`        a local Hugging Face `tokenizer.json` (or a folder holding one), read with `tokenizers`
  `auto:REPO|PATH` a local Hugging Face tokenizer when one is there (a path, or REPO in the local HF
                   cache: nothing is downloaded), else tiktoken o200k_base; the fallback is recorded.
A row is counted as Qwen's chat format renders it (ChatML: `<|im_start|>role\\n...<|im_end|>\\n` per
message); with Qwen's own tokenizer the markers are single special tokens, with tiktoken they count as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from ptxcore.prompts import TiktokenCounter, TokenCounter, TokenizerUnavailableError

from .errors import AdaptError

FALLBACK_ENCODING = "o200k_base"
RENDERING = "chatml"


class HfTokenizerCounter:
    """A Hugging Face `tokenizer.json`, through the `tokenizers` library (no transformers needed)."""

    def __init__(self, path: Path, label: str) -> None:
        from tokenizers import Tokenizer

        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as exc:  # the Rust side raises plain Exception for a bad file
            raise AdaptError(f"cannot load tokenizer {path}: {str(exc).splitlines()[0][:200]}") from exc
        self.name = f"hf:{label}"
        self.path = path

    def count(self, text: str) -> int:
        return len(self._tok.encode(text, add_special_tokens=False).ids)


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


def resolve_counter(spec: str) -> tuple[TokenCounter, str]:
    """The counter for a tokenizer spec, and a note (why a fallback was used; empty otherwise)."""
    kind, sep, arg = spec.partition(":")
    if not sep or not arg:
        raise AdaptError(f"tokenizer {spec!r}: expected tiktoken:ENC, hf:PATH or auto:REPO|PATH")
    if kind == "tiktoken":
        try:
            return TiktokenCounter(arg), ""
        except TokenizerUnavailableError as exc:
            raise AdaptError(str(exc)) from exc
    if kind == "hf":
        found = _tokenizer_file(Path(arg).expanduser())
        if found is None:
            raise AdaptError(f"tokenizer {spec!r}: no tokenizer.json at {arg}")
        return HfTokenizerCounter(found, arg), ""
    if kind == "auto":
        found = _tokenizer_file(Path(arg).expanduser()) or _cached(arg)
        if found is not None:
            return HfTokenizerCounter(found, arg), ""
        return TiktokenCounter(FALLBACK_ENCODING), f"no local Hugging Face tokenizer for {arg}; counted with " \
                                                    f"tiktoken:{FALLBACK_ENCODING}"
    raise AdaptError(f"tokenizer {spec!r}: unknown kind {kind!r} (tiktoken, hf or auto)")


def chatml(messages: Sequence[dict[str, str]]) -> str:
    """The ChatML rendering of a conversation (Qwen's chat format, without a generation prompt)."""
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)


def count_messages(counter: TokenCounter, messages: Sequence[dict[str, str]]) -> int:
    return counter.count(chatml(messages))
