from __future__ import annotations

import hashlib
import json

import pytest

from ptxcore.problems import get_problem
from ptxcore.prompts import (
    PromptVariant,
    assemble_prompt,
    default_variants,
    load_variant,
    parse_level,
    prompt_sha256,
)
from ptxcore.schema import Language

GEMM = "gemm_n7168_k5120"


def test_same_inputs_give_byte_identical_prompts_and_hash(words):
    variant, problem = load_variant("hopper-guided"), get_problem(GEMM)
    a = assemble_prompt(variant, problem, counter=words)
    b = assemble_prompt(load_variant("hopper-guided"), get_problem(GEMM), counter=words)
    assert a.system == b.system and a.user == b.user and a.sha256 == b.sha256
    expected = hashlib.sha256(a.system.encode() + b"\0" + a.user.encode()).hexdigest()
    assert a.sha256 == expected == prompt_sha256(a.system, a.user)


def test_hash_changes_with_variant_and_problem(words):
    base = assemble_prompt(load_variant("hopper-pack"), get_problem(GEMM), counter=words)
    other_variant = assemble_prompt(load_variant("hopper-guided"), get_problem(GEMM), counter=words)
    other_problem = assemble_prompt(
        load_variant("hopper-pack"), get_problem("mha_with_lse_d128"), counter=words
    )
    assert len({base.sha256, other_variant.sha256, other_problem.sha256}) == 3
    assert base.system == other_problem.system and base.user != other_problem.user


def test_user_message_is_definition_json_without_tags(words):
    problem = get_problem(GEMM)
    prompt = assemble_prompt(load_variant("hopper-pack"), problem, counter=words)
    start, end = prompt.user.index("{"), prompt.user.rindex("}") + 1
    shown = json.loads(prompt.user[start:end])
    assert "tags" not in shown and shown == problem.definition.prompt_json()
    assert prompt.user.rstrip().endswith("```") and "```cpp" in prompt.user


def test_system_message_order_and_target_line(words):
    prompt = assemble_prompt(load_variant("hopper-guided-fa-fwd"), get_problem(GEMM), counter=words)
    s = prompt.system
    marks = [
        "## Reference material",
        "# Hardware parameters",
        "# PTX wrapper functions",
        "# Contract: asynchronous copies",
        "# Expert guidance",
        "FlashAttention-3",
        "# Solution example",
        "axpy_kernel",
        "You are targeting NVIDIA Hopper",
    ]
    positions = [s.index(m) for m in marks]
    assert positions == sorted(positions)
    assert s.rstrip().splitlines()[-1].startswith("You are targeting NVIDIA Hopper")
    assert list(prompt.components) == [
        "instructions",
        "params",
        "templates",
        "contract",
        "guidance",
        "pattern:fa3_forward",
        "example",
        "target",
        "user",
    ]


def test_levels_include_exactly_their_components(words):
    problem = get_problem(GEMM)
    params_only = assemble_prompt(load_variant("hopper-params"), problem, counter=words)
    assert "# Hardware parameters" in params_only.system and "ptx_wgmma.cuh" not in params_only.system
    none = assemble_prompt(load_variant("hopper-none"), problem, counter=words)
    assert "# Hardware parameters" not in none.system and "# Solution example" in none.system
    adhoc = PromptVariant(name="x", arch="blackwell", level=parse_level("templates"))
    assert "ptx_tcgen05.cuh" in assemble_prompt(adhoc, problem, counter=words).system


def test_triton_prompt_asks_for_python(words):
    prompt = assemble_prompt(load_variant("triton-hopper"), get_problem(GEMM), counter=words)
    assert prompt.language is Language.TRITON
    assert "```python" in prompt.user and "kernel.py" in prompt.system and "TVM_FFI" not in prompt.system


@pytest.mark.parametrize("arch", ["hopper", "blackwell"])
def test_full_level_token_counts_fall_in_20k_to_32k(arch):
    """The acceptance bound of issue 5, with the real offline tokenizer (tiktoken o200k_base)."""
    for name in default_variants(arch, "cuda"):
        prompt = assemble_prompt(load_variant(name), get_problem(GEMM))
        pack = sum(prompt.components[c] for c in ("params", "templates", "contract"))
        assert 20_000 <= pack <= 32_000, (name, pack)
        assert 20_000 <= prompt.system_tokens <= 32_000, (name, prompt.system_tokens)
        assert prompt.tokenizer == "tiktoken:o200k_base"
