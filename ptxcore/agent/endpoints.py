"""What a campaign or recipe file may make this process send, and where (campaign files are untrusted).

A file names models, and with them an API key variable and a server; it may also name a profiling service and an
MLflow server. Alone it must not be able to send this project's secrets, or any environment variable, to an address
of its choosing. So:

- `api_key_env` must be one of the variables litellm reads for the model's provider (PROVIDER_KEYS), or, for a
  self-hosted OpenAI-compatible server whose `api_base` the user allowed, one of SELF_HOSTED_KEYS. A `PTXBENCH_`
  variable is never accepted (the profiler token is one).
- `api_base` must be the provider's own (PROVIDER_BASES) or allowed outside the file: `--allow-endpoint URL`
  (alias `--allow-api-base`) on the command line, or $PTXBENCH_ALLOWED_ENDPOINTS (URLs separated by spaces or
  commas) in the environment. The same rule holds for a profiling-service URL in `profilers` (the client sends the
  profiler token there) and an http(s) `mlflow_tracking_uri` (MLflow sends its tracking credentials there).
- `decoding` is passed to litellm.completion, which also takes `api_base`, `api_key`, `base_url`, headers and
  callbacks: only DECODING_KEYS (sampling and output settings) are accepted.

An allowed entry matches a URL of the same scheme, host and port whose path equals the entry's path or lies below it.
Pure: no litellm import (the provider name is passed in).
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

ENDPOINTS_ENV = "PTXBENCH_ALLOWED_ENDPOINTS"
"""Addresses (URLs) a campaign or recipe file may name, set by the user outside the file."""
ALLOW_OPTION = "--allow-endpoint"
"""The command-line option that adds to ENDPOINTS_ENV for one run."""
OWN_PREFIX = "PTXBENCH_"
"""This project's own variables (the profiler token among them): never a model's key."""

PROVIDER_KEYS: dict[str, tuple[str, ...]] = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
    "openrouter": ("OPENROUTER_API_KEY",),
    "deepseek": ("DEEPSEEK_API_KEY",),
    "mistral": ("MISTRAL_API_KEY",),
    "groq": ("GROQ_API_KEY",),
    "xai": ("XAI_API_KEY",),
    "together_ai": ("TOGETHERAI_API_KEY", "TOGETHER_AI_API_KEY"),
    "fireworks_ai": ("FIREWORKS_AI_API_KEY", "FIREWORKSAI_API_KEY", "FIREWORKS_API_KEY"),
    "deepinfra": ("DEEPINFRA_API_KEY",),
    "perplexity": ("PERPLEXITYAI_API_KEY",),
    "cohere": ("COHERE_API_KEY",),
    "cohere_chat": ("COHERE_API_KEY",),
    "moonshot": ("MOONSHOT_API_KEY",),
    "dashscope": ("DASHSCOPE_API_KEY",),
    "cerebras": ("CEREBRAS_API_KEY",),
    "nvidia_nim": ("NVIDIA_NIM_API_KEY",),
    "huggingface": ("HUGGINGFACE_API_KEY",),
    "novita": ("NOVITA_API_KEY",),
    "nebius": ("NEBIUS_API_KEY",),
    "azure": ("AZURE_API_KEY",),
    "hosted_vllm": ("HOSTED_VLLM_API_KEY",),
}
"""Per litellm provider, the environment variables litellm itself reads for its key (litellm.validate_environment)."""

SELF_HOSTED_KEYS = ("SGLANG_API_KEY", "VLLM_API_KEY", "HOSTED_VLLM_API_KEY", "OPENAI_API_KEY")
"""Keys of a self-hosted OpenAI-compatible server (SGLang, vLLM): accepted only with an allowed `api_base`."""

PROVIDER_BASES: dict[str, tuple[str, ...]] = {
    "openai": ("https://api.openai.com",),
    "anthropic": ("https://api.anthropic.com",),
    "gemini": ("https://generativelanguage.googleapis.com",),
    "openrouter": ("https://openrouter.ai/api",),
    "deepseek": ("https://api.deepseek.com",),
    "mistral": ("https://api.mistral.ai",),
    "groq": ("https://api.groq.com",),
    "xai": ("https://api.x.ai",),
}
"""A provider's own API address: an `api_base` there needs no allowing."""

DECODING_KEYS = frozenset({
    "temperature", "top_p", "top_k", "min_p", "max_tokens", "max_completion_tokens", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "seed", "stop", "reasoning_effort", "thinking", "extra_body",
    "logprobs", "top_logprobs", "response_format", "verbosity",
})
"""`decoding` keys passed to litellm.completion: sampling and output settings only (never an address, a key, a
header, a callback or a client)."""


class EndpointError(ValueError):
    """A file asks to send a key or a request where it may not (one line: key: problem)."""


