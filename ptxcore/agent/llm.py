"""The litellm client adapter: every litellm model string, OpenAI-compatible servers, and `replay/...`.

Offline-safe: LITELLM_LOCAL_MODEL_COST_MAP is set before litellm is imported, so litellm never
fetches its model cost map. Retries live here and only here (litellm's own retries and the HTTP SDK's
are switched off); transient errors back off exponentially, others raise at once.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

import litellm  # noqa: E402
from litellm import CustomLLM  # noqa: E402
from litellm.llms.custom_llm import CustomLLMError  # noqa: E402

from ptxcore.schema import LLMUsage  # noqa: E402

from .replay import ReplayError, problem_in_prompt, resolve_source  # noqa: E402
from .types import CallContext, ContextOverflowError, LLMReply  # noqa: E402

log = logging.getLogger(__name__)
litellm.suppress_debug_info = True  # no "give feedback" banners on stdout

REPLAY_PROVIDER = "replay"
TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    litellm.RateLimitError, litellm.APIConnectionError, litellm.Timeout, litellm.InternalServerError,
    litellm.ServiceUnavailableError, litellm.BadGatewayError,
)


class ReplayProvider(CustomLLM):
    """litellm custom provider `replay`: `replay/<library>` and `replay/warehouse:<campaign>`."""

    def completion(self, model: str, messages: list, api_base: str, custom_prompt_dict: dict,  # noqa: PLR0913
                   model_response: Any, print_verbose: Callable, encoding: Any, api_key: Any,
                   logging_obj: Any, optional_params: dict, acompletion: Any = None,
                   litellm_params: dict | None = None, logger_fn: Any = None, headers: dict | None = None,
                   timeout: Any = None, client: Any = None) -> Any:
        try:
            return self._serve(model, messages, model_response, litellm_params)
        except ReplayError as exc:  # a bad request, never a transient failure
            raise CustomLLMError(status_code=400, message=str(exc)) from exc

    def _serve(self, model: str, messages: list, model_response: Any, litellm_params: dict | None) -> Any:
        source = resolve_source(model)
        meta = ((litellm_params or {}).get("metadata") or {}).get("ptxbench") or {}
        problem = problem_in_prompt(messages, source.problems()) or meta.get("problem")
        if problem is None:
            raise ReplayError(f"replay/{model}: the prompt names no problem this source knows")
        turn = meta.get("turn")
        if turn is None:  # turn t = number of assistant messages so far
            turn = sum(1 for m in messages if m.get("role") == "assistant")
        answer = source.response(problem, meta.get("arch", ""), meta.get("prompt_variant", ""),
                                 int(meta.get("trajectory_index", 0)), int(turn))
        message = model_response.choices[0].message
        message.content = answer.response
        if answer.reasoning:
            message.reasoning_content = answer.reasoning
        prompt_tokens = litellm.token_counter(model="gpt-4o", messages=messages)
        completion_tokens = litellm.token_counter(model="gpt-4o", text=answer.response + answer.reasoning)
        model_response.usage = litellm.Usage(prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                             total_tokens=prompt_tokens + completion_tokens)
        model_response.model = f"{REPLAY_PROVIDER}/{model}"
        return model_response


_REPLAY_HANDLER = ReplayProvider()


def register_replay_provider() -> None:
    """Make `replay/...` model strings resolve to the replay provider (idempotent)."""
    if not any(item.get("provider") == REPLAY_PROVIDER for item in litellm.custom_provider_map):
        litellm.custom_provider_map = [
            *litellm.custom_provider_map, {"provider": REPLAY_PROVIDER, "custom_handler": _REPLAY_HANDLER}
        ]


def provider_of(model: str) -> str:
    """litellm's provider for a model string (the prefix for replay and unknown ones)."""
    if model.startswith(f"{REPLAY_PROVIDER}/"):
        return REPLAY_PROVIDER
    try:
        return litellm.get_llm_provider(model)[1]
    except Exception:  # noqa: BLE001 - litellm raises many kinds for unknown strings
        return model.split("/", 1)[0]


class UnknownProviderError(ValueError):
    """litellm knows no provider for a model string (one line)."""


def check_provider(model: str, api_base: str | None = None) -> str:
    """litellm's provider for `model` (its provider list decides); UnknownProviderError naming the string."""
    import difflib

    known = {getattr(p, "value", p) for p in litellm.provider_list}  # enum members, and str for custom ones
    try:
        provider = litellm.get_llm_provider(model, api_base=api_base)[1]
    except Exception:  # noqa: BLE001 - litellm raises BadRequestError and others for unknown strings
        provider = None
    if provider in known:
        return provider
    prefix = model.split("/", 1)[0]
    close = difflib.get_close_matches(prefix, sorted(known), n=1)
    hint = f"did you mean {close[0]!r}? " if close and "/" in model else ""
    raise UnknownProviderError(
        f"{model!r}: litellm knows no such provider ({hint}write <provider>/<model>, e.g. anthropic/..., or "
        "openai/<model> with api_base for an OpenAI-compatible server; see https://docs.litellm.ai/docs/providers)")


