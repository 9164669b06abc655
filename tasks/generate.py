"""The generate task: one model call (retries live in the client, not here)."""

from __future__ import annotations

from prefect import task
from prefect.cache_policies import NO_CACHE

from ptxcore.agent import CallContext, LLMReply
from ptxcore.agent.types import LLMClient


@task(name="generate", task_run_name="generate {label}", cache_policy=NO_CACHE, retries=0)
def generate(client: LLMClient, messages: list[dict[str, str]], context: CallContext, label: str) -> LLMReply:
    """Ask the model for the next kernel."""
    return client.complete(messages, context)
