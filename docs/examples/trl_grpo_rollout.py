"""A TRL GRPO `rollout_func` over PTXBench's training environment (a sketch to adapt, not part of the product).

Start the environment next to the trainer (or on the GPU host, with a shared token for a non-loopback bind):

    ptxbench env serve --judge http://127.0.0.1:8765 --run-id grpo-run-1      # judged by the profiling service

Each dataset prompt names a problem (e.g. "gemm_n7168_k5120"); for it this rollout opens an environment, takes its
first observation (the prompt MiniPTXAgent sends), lets the policy answer, and returns the environment's reward
beside the token ids TRL trains on. Every step is recorded in the warehouse like a campaign's turn (source
`environment`, the policy's model id, the reward spec's sha256), so `ptxbench report grpo-run-1` shows the run.

TRL's rollout hook has changed across releases (the OpenEnv guide of your TRL version has the current one); here
it is `rollout_func(prompts, trainer) -> dict` with `generate_rollout_completions(trainer, prompts)` for the
policy's samples. `ptxbench_rollout` is the part that does not depend on TRL: it takes any `generate` callable.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from ptxcore.gym.http import EnvClient

ENV_URL = "http://127.0.0.1:8790"
POLICY = "grpo/qwen3-8b-step"  # recorded as the turns' model: change it per checkpoint


def ptxbench_rollout(problems: Sequence[str], generate: Callable[[list[list[dict]]], list[dict[str, Any]]],
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
    return {"prompt_ids": [s["prompt_ids"] for s in samples], "completion_ids": [s["completion_ids"] for s in samples],
            "logprobs": [s["logprobs"] for s in samples], "env_reward": rewards, "env_status": statuses}


def rollout_func(prompts: list[str], trainer: Any) -> dict[str, list]:
    """TRL's hook: the prompts are problem names; the policy samples through TRL's vLLM helper."""
    from trl.experimental.openenv import generate_rollout_completions  # TRL with its OpenEnv extra

    def generate(messages: list[list[dict]]) -> list[dict[str, Any]]:
        tokenizer = trainer.processing_class
        texts = [tokenizer.apply_chat_template(m, tokenize=False, add_generation_prompt=True) for m in messages]
        return generate_rollout_completions(trainer, texts)

    with EnvClient(ENV_URL) as client:
        return ptxbench_rollout(prompts, generate, client)


def env_reward(completions: list[Any], env_reward: list[float], **_: Any) -> list[float]:
    """The reward function TRL calls with the rollout's extra fields."""
    return list(env_reward)


# trainer = GRPOTrainer(model=..., reward_funcs=[env_reward], train_dataset=problems_dataset,
#                       args=GRPOConfig(use_vllm=True, vllm_mode="colocate", ...), rollout_func=rollout_func)
