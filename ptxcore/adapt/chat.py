"""How a row is rendered for the trainer, and the render -> parse round trip the authors apply to every row.

The paper counts a row's tokens in Qwen3.6's chat template, and the authors' builders write each row's messages
as that template renders and parses them back (build_sft_dataset_fixit.py, export_messages_from_chat_template:
a historical assistant turn loses its <think> block, the last one gets `<think>\\n...\\n</think>\\n\\n`). Two
renderers:

* `JinjaRenderer`: a tokenizer's own chat template (`chat_template` of a tokenizer_config.json, or a
  chat_template.jinja file), run in Jinja's immutable sandbox as transformers runs it. A template is
  untrusted input: size-limited, sandboxed, every failure one line.
* `QwenRulesRenderer`: where no template file is at hand, our rendering of the Qwen3 family's template rules
  (system/user as ChatML; an assistant turn's <think> block kept only after the last user message, with the
  spacing above). It is ours, not Qwen's file, and is labelled so wherever a count is recorded.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from .errors import AdaptError

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
ROLES = ("system", "user", "assistant")
MAX_TEMPLATE_BYTES = 256 * 1024
"""Largest chat template read (Qwen's is about 7 KB)."""
QWEN_RULES = "qwen3-rules (ours)"
"""Label of QwenRulesRenderer in manifests and rows."""

Messages = Sequence[dict[str, str]]


class ChatRenderer(Protocol):
    """Renders a conversation as the trainer's chat template does (no generation prompt)."""

    label: str
    """What rendered it, as recorded (`qwen3-rules (ours)`, `chat_template of PATH`)."""

    def render(self, messages: Messages) -> str: ...


def _last_query(messages: Messages) -> int:
    for i in range(len(messages) - 1, -1, -1):
        c = messages[i]["content"]
        if messages[i]["role"] == "user" and not (c.startswith("<tool_response>") and c.endswith("</tool_response>")):
            return i
    return len(messages) - 1


def _assistant(content: str, keep_thinking: bool, last: bool) -> str:
    reasoning = ""
    if "</think>" in content:
        reasoning = content.split("</think>")[0].rstrip("\n").split("<think>")[-1].lstrip("\n")
        content = content.split("</think>")[-1].lstrip("\n")
    if keep_thinking and (last or reasoning):
        return f"<think>\n{reasoning.strip(chr(10))}\n</think>\n\n{content.lstrip(chr(10))}"
    return content


class QwenRulesRenderer:
    """Our rendering of the Qwen3 chat template's rules (see the module docstring)."""

    label = QWEN_RULES

    def render(self, messages: Messages, add_generation_prompt: bool = False) -> str:
        query, parts = _last_query(messages), []
        for i, m in enumerate(messages):
            content = m["content"]
            if m["role"] == "assistant":
                content = _assistant(content, keep_thinking=i > query, last=i == len(messages) - 1)
            parts.append(f"{IM_START}{m['role']}\n{content}{IM_END}\n")
        return "".join(parts) + (f"{IM_START}assistant\n" if add_generation_prompt else "")


class JinjaRenderer:
    """A tokenizer's own chat template, sandboxed."""

    def __init__(self, template: str, source: str, special: dict[str, str] | None = None) -> None:
        from jinja2 import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        def raise_exception(message: str) -> None:
            raise AdaptError(f"chat template {source}: {message}")

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        try:
            self._template = env.from_string(template)
        except TemplateError as exc:
            raise AdaptError(f"chat template {source}: {str(exc).splitlines()[0][:200]}") from None
        self.label, self._special = f"chat_template of {source}", special or {}

    def render(self, messages: Messages, add_generation_prompt: bool = False) -> str:
        from jinja2 import TemplateError

        try:
            return self._template.render(messages=[dict(m) for m in messages], add_generation_prompt=add_generation_prompt,
                                         **self._special)
        except TemplateError as exc:
            raise AdaptError(f"{self.label}: {str(exc).splitlines()[0][:200]}") from None


def load_template(folder: Path) -> JinjaRenderer | None:
    """The chat template a tokenizer folder ships (chat_template.jinja, else tokenizer_config.json), if any."""
    jinja, config = folder / "chat_template.jinja", folder / "tokenizer_config.json"
    special: dict[str, str] = {}
    text = None
    if config.is_file():
        data = _json_file(config)
        special = {k: v for k, v in data.items() if k in ("bos_token", "eos_token") and isinstance(v, str)}
        template = data.get("chat_template")
        text = template if isinstance(template, str) else None
    if jinja.is_file():
        text = _bounded_text(jinja)
    return JinjaRenderer(text, str(folder), special) if text else None


def _bounded_text(path: Path) -> str:
    if path.stat().st_size > MAX_TEMPLATE_BYTES:
        raise AdaptError(f"{path}: larger than {MAX_TEMPLATE_BYTES} bytes")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise AdaptError(f"{path}: not UTF-8 text") from None


def _json_file(path: Path) -> dict:
    try:
        data = json.loads(_bounded_text(path))
    except json.JSONDecodeError as exc:
        raise AdaptError(f"{path}:{exc.lineno}: invalid JSON: {exc.msg}") from None
    if not isinstance(data, dict):
        raise AdaptError(f"{path}: expected a JSON object")
    return data


def parse_chatml(rendered: str) -> list[dict[str, str]]:
    """Messages back from a ChatML rendering (what the authors' parse_qwen_chat_template accepts)."""
    out, pos = [], 0
    while pos < len(rendered):
        start = rendered.find(IM_START, pos)
        if start == -1:
            if rendered[pos:].strip():
                raise ValueError("text after the last message")
            break
        if rendered[pos:start].strip():
            raise ValueError("text before a message")
        role_end = rendered.find("\n", start + len(IM_START))
        role = rendered[start + len(IM_START):role_end] if role_end != -1 else ""
        if role not in ROLES:
            raise ValueError(f"unexpected role {role[:20]!r}")
        end = rendered.find(IM_END, role_end + 1)
        if end == -1:
            raise ValueError(f"a {role} message has no end marker")
        out.append({"role": role, "content": rendered[role_end + 1:end]})
        pos = end + len(IM_END) + (1 if rendered[end + len(IM_END):end + len(IM_END) + 1] == "\n" else 0)
    return out


def round_trip(renderer: ChatRenderer, messages: Messages) -> list[str]:
    """Each message's content as the template renders and parses it back; ValueError when roles or count change."""
    parsed = parse_chatml(renderer.render(messages))
    if [m["role"] for m in parsed] != [m["role"] for m in messages]:
        raise ValueError(f"the chat template changed the messages: {len(messages)} -> {len(parsed)} "
                         f"({', '.join(m['role'] for m in parsed)})")
    return [m["content"] for m in parsed]