def allowed_endpoints(env: Mapping[str, str] | None = None, extra: Iterable[str] = ()) -> tuple[str, ...]:
    """The allowed addresses: $PTXBENCH_ALLOWED_ENDPOINTS plus `extra`."""
    env = os.environ if env is None else env
    listed = [u for u in re.split(r"[\s,]+", env.get(ENDPOINTS_ENV, "")) if u]
    return tuple(dict.fromkeys([*listed, *extra]))


def allow_for_this_process(urls: Iterable[str]) -> None:
    """`--allow-endpoint URL`: add to $PTXBENCH_ALLOWED_ENDPOINTS of this process (and the flows it runs)."""
    urls = list(urls)
    for url in urls:
        if _parts(url) is None:
            raise EndpointError(f"{ALLOW_OPTION} {url[:80]!r}: expected an http(s) URL")
    if urls:
        os.environ[ENDPOINTS_ENV] = " ".join(allowed_endpoints(extra=urls))


def _parts(url: str) -> tuple[str, str, int, str] | None:
    try:
        u = urlsplit(url)
        port = u.port
    except ValueError:
        return None
    if u.scheme not in ("http", "https") or not u.hostname or u.username or u.password:
        return None
    path = posixpath.normpath(u.path) if u.path else ""
    return u.scheme, u.hostname.lower(), port or (443 if u.scheme == "https" else 80), path.rstrip("/")


def endpoint_allowed(url: str, allowed: Iterable[str]) -> bool:
    """`url` has the scheme, host and port of an allowed entry and a path equal to or below the entry's."""
    mine = _parts(url)
    if mine is None:
        return False
    for entry in allowed:
        other = _parts(entry)
        if other is not None and mine[:3] == other[:3] and (mine[3] == other[3] or mine[3].startswith(other[3] + "/")):
            return True
    return False


def _not_allowed(key: str, url: str, what: str) -> EndpointError:
    return EndpointError(f"{key}: {url[:120]} is not an allowed address for {what} (a campaign file alone may not "
                         f"choose where requests go: pass {ALLOW_OPTION} {url[:120]} or list it in ${ENDPOINTS_ENV})")


def check_model_access(key: str, provider: str, api_base: str | None, api_key_env: str | None,
                       allowed: Iterable[str]) -> None:
    """A model spec's server and key variable (EndpointError `key.field: problem` otherwise)."""
    allowed = tuple(allowed)
    own = PROVIDER_BASES.get(provider, ())
    if api_base is not None and not endpoint_allowed(api_base, own) and not endpoint_allowed(api_base, allowed):
        raise _not_allowed(f"{key}.api_base", api_base, "a model's requests and key")
    if api_key_env is None:
        return
    if api_key_env.startswith(OWN_PREFIX):
        raise EndpointError(f"{key}.api_key_env: {api_key_env} is one of this project's own variables, never a model's "
                            "key")
    names = PROVIDER_KEYS.get(provider, ())
    self_hosted = api_base is not None and not endpoint_allowed(api_base, own)
    if self_hosted:
        names = tuple(dict.fromkeys([*names, *SELF_HOSTED_KEYS]))
    if api_key_env not in names:
        listed = ", ".join(names) or f"none known for provider {provider!r}"
        raise EndpointError(f"{key}.api_key_env: {api_key_env} is not a key variable of provider {provider!r} "
                            f"(accepted: {listed})")


def check_route(key: str, route: str, allowed: Iterable[str]) -> None:
    """A judge route named by a file: a profiling-service URL must be allowed (the profiler token goes there)."""
    if route.startswith(("http://", "https://")) and not endpoint_allowed(route, allowed):
        raise _not_allowed(key, route, "the profiling service (the profiler token is sent there)")


def check_tracking_uri(key: str, uri: str | None, allowed: Iterable[str]) -> None:
    """An MLflow tracking URI named by a file: a server (http/https) must be allowed (MLflow sends credentials)."""
    if uri and uri.lower().startswith(("http://", "https://")) and not endpoint_allowed(uri, allowed):
        raise _not_allowed(key, uri, "MLflow (its tracking credentials are sent there)")
    if uri and "://" in uri and not uri.lower().startswith(("http://", "https://", "sqlite:///", "file:")):
        raise EndpointError(f"{key}: {uri[:120]}: only sqlite:///, file: or an allowed http(s) tracking URI")


def check_decoding(decoding: Mapping[str, object]) -> None:
    """Only sampling and output settings (ValueError naming the first other key)."""
    for name in decoding:
        if name not in DECODING_KEYS:
            raise ValueError(f"{str(name)[:60]!r} is not a decoding setting (accepted: {', '.join(sorted(DECODING_KEYS))}); "
                             "addresses, keys, headers and callbacks are never taken from a campaign file")