def model_warnings(model: str, api_base: str | None, context_window_tokens: int | None,
                   api_key_env: str | None) -> list[str]:
    """What litellm cannot vouch for: a model missing from its model map, provider keys that are not set."""
    out = []
    if context_window_tokens is None:
        try:
            litellm.get_model_info(model)
        except Exception:  # noqa: BLE001 - unmapped model
            out.append(f"{model} is not in litellm's model map: no context window or price is known "
                       "(set context_window_tokens)")
    if api_key_env is None and api_base is None:
        try:
            env = litellm.validate_environment(model)
        except Exception:  # noqa: BLE001 - best effort
            env = {"keys_in_environment": True}
        if not env.get("keys_in_environment", True):
            out.append(f"{model}: litellm looks for {' or '.join(env.get('missing_keys') or [])}, which is not set "
                       "(or name the variable in api_key_env)")
    return out


def _usage(response: Any, latency_s: float) -> LLMUsage:
    u = getattr(response, "usage", None)
    details = getattr(u, "completion_tokens_details", None)
    prompt_details = getattr(u, "prompt_tokens_details", None)
    try:
        cost = float(litellm.completion_cost(completion_response=response))
    except Exception:  # noqa: BLE001 - unknown models have no price
        cost = None
    return LLMUsage(
        prompt_tokens=int(getattr(u, "prompt_tokens", 0) or 0),
        completion_tokens=int(getattr(u, "completion_tokens", 0) or 0),
        reasoning_tokens=int(getattr(details, "reasoning_tokens", 0) or 0),
        cached_tokens=int(getattr(prompt_details, "cached_tokens", 0) or 0),
        latency_s=round(latency_s, 3),
        cost_usd=cost,
    )


class LiteLLMClient:
    """An `LLMClient` over litellm.completion."""

    def __init__(self, model: str, decoding: dict[str, Any] | None = None, api_base: str | None = None,
                 api_key: str | None = None, context_window_tokens: int | None = None,
                 max_attempts: int = 4, backoff_s: float = 5.0, timeout_s: float | None = 1800.0,
                 completion: Callable[..., Any] | None = None, sleep: Callable[[float], None] = time.sleep):
        register_replay_provider()
        if model.startswith(f"{REPLAY_PROVIDER}/"):
            resolve_source(model.split("/", 1)[1])  # fail now, with a clear error, if it cannot serve
        self.model = model
        self.decoding = dict(decoding or {})
        self.api_base, self.api_key = api_base, api_key
        self._window = context_window_tokens
        self.max_attempts, self.backoff_s, self.timeout_s = max(1, max_attempts), backoff_s, timeout_s
        self._completion = completion or litellm.completion
        self._sleep = sleep

    def context_window_tokens(self) -> int | None:
        if self._window is not None:
            return self._window
        if self.model.startswith(f"{REPLAY_PROVIDER}/"):
            return None
        try:
            info = litellm.get_model_info(self.model)
        except Exception:  # noqa: BLE001 - unmapped model: no known window
            return None
        return info.get("max_input_tokens") or info.get("max_tokens")

    def count_tokens(self, messages: list[dict[str, str]]) -> int:
        return int(litellm.token_counter(model=self.model, messages=messages))

    def _call(self, messages: list[dict[str, str]], context: CallContext) -> Any:
        kwargs: dict[str, Any] = {**self.decoding, "num_retries": 0, "max_retries": 0, "drop_params": True,
                                  "metadata": {"ptxbench": context.metadata()}}
        if self.api_base:
            kwargs["api_base"] = self.api_base
        if self.api_key:
            kwargs["api_key"] = self.api_key
        if self.timeout_s:
            kwargs.setdefault("timeout", self.timeout_s)
        return self._completion(model=self.model, messages=messages, **kwargs)

    def complete(self, messages: list[dict[str, str]], context: CallContext) -> LLMReply:
        for attempt in range(1, self.max_attempts + 1):
            started = time.monotonic()
            try:
                response = self._call(messages, context)
                break
            except litellm.ContextWindowExceededError as exc:
                raise ContextOverflowError(str(exc)) from exc
            except TRANSIENT_ERRORS as exc:
                if attempt == self.max_attempts:
                    raise
                delay = self.backoff_s * 2 ** (attempt - 1)
                log.warning("%s: %s (attempt %d/%d), retrying in %.0f s", self.model, type(exc).__name__,
                            attempt, self.max_attempts, delay)
                self._sleep(delay)
        latency = time.monotonic() - started
        choice = response.choices[0]
        message = choice.message
        return LLMReply(
            text=message.content or "", reasoning=getattr(message, "reasoning_content", None) or "",
            usage=_usage(response, latency), model=str(getattr(response, "model", "") or self.model),
            finish_reason=str(choice.finish_reason or ""),
        )
