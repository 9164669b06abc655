"""Context policies: which messages of the recorded history the model sees on its next call."""

from __future__ import annotations

from .types import ContextPolicy

Message = dict[str, str]


def history_messages(system: str, user: str, pairs: list[tuple[str, str]]) -> list[Message]:
    """The full conversation: system, task, then (answer, feedback) pairs."""
    messages: list[Message] = []
    if system:
        messages.append({"role": "system", "content": system})
    messages.append({"role": "user", "content": user})
    for answer, feedback in pairs:
        messages.append({"role": "assistant", "content": answer})
        messages.append({"role": "user", "content": feedback})
    return messages


def messages_for_call(
    system: str, user: str, pairs: list[tuple[str, str]], policy: ContextPolicy | str
) -> list[Message]:
    """Apply the policy to the history (the record always keeps everything)."""
    policy = ContextPolicy(policy)
    if policy is ContextPolicy.FULL:
        return history_messages(system, user, pairs)
    if policy is ContextPolicy.LATEST_PAIR:
        return history_messages(system, user, pairs[-1:])
    full = history_messages("", user, pairs)
    joined = "\n\n".join(m["content"] for m in full)
    head = [{"role": "system", "content": system}] if system else []
    return [*head, {"role": "user", "content": joined}]
