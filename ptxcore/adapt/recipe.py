"""Recipe files (campaigns/adapt/*.yaml): one build of SFT data, from selection to Parquet.

A recipe names its template (fixit | kernelgen), the selection, the repair teacher (Fixit), which correct
versions become pairs, the reasoning synthesizer, the export budget and tokenizer, and the training
configuration exported beside the data (training itself runs elsewhere). Errors name the file, the line
and the key, as campaign files do.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import Field, StringConstraints, field_validator, model_validator

from ptxcore.agent.campaign import ConcurrencySpec, ModelSpec
from ptxcore.agent.types import MAX_MODEL_CALLS, ContextPolicy
from ptxcore.agent.yamlfile import YamlModelError, parse_yaml_model, read_yaml_text
from ptxcore.schema import FrozenModel, text_sha256

from .errors import AdaptError
from .spec import SelectionSpec, TargetCredit, Template

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,99}")
"""A recipe name is the default build id (a warehouse key and a folder name): checked with fullmatch."""
STEPS = ("select", "repair", "pairs", "notes", "reason", "export")
"""The build's steps, in order; each can run alone (`notes` only in a Fixit recipe with a `notes` section)."""


class TeacherSpec(FrozenModel):
    """The repair teacher: one trajectory per selected failure, through the campaign machinery."""

    model: ModelSpec
    """litellm model (Gemini 3.1 Pro in the paper), or replay/<library>."""
    turns: int = Field(default=5, ge=1, le=MAX_MODEL_CALLS)
    """Model calls per repair trajectory."""
    target_speedup: float = Field(default=0.15, gt=0)
    """Stop a repair once a correct version reaches this speedup."""
    context_policy: ContextPolicy = ContextPolicy.FULL
    """What the teacher sees of its earlier turns."""
    concurrency: ConcurrencySpec = Field(default_factory=ConcurrencySpec)
    """Trajectories in flight, parallel builds, judge slots per architecture."""
    profilers: dict[str, str] = Field(default_factory=dict)
    """Per architecture: profiling-service URL or `prefect` (as in campaign files)."""
    recorded_verdicts: str | None = None
    """A recorded-verdict folder (as a campaign file's `recorded_verdicts`, relative to the recipe file): where no GPU
    judges, a repair kernel recorded there gets that verdict, marked recorded; any other is NOT_EVALUATED."""


