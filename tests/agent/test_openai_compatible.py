"""A self-hosted OpenAI-compatible server (SGLang / vLLM style) through `api_base`, served locally."""

import pytest
from fastapi import FastAPI, Request  # module level: FastAPI resolves the handler's annotations here

from ptxcore.agent import CallContext
from ptxcore.agent.llm import LiteLLMClient

from .servers import serving


@pytest.fixture(scope="module")
def server_url():
    app = FastAPI()
    app.state.requests = []

    @app.post("/v1/chat/completions")
    async def chat(request: Request):
        body = await request.json()
        app.state.requests.append(body)
        return {
            "id": "cmpl-1", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": {
                "role": "assistant", "content": "Here it is.\n```cpp\nint k;\n```",
                "reasoning_content": "Think about tiles."}}],
            "usage": {"prompt_tokens": 321, "completion_tokens": 45, "total_tokens": 366,
                      "completion_tokens_details": {"reasoning_tokens": 12},
                      "prompt_tokens_details": {"cached_tokens": 256}},
        }

    with serving(app) as base:
        yield f"{base}/v1", app.state.requests


def test_api_base_model_with_decoding_settings(server_url):
    url, requests = server_url
    client = LiteLLMClient("openai/Qwen/Qwen3.6-27B", api_base=url, api_key="local",
                           decoding={"temperature": 1.0, "top_p": 0.95, "max_tokens": 2048,
                                     "extra_body": {"top_k": 20, "min_p": 0.0}},
                           context_window_tokens=262144)
    ctx = CallContext(problem="gemm_n7168_k5120", arch="hopper", prompt_variant="hopper-pack")
    reply = client.complete([{"role": "system", "content": "S"}, {"role": "user", "content": "U"}], ctx)
    assert reply.text.endswith("```cpp\nint k;\n```") and reply.reasoning == "Think about tiles."
    u = reply.usage
    assert (u.prompt_tokens, u.completion_tokens, u.reasoning_tokens, u.cached_tokens) == (321, 45, 12, 256)
    assert u.latency_s > 0
    body = requests[-1]
    assert body["model"] == "Qwen/Qwen3.6-27B" and body["temperature"] == 1.0 and body["top_p"] == 0.95
    assert body["max_tokens"] == 2048 and body["top_k"] == 20
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "metadata" not in body  # our call context stays on this side
    assert client.context_window_tokens() == 262144
