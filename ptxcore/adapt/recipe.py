"""Recipe files (campaigns/adapt/*.yaml): one build of SFT data, from selection to Parquet.

A recipe names its template (fixit | kernelgen), the selection, the repair teacher (Fixit), which correct
versions become pairs, the reasoning synthesizer, the export budget and tokenizer, and the training
configuration exported beside the data (training itself runs elsewhere). Errors name the file, the line
and the key, as campaign files do.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Literal

from pydantic import Field, model_validator

from ptxcore.agent.campaign import ConcurrencySpec, ModelSpec
from ptxcore.agent.types import MAX_MODEL_CALLS, ContextPolicy
from ptxcore.agent.yamlfile import YamlModelError, parse_yaml_model
from ptxcore.schema import FrozenModel, text_sha256

from .errors import AdaptError
from .spec import SelectionSpec, TargetCredit, Template

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]*$")
STEPS = ("select", "repair", "pairs", "reason", "export")
"""The build's steps, in order; each can run alone."""


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


class SynthesizerSpec(FrozenModel):
    """The reasoning synthesizer and its acceptance rules."""

    model: ModelSpec
    """litellm model (GLM-5.2, or the adapted model itself for s6), or replay/<library>."""
    min_reasoning_chars: int = Field(default=200, ge=1)
    """Shorter monologues are rejected."""
    max_reasoning_chars: int = Field(default=190_000, ge=1)
    """Longer monologues are rejected."""
    max_attempts: int = Field(default=1, ge=1, le=5)
    """Synthesis calls per pair while none is accepted (a failed call is not an attempt)."""
    resynthesize_over_budget: bool = True
    """Rewrite an accepted monologue whose row exceeds the export's token budget."""
    safety_tokens: int = Field(default=1024, ge=0)
    """Head-room kept below the budget when asking for a rewrite."""
    min_target_ratio: float = Field(default=0.95, gt=0, le=1)
    """A rewrite is asked for between this fraction and all of the room left."""


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
    export: ExportSpec = Field(default_factory=ExportSpec)
    """Parquet export."""
    training: TrainingSpec = Field(default_factory=TrainingSpec)
    """Training configuration written beside the data."""

    @model_validator(mode="after")
    def _consistent(self) -> Recipe:
        if not _ID.match(self.name):
            raise ValueError("name: use letters, digits, '_', '-', '.' (starting with a letter or digit)")
        if self.template is Template.FIXIT and self.teacher is None:
            raise ValueError("a fixit recipe needs a `teacher`")
        if self.template is Template.KERNELGEN and self.teacher is not None:
            raise ValueError("a kernelgen recipe has no repair step: remove `teacher`")
        if self.synthesizer.min_reasoning_chars > self.synthesizer.max_reasoning_chars:
            raise ValueError("synthesizer: min_reasoning_chars exceeds max_reasoning_chars")
        return self

    @property
    def source_label(self) -> str:
        return self.export.source_label or self.name

    def steps(self) -> tuple[str, ...]:
        """Steps that apply to this template."""
        return tuple(s for s in STEPS if not (s == "repair" and self.template is Template.KERNELGEN))


def parse_recipe(text: str, where: str = "<recipe>") -> Recipe:
    try:
        return parse_yaml_model(text, Recipe, where=where)
    except YamlModelError as exc:
        raise AdaptError(str(exc)) from exc


def load_recipe(path: Path | str) -> tuple[Recipe, str]:
    """The validated recipe and the file's text (recorded with the build)."""
    path = Path(path)
    if not path.is_file():
        raise AdaptError(f"no such recipe file: {path}")
    text = path.read_text()
    return parse_recipe(text, where=str(path)), text


def recipe_sha256(text: str) -> str:
    return text_sha256(text)
