"""The prompt-completion export trains as-is with TRL: SFTTrainer on the exported file computes loss on the
supervised (last) message only. Test-only pieces: a randomly initialised tiny model and a byte-level BPE tokenizer
trained here on the rows, with a chat template of the Qwen3 rules (tests/adapt/test_budget.QWEN_STYLE).

The exported rows are about 130,000 characters each (the knowledge pack alone is most of it); the tiny run keeps
each message's structure but cuts its text to a few hundred characters so a 2-core CPU can train a step."""

from __future__ import annotations

import pytest

from .test_budget import QWEN_STYLE
from .test_stages import Counting, built_pairs, synthesize

trl = pytest.importorskip("trl", reason="trl is not installed (the dev extra installs it)")
transformers = pytest.importorskip("transformers")

KEEP = 300  # characters kept per message for the tiny run


def _export(wh, tmp_path):
    from ptxcore.adapt import resolve_counter, run_export

    ctx = built_pairs(wh)
    synthesize(wh, ctx, Counting("replay/adapt-synth-fixit"))
    return run_export(wh, ctx, tmp_path / "out", resolve_counter("tiktoken:o200k_base")[0])


def _tokenizer(texts):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    fast = transformers.PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|im_end|>", pad_token="<|endoftext|>")
    fast.chat_template = QWEN_STYLE
    return fast


def _cut(messages):
    """Each message's text shortened, a <think> block kept intact in shape."""
    out = []
    for m in messages:
        c = m["content"]
        if c.startswith("<think>\n"):
            reasoning, _, rest = c.removeprefix("<think>\n").partition("\n</think>\n\n")
            c = f"<think>\n{reasoning[:KEEP]}\n</think>\n\n{rest[:KEEP]}"
        else:
            c = c[:KEEP]
        out.append({"role": m["role"], "content": c})
    return out


def test_sft_trainer_trains_on_the_completion_only(wh, tmp_path, monkeypatch):
    import torch
    from datasets import load_dataset
    from trl import SFTConfig, SFTTrainer

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("WANDB_DISABLED", "true")
    summary = _export(wh, tmp_path)
    ds = load_dataset("parquet", data_files=summary.prompt_completion, split="train", cache_dir=str(tmp_path / "hf"))
    assert set(ds.column_names) == {"id", "prompt", "completion"}  # as exported: nothing to rename or drop
    tiny = ds.map(lambda r: {"prompt": _cut(r["prompt"]), "completion": _cut(r["completion"])})
    tokenizer = _tokenizer([m["content"] for r in tiny for m in r["prompt"] + r["completion"]])
    torch.manual_seed(0)
    config = transformers.Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                      num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                      max_position_embeddings=4096, pad_token_id=tokenizer.pad_token_id)
    model = transformers.Qwen2ForCausalLM(config)
    args = SFTConfig(output_dir=str(tmp_path / "run"), max_steps=1, per_device_train_batch_size=1, report_to=[],
                     save_strategy="no", logging_steps=1, use_cpu=True, dataloader_num_workers=0, max_length=None,
                     adam_beta1=0.9, adam_beta2=0.95, adam_epsilon=1e-8)
    trainer = SFTTrainer(model=model, args=args, train_dataset=tiny, processing_class=tokenizer)
    assert trainer.completion_only_loss  # TRL chose it from the prompt / completion columns
    for row, example in zip(trainer.train_dataset, tiny, strict=True):
        ids, labels = row["input_ids"], row["labels"]  # TRL's labels: -100 wherever no loss is computed
        mask = [label != -100 for label in labels]
        supervised = tokenizer.decode([t for t, m in zip(ids, mask, strict=True) if m])
        full = tokenizer.apply_chat_template(example["prompt"] + example["completion"], tokenize=False)
        prompt = tokenizer.apply_chat_template(example["prompt"], tokenize=False, add_generation_prompt=True)
        assert full.startswith(prompt) and supervised == full[len(prompt):]  # exactly the last message
        assert supervised.startswith("<think>\n") and "```cpp" in supervised and supervised.endswith("<|im_end|>\n")
        assert 0 < sum(mask) < len(mask)
    result = trainer.train()
    assert result.training_loss > 0 and torch.isfinite(torch.tensor(result.training_loss))