class NotesSpec(FrozenModel):
    """Repair-notes distillation (paper Table 4): the build's (wrong, fixed) pairs -> a notes corpus a campaign
    retrieves from (`repair_retrieval: {notes: "warehouse:<collection>"}`)."""

    teacher: ModelSpec
    """litellm model that writes the notes (GLM-5.2 in the authors' collect_kernel_fix_notes.py), or replay/<library>."""
    collection: str = Field(default="", pattern=r"^$|^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
    """Warehouse collection id (default `<build id>-notes`)."""


class PairSpec(FrozenModel):
    """Which correct versions become pairs (the reference collected every one)."""

    correct_versions: Literal["all", "best", "latest"] = "all"
    """Every correct version of a repair, the fastest, or the last."""
    min_speedup: float = Field(default=0.0, ge=0.0)
    """Keep a correct version only with at least this speedup."""
    require_target_executed: bool = True
    """Keep only versions that earn the target credit (dynamic evidence), under `target_credit`."""
    target_credit: TargetCredit = TargetCredit.WORK
    """Which credit: `work` (the target path carried the problem's work; issue 25) or `executed` (the paper's: a
    target instruction ran)."""


# The authors' acceptance rules (github.com/zhang677/PTXBench at 491860bd3e587eda230ab426b086f31b2da4aa12):
# Fixit: packages/mini-ptx-agent/fib_runtime/multiturn/construct_eval_scripts/fixit_downstream_process.py,
#   --min-reasoning-chars 2000, --max-reasoning-chars 190000, --max-passes 20 (synthesis passes over the pairs
#   still without a monologue); its prompt v1_trajectory_adopted (fix_kernels/synthesize_pair_reasoning_openrouter.py)
#   targets 40,000 characters.
# KernelGen: experiments/kernelgen/synthesize-full.yaml, min_reasoning_chars 200, max_reasoning_chars 190000, one pass
#   (task_to_correct_kernels/synthesize_correct_kernel_reasoning_openrouter.py; its prompt also targets 40,000).
MIN_REASONING_CHARS = {Template.FIXIT: 2_000, Template.KERNELGEN: 200}
"""Shortest accepted monologue per template (the authors' configs, above)."""
MAX_REASONING_CHARS = 190_000
"""Longest accepted monologue (both templates)."""
SYNTHESIS_ATTEMPTS = {Template.FIXIT: 20, Template.KERNELGEN: 1}
"""Synthesis calls per pair while none is usable: the authors' Fixit passes (20) and KernelGen's single pass."""
TARGET_REASONING_CHARS = 40_000
"""The length the request asks for (both of the authors' prompts)."""


class SynthesizerSpec(FrozenModel):
    """The reasoning synthesizer and its acceptance rules (None: the template's rule, from the authors' configs)."""

    model: ModelSpec
    """litellm model (GLM-5.2, or the adapted model itself for s6), or replay/<library>."""
    min_reasoning_chars: int | None = Field(default=None, ge=1)
    """Shorter monologues are rejected (None: 2,000 for Fixit, 200 for KernelGen)."""
    max_reasoning_chars: int = Field(default=MAX_REASONING_CHARS, ge=1)
    """Longer monologues are rejected."""
    target_reasoning_chars: int = Field(default=TARGET_REASONING_CHARS, ge=1)
    """Length the request asks for (the monologue is told not to mention it)."""
    max_attempts: int | None = Field(default=None, ge=1, le=50)
    """Synthesis calls per pair while none is usable (None: 20 for Fixit, 1 for KernelGen; a failed call is no
    attempt)."""
    resynthesize_over_budget: bool = True
    """Rewrite a monologue whose row exceeds the export's token budget, or that holds a forbidden delimiter."""
    safety_tokens: int = Field(default=1024, ge=0)
    """Head-room kept below the budget when asking for a rewrite."""
    min_target_ratio: float = Field(default=0.95, gt=0, le=1)
    """A rewrite is asked for between this fraction and all of the room left."""

    def min_chars(self, template: Template) -> int:
        """The shortest accepted monologue for `template`."""
        return self.min_reasoning_chars if self.min_reasoning_chars is not None else MIN_REASONING_CHARS[template]

    def attempts(self, template: Template) -> int:
        """Synthesis calls per pair for `template`."""
        return self.max_attempts if self.max_attempts is not None else SYNTHESIS_ATTEMPTS[template]


class ExportSpec(FrozenModel):
    """The Parquet and its token budget."""

    max_tokens: int = Field(default=65_536, gt=0)
    """Rows whose ChatML rendering exceeds this many tokens are dropped (and listed in the manifest)."""
    tokenizer: str = "auto:Qwen/Qwen3.6-27B"
    """`auto:REPO|PATH` (a local Hugging Face tokenizer if present, else tiktoken), `hf:PATH`, `tiktoken:ENC`."""
    source_label: str = ""
    """Label in row ids and metadata (default: the recipe name)."""
    shuffle_seed: int | None = None
    """Shuffle rows with this seed (None: rows in id order)."""


class TrainingSpec(FrozenModel):
    """The paper's training configuration, exported beside the data for an external trainer."""

    base_model: str = "Qwen/Qwen3.6-27B"
    """Model fine-tuned."""
    method: Literal["lora"] = "lora"
    """Adapter training."""
    lora_rank: int = Field(default=32, ge=1)
    """LoRA rank."""
    learning_rate: float = Field(default=4.65e-4, gt=0)
    """Peak learning rate."""
    lr_schedule: Literal["linear", "constant", "cosine"] = "linear"
    """Schedule."""
    num_epochs: int = Field(default=5, ge=1)
    """Epochs."""
    batch_size: int = Field(default=2, ge=1)
    """Examples per step."""
    train_on: Literal["last_assistant_message", "all_assistant_messages"] = "last_assistant_message"
    """Which messages carry loss (the rows' step_loss_mask says the same)."""
    max_length_tokens: int = Field(default=65_536, gt=0)
    """Examples longer than this are dropped, never truncated."""
    renderer: str = "qwen3_5"
    """Chat renderer of the reference trainer."""
    shuffle_seed: int = 0
    """Trainer's shuffle seed."""
    optimizer: Literal["adam"] = "adam"
    """Optimizer (the paper: Adam)."""
    adam_beta1: float = Field(default=0.9, gt=0, lt=1)
    """Adam beta1 (the paper's setting)."""
    adam_beta2: float = Field(default=0.95, gt=0, lt=1)
    """Adam beta2 (the paper's setting)."""
    adam_eps: float = Field(default=1e-8, gt=0)
    """Adam epsilon (the paper's setting; the authors' training script passes none, so Tinker's default applied)."""
    save_every_steps: int = Field(default=50, ge=1)
    """Checkpoint interval in optimizer steps (the authors' fixit_downstream_process.py: save_every=50)."""


class Recipe(FrozenModel):
    """One recipe file."""

    name: str = Field(min_length=1)
    """Recipe name; also the build id unless overridden."""
    description: str = ""
    """Free text."""
    config_label: str = ""
    """Table 10's configuration name, e.g. 8ops-Pre-balanced."""
    paper_rows: int | None = Field(default=None, ge=0)
    """Rows the paper reports for this recipe (for comparison in reports)."""
    reproduces: str = Field(default="", max_length=1000)
    """Which paper configuration this recipe reproduces (Table 10 row, the authors' pipeline stages), one line."""
    our_inference: list[Annotated[str, StringConstraints(min_length=1, max_length=500)]] = Field(default_factory=list)
    """Rules of this recipe that are our inference rather than the paper's or the authors' code (one line each);
    the manifest and Table 10 carry them."""
    template: Template
    """fixit or kernelgen."""
    warehouse: str | None = None
    """DuckDB file holding the source campaigns (default runs/<first source campaign>/warehouse.duckdb)."""
    selection: SelectionSpec
    """What is mined."""
    teacher: TeacherSpec | None = None
    """Repair teacher (Fixit only)."""
    pairs: PairSpec = Field(default_factory=PairSpec)
    """Which correct versions become pairs."""
    synthesizer: SynthesizerSpec
    """Reasoning synthesizer."""
    notes: NotesSpec | None = None
    """Repair-notes corpus from the build's pairs (Fixit only; None: no notes step)."""
    export: ExportSpec = Field(default_factory=ExportSpec)
    """Parquet export."""
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    """Training configuration written beside the data."""

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not _ID.fullmatch(v):
            raise ValueError("use letters, digits, '_', '-', '.' (at most 100, starting with a letter or digit)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> Recipe:
        if self.template is Template.FIXIT and self.teacher is None:
            raise ValueError("a fixit recipe needs a `teacher`")
        if self.template is Template.KERNELGEN and self.teacher is not None:
            raise ValueError("a kernelgen recipe has no repair step: remove `teacher`")
        if self.template is Template.KERNELGEN and self.notes is not None:
            raise ValueError("a kernelgen recipe has no (wrong, fixed) pairs to distil: remove `notes`")
        if self.synthesizer.min_chars(self.template) > self.synthesizer.max_reasoning_chars:
            raise ValueError("synthesizer: min_reasoning_chars exceeds max_reasoning_chars")
        return self

    @property
    def source_label(self) -> str:
        return self.export.source_label or self.name

    def steps(self) -> tuple[str, ...]:
        """Steps that apply to this recipe."""
        skip = {"repair"} if self.template is Template.KERNELGEN else set()
        return tuple(s for s in STEPS if s not in skip and not (s == "notes" and self.notes is None))


def parse_recipe(text: str, where: str = "<recipe>") -> Recipe:
    try:
        return parse_yaml_model(text, Recipe, where=where)
    except YamlModelError as exc:
        raise AdaptError(str(exc)) from exc


def load_recipe(path: Path | str) -> tuple[Recipe, str]:
    """The validated recipe and the file's text (recorded with the build)."""
    path = Path(path)
    if not path.exists():
        raise AdaptError(f"no such recipe file: {path}")
    try:
        text = read_yaml_text(path)
    except YamlModelError as exc:
        raise AdaptError(str(exc)) from exc
    return parse_recipe(text, where=str(path)), text


def recipe_sha256(text: str) -> str:
    return text_sha256(text)
