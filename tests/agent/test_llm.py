"""The litellm adapter: one retry layer, usage, context window, the replay provider, offline import."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from types import SimpleNamespace

import litellm
import pytest

from ptxcore.agent import CallContext, ContextOverflowError
from ptxcore.agent.llm import LiteLLMClient, provider_of

CTX = CallContext(problem="gemm_n7168_k5120", arch="hopper", prompt_variant="hopper-pack", trajectory_index=0)
MSGS = [{"role": "user", "content": "hi"}]


def response(text="```cpp\nint a;\n```", reasoning=None):
    usage = SimpleNamespace(prompt_tokens=100, completion_tokens=50,
                            completion_tokens_details=SimpleNamespace(reasoning_tokens=30),
                            prompt_tokens_details=SimpleNamespace(cached_tokens=64))
    message = SimpleNamespace(content=text, reasoning_content=reasoning)
    return SimpleNamespace(choices=[SimpleNamespace(message=message, finish_reason="stop")], usage=usage, model="m")


class Flaky:
    def __init__(self, errors):
        self.errors = list(errors)
        self.kwargs = []

    def __call__(self, **kwargs):
        self.kwargs.append(kwargs)
        if self.errors:
            raise self.errors.pop(0)
        return response(reasoning="thinking")


def rate_limit():
    return litellm.RateLimitError("slow down", llm_provider="openai", model="gpt-x")


def test_transient_errors_are_retried_with_backoff_in_this_layer_only():
    sleeps = []
    fake = Flaky([rate_limit(), litellm.InternalServerError("boom", llm_provider="openai", model="gpt-x")])
    client = LiteLLMClient("openai/gpt-x", decoding={"temperature": 0.6}, completion=fake, sleep=sleeps.append,
                           backoff_s=2.0)
    reply = client.complete(MSGS, CTX)
    assert len(fake.kwargs) == 3 and sleeps == [2.0, 4.0]
    kw = fake.kwargs[0]
    assert kw["num_retries"] == 0 and kw["max_retries"] == 0 and kw["temperature"] == 0.6
    assert kw["metadata"]["ptxbench"]["problem"] == "gemm_n7168_k5120"
    u = reply.usage
    assert (u.prompt_tokens, u.completion_tokens, u.reasoning_tokens, u.cached_tokens) == (100, 50, 30, 64)
    assert reply.reasoning == "thinking" and reply.finish_reason == "stop"


def test_gives_up_after_max_attempts_and_never_retries_bad_requests():
    fake = Flaky([rate_limit()] * 5)
    with pytest.raises(litellm.RateLimitError):
        LiteLLMClient("openai/gpt-x", completion=fake, sleep=lambda s: None, max_attempts=3).complete(MSGS, CTX)
    assert len(fake.kwargs) == 3
    fake = Flaky([litellm.AuthenticationError("bad key", llm_provider="openai", model="gpt-x")])
    with pytest.raises(litellm.AuthenticationError):
        LiteLLMClient("openai/gpt-x", completion=fake, sleep=lambda s: None).complete(MSGS, CTX)
    assert len(fake.kwargs) == 1


def test_context_window_exceeded_becomes_a_context_overflow():
    fake = Flaky([litellm.ContextWindowExceededError("too long", llm_provider="openai", model="gpt-x")])
    with pytest.raises(ContextOverflowError):
        LiteLLMClient("openai/gpt-x", completion=fake, sleep=lambda s: None).complete(MSGS, CTX)


def test_context_window_from_model_info_or_override():
    assert LiteLLMClient("anthropic/claude-opus-4-5").context_window_tokens() == 200000
    assert LiteLLMClient("openai/Qwen/Qwen3.6-27B", context_window_tokens=131072).context_window_tokens() == 131072
    assert LiteLLMClient("openai/some-unmapped-model-xyz").context_window_tokens() is None
    assert LiteLLMClient("replay/scripted").context_window_tokens() is None
    assert LiteLLMClient("replay/scripted").count_tokens(MSGS) > 0


def test_provider_of():
    assert provider_of("replay/demo") == "replay"
    assert provider_of("anthropic/claude-opus-4-5") == "anthropic"
    assert provider_of("openrouter/z-ai/glm-5.2") == "openrouter"


def test_replay_provider_serves_through_litellm():
    client = LiteLLMClient("replay/scripted")
    prompt = [{"role": "user", "content": '{"name": "gemm_n7168_k5120"}'}]
    first = client.complete(prompt, CTX)
    assert "```" not in first.text and first.reasoning == "The user wants a GEMM; plan first."
    assert first.usage.prompt_tokens > 0 and first.usage.completion_tokens > 0 and first.usage.cost_usd is None
    third = client.complete(prompt, CTX.model_copy(update={"turn": 2}))
    assert "fill_zero" in third.text and third.model == "replay/scripted"


def test_replay_turn_defaults_to_the_number_of_assistant_messages():
    msgs = [{"role": "user", "content": '{"name": "gemm_n7168_k5120"}'},
            {"role": "assistant", "content": "a"}, {"role": "user", "content": "fb"}]
    reply = litellm.completion(model="replay/scripted", messages=msgs)
    assert "syntax" not in reply.choices[0].message.content and "First attempt" in reply.choices[0].message.content


def test_replay_errors_are_not_retried():
    with pytest.raises(Exception, match="no replay library"):
        LiteLLMClient("replay/no-such-library")
    client = LiteLLMClient("replay/scripted", sleep=lambda s: pytest.fail("must not retry"))
    with pytest.raises(litellm.BadRequestError, match="no script for mha_bwd_d128"):
        client.complete(MSGS, CTX.model_copy(update={"problem": "mha_bwd_d128"}))


def test_importing_the_adapter_never_fetches_the_cost_map():
    code = textwrap.dedent("""
        import os, socket
        os.environ.pop("LITELLM_LOCAL_MODEL_COST_MAP", None)
        attempts = []
        def refuse(*args, **kwargs):
            attempts.append(args[:2])
            raise OSError("network disabled in this test")
        socket.getaddrinfo = refuse
        socket.socket.connect = lambda self, addr: refuse(addr)
        import ptxcore.agent.llm
        import litellm
        assert os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
        print("ATTEMPTS", attempts)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "ATTEMPTS []" in out.stdout
