"""A TRL GRPO `rollout_func` over PTXBench's training environment (a sketch to adapt, not part of the product).

Start the environment next to the trainer (or on the GPU host, with a shared token for a non-loopback bind):

    ptxbench env serve --judge http://127.0.0.1:8765 --run-id grpo-run-1      # judged by the profiling service

Each dataset prompt names a problem (e.g. "gemm_n7168_k5120"); for it this rollout opens an environment, takes its
first observation (the prompt MiniPTXAgent sends), lets the policy answer, and returns the environment's reward
beside the token ids TRL trains on. Every step is recorded in the warehouse like a campaign's turn (source
`environment`, the policy's model id, the reward spec's sha256), so `ptxbench report grpo-run-1` shows the run.

Checked against TRL 1.16 (tests/gym/test_trl_grpo.py runs one GRPOTrainer step with it on a CPU):
`GRPOTrainer(..., rollout_func=f)` calls `f(prompts, trainer)` with one prompt per completion it wants (its sampler
already repeats each dataset prompt `num_generations` times) and needs `prompt_ids`, `completion_ids` and `logprobs`
back (`logprobs` may be None: TRL then takes the sampling policy to be the trained one); every other key reaches
the reward functions as a keyword argument. TRL 1.16 ships no generation helper for a custom rollout, so
`model_generate` samples with the trainer's own model (Hugging Face `generate`); with vLLM, pass a `generate` of
your own to `ptxbench_rollout`. The hook is experimental in TRL and has changed between releases.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ptxcore.gym.http import EnvClient

ENV_URL = "http://127.0.0.1:8790"
POLICY = "grpo/qwen3-8b-step"  # recorded as the turns' model: change it per checkpoint

Sample = dict[str, Any]  # text, prompt_ids, completion_ids, logprobs (a list, or None)


def ptxbench_rollout(problems: Sequence[str], generate: Callable[[list[list[dict]]], list[Sample]],
                     client: EnvClient, policy_model: str = POLICY, max_turns: int = 1) -> dict[str, list]:
    """One environment step per prompt (max_turns 1: a single-turn GRPO group); `generate` maps chat messages
    to samples carrying `text`, `prompt_ids`, `completion_ids`, `logprobs`."""
    envs = [client.create(problem, max_turns=max_turns, policy_model=policy_model) for problem in problems]
    try:
        first = [env.reset(seed=i) for i, env in enumerate(envs)]
        samples = generate([f.observation for f in first])
        outcomes = client.step_many(list(zip(envs, [s["text"] for s in samples], strict=True)))
        rewards = [getattr(o, "reward", 0.0) for o in outcomes]  # a StepFailure (judge down, timeout): 0, logged
        statuses = [o.info.status.value if hasattr(o, "info") else f"failed:{o.kind.value}" for o in outcomes]
    finally:
        for env in envs:
            env.close()
    logprobs = [s["logprobs"] for s in samples]
    return {"prompt_ids": [s["prompt_ids"] for s in samples], "completion_ids": [s["completion_ids"] for s in samples],
            "logprobs": None if any(lp is None for lp in logprobs) else logprobs,
            "env_reward": rewards, "env_status": statuses}


def model_generate(trainer: Any, max_new_tokens: int = 4096,
                   max_prompt_tokens: int | None = None) -> Callable[[list[list[dict]]], list[Sample]]:
    """Samples from the trainer's own model, one per observation. The observation holds the whole prompt
    (system prompt with the knowledge pack: tens of thousands of tokens); `max_prompt_tokens` keeps its last
    tokens, as TRL's own prompt truncation does (None: all of it)."""
    import torch

    model, tokenizer = trainer.model, trainer.processing_class

    def generate(messages: list[list[dict]]) -> list[Sample]:
        out = []
        for m in messages:
            ids = tokenizer.apply_chat_template(m, tokenize=True, add_generation_prompt=True)
            ids = list(ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids)
            if max_prompt_tokens is not None:
                ids = ids[-max_prompt_tokens:]
            with torch.no_grad():
                seq = model.generate(torch.tensor([ids], device=model.device), do_sample=True,
                                     max_new_tokens=max_new_tokens, pad_token_id=tokenizer.pad_token_id)
            completion = seq[0, len(ids):].tolist()
            out.append({"text": tokenizer.decode(completion, skip_special_tokens=True), "prompt_ids": ids,
                        "completion_ids": completion, "logprobs": None})
        return out

    return generate


def problem_of(prompt: Any) -> str:
    """The problem a dataset prompt names: the text itself, or a conversational prompt's last message."""
    return prompt if isinstance(prompt, str) else prompt[-1]["content"]


def make_rollout_func(env_url: str = ENV_URL, policy_model: str = POLICY, max_new_tokens: int = 4096,
                      max_prompt_tokens: int | None = None) -> Callable[[list, Any], dict[str, list]]:
    """TRL's hook, for `GRPOTrainer(rollout_func=...)`."""

    def rollout_func(prompts: list, trainer: Any) -> dict[str, list]:
        generate = model_generate(trainer, max_new_tokens, max_prompt_tokens)
        with EnvClient(env_url) as client:
            return ptxbench_rollout([problem_of(p) for p in prompts], generate, client, policy_model)

    return rollout_func


def env_reward(completions: list[Any], env_reward: list[float], **_: Any) -> list[float]:
    """The reward function TRL calls with the rollout's extra fields."""
    return list(env_reward)


# trainer = GRPOTrainer(model=..., reward_funcs=[env_reward], train_dataset=problems_dataset,
#                       args=GRPOConfig(num_generations=8, ...), rollout_func=make_rollout_func())
