"""The TRL GRPO example (docs/examples/trl_grpo_rollout.py) against a live TRL: one GRPOTrainer step whose
rollout goes through the environment's HTTP front (fake judge, no GPU) and whose reward is the environment's.
Test-only pieces: a randomly initialised tiny model and a byte-level BPE tokenizer trained here."""

from __future__ import annotations

import pytest

from ptxcore.gym.http import EnvClient

from .test_http import _example, server  # noqa: F401 - the HTTP front with a fake judge (fixture)

trl = pytest.importorskip("trl", reason="trl is not installed (the dev extra installs it)")
transformers = pytest.importorskip("transformers")

CHAT = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


def _tokenizer():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["__global__ void kernel() {}", "system user assistant gemm"], trainer=trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = CHAT
    return fast


def test_a_grpo_step_with_the_example_rollout_trains_on_the_environments_reward(server, tmp_path,  # noqa: F811
                                                                                  monkeypatch):
    import torch
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WANDB_DISABLED", "true")
    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")
    example = _example("trl_grpo_rollout")
    tokenizer = _tokenizer()
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                      max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id)
    model = transformers.Qwen2ForCausalLM(config)
    seen: list[dict] = []

    def env_reward(completions, env_reward, env_status, **kw):
        seen.append({"rewards": list(env_reward), "statuses": list(env_status), "n": len(completions)})
        return example.env_reward(completions, env_reward)

    args = GRPOConfig(output_dir=str(tmp_path / "run"), max_steps=1, per_device_train_batch_size=2, num_generations=2,
                      max_completion_length=8, use_cpu=True, report_to=[], save_strategy="no", logging_steps=1,
                      dataloader_num_workers=0, beta=0.0)
    rollout = example.make_rollout_func(server.url, policy_model="grpo/test", max_new_tokens=8, max_prompt_tokens=64)
    trainer = GRPOTrainer(model=model, reward_funcs=[env_reward], args=args, processing_class=tokenizer,
                          train_dataset=Dataset.from_dict({"prompt": ["gemm_n7168_k5120"] * 2}), rollout_func=rollout)
    trainer.train()
    # TRL asked for one completion per (repeated) prompt; each was stepped in its own environment and recorded
    assert seen and seen[0]["n"] == 2 and len(seen[0]["rewards"]) == 2
    turns = server.recorder.turns
    assert len(turns) == 2 and {t.model for t in turns} == {"grpo/test"} and server.hub.count() == 0
    logged = next(h for h in trainer.state.log_history if "reward" in h)
    assert logged["reward"] == pytest.approx(sum(seen[0]["rewards"]) / 2)
    with EnvClient(server.url) as client:  # the example's own rollout core, unchanged by the trainer
        out = example.ptxbench_rollout(["gemm_n7168_k5120"], lambda m: [{"text": "no kernel", "prompt_ids": [1],
                                       "completion_ids": [2], "logprobs": None}], client)
    assert out["logprobs"] is None and out["env_status"] == [seen[0]["statuses"][0]]
