"""Records of every stage (each one becomes a warehouse row) and the SFT row itself.

Lineage: an SFT row names its pair; a pair names the source turn (campaign, trajectory, turn) and the
repair turn, their kernel hashes and verdict ids (sha256 of the judge envelope); a reasoning attempt
names its pair, its model and the sha256 of the prompt it was sent (the prompt text is stored by hash).
"""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator, model_validator

from ptxcore.schema import FrozenModel, StopReason
from ptxcore.schema.migrate import empty_to_none

from .spec import Template


class SelectionOutcome(StrEnum):
    """Why a source turn was kept or left out (the first rule it failed)."""

    SELECTED = "selected"
    WRONG_MODEL = "wrong_model"
    OUT_OF_SCOPE = "out_of_scope"
    WRONG_VARIANT = "wrong_variant"
    OUTSIDE_TURN_WINDOW = "outside_turn_window"
    NOT_A_FAILURE = "not_a_failure"
    NOT_CORRECT = "not_correct"
    TARGET_NOT_EXECUTED = "target_not_executed"
    TARGET_NOT_CARRIED = "target_not_carried"
    """Correct, but the target path did not (provably, or not known to) carry the work (target_credit: work)."""
    BELOW_MIN_SPEEDUP = "below_min_speedup"
    NO_KERNEL = "no_kernel"
    NO_CLOSED_FENCE = "no_closed_fence"
    CAPPED = "capped"


class PairStatus(StrEnum):
    """Whether a correct turn became a training pair."""

    KEPT = "kept"
    TARGET_NOT_EXECUTED = "target_not_executed"
    TARGET_NOT_CARRIED = "target_not_carried"
    """Correct, but its target path did not carry the work (PairSpec.target_credit: work)."""
    BELOW_MIN_SPEEDUP = "below_min_speedup"
    NOT_CHOSEN = "not_chosen"
    CAPPED = "capped"


class ReasoningStatus(StrEnum):
    """Verdict on one synthesizer answer."""

    ACCEPTED = "accepted"
    TOO_SHORT = "too_short"
    TOO_LONG = "too_long"
    FORBIDDEN_TOKEN = "forbidden_token"
    MENTIONS_SOLUTION = "mentions_solution"
    COPIES_SOLUTION = "copies_solution"
    OVER_BUDGET = "over_budget"
    CALL_FAILED = "call_failed"


class ReasoningKind(StrEnum):
    """First synthesis, or a rewrite of an accepted monologue whose row exceeded the token budget."""

    SYNTHESIS = "synthesis"
    RESYNTHESIS = "resynthesis"


class RowStatus(StrEnum):
    """Whether a built row is in the Parquet."""

    KEPT = "kept"
    OVER_BUDGET = "over_budget"


class TurnRef(FrozenModel):
    """A warehouse turn and what identifies its content and verdict."""

    campaign_id: str
    """Campaign."""
    trajectory_id: str
    """Trajectory."""
    turn: int = Field(ge=0)
    """0-based turn."""
    model: str = ""
    """litellm model string that answered."""
    kernel_sha256: str | None = None
    """sha256 of the extracted kernel (key of the `kernels` table)."""
    verdict_sha256: str | None = None
    """sha256 of the judge envelope (None when no judge ran)."""
    status: str = ""
    """The turn's status."""
    gpu: str | None = None
    """GPU that judged it (None when no GPU judged it)."""


class SelectionRecord(FrozenModel):
    """One source turn the selection looked at."""

    build_id: str
    """Build."""
    item_id: str
    """Stable short id of the turn within the build (sha256 of its key, 16 hex digits)."""
    source: TurnRef
    """The turn."""
    arch: str
    """Architecture key."""
    prompt_variant: str
    """Prompt variant."""
    problem: str
    """Definition name."""
    prompt_sha256: str
    """The source trajectory's prompt hash (system + first user)."""
    stratum: str
    """Its stratum, e.g. `COMPILE_ERROR|t2`."""
    outcome: SelectionOutcome
    """Kept, or the first rule that left it out."""
    rank: int | None = None
    """Position inside its stratum's order (None when it never reached the cap)."""


class RepairRecord(FrozenModel):
    """One repair trajectory for one selected failure."""

    build_id: str
    """Build."""
    item_id: str
    """Selection item it repairs."""
    repair_campaign_id: str
    """The build's repair campaign."""
    repair_trajectory_id: str
    """The trajectory in it."""
    prompt_sha256: str
    """Hash of the repair prompt (system + first user)."""
    stop_reason: StopReason | None = None
    """Why it ended (None until it ran; rows written before the enum stored "" for that)."""
    num_turns: int = 0
    """Turns recorded."""

    _not_run = field_validator("stop_reason", mode="before")(empty_to_none)


class PairRecord(FrozenModel):
    """A training pair: the wrong turn and one correct version (Fixit), or one correct turn (KernelGen)."""

    build_id: str
    """Build."""
    pair_id: str
    """Stable id (sha256 of the two turn keys, 16 hex digits)."""
    template: Template
    """Fixit or KernelGen."""
    item_id: str
    """Selection item."""
    problem: str
    """Definition name."""
    arch: str
    """Architecture key."""
    prompt_variant: str
    """Source prompt variant."""
    error_type: str
    """The wrong turn's status (Fixit) or PASSED (KernelGen)."""
    source: TurnRef
    """The wrong turn (Fixit) or the correct turn (KernelGen)."""
    correct: TurnRef
    """The correct turn (the repair turn for Fixit)."""
    speedup: float | None = None
    """The correct turn's speedup."""
    target_instruction: str
    """The correct turn's target-instruction verdict."""
    status: PairStatus
    """Kept or why not."""


class ReasoningRecord(FrozenModel):
    """One synthesizer call and its verdict."""

    build_id: str
    """Build."""
    pair_id: str
    """Pair."""
    attempt: int = Field(ge=0)
    """0-based attempt number for this pair (synthesis and resynthesis together)."""
    kind: ReasoningKind
    """Synthesis or resynthesis."""
    model: str
    """Synthesizer's litellm model string."""
    prompt_sha256: str
    """sha256 of the request (system + user text; the text is stored by this hash)."""
    response_text: str = ""
    """The raw answer."""
    reasoning: str = ""
    """The extracted monologue."""
    status: ReasoningStatus
    """Verdict."""
    detail: str = ""
    """One line on a rejection."""
    prompt_tokens: int = 0
    """Request tokens (provider's count)."""
    completion_tokens: int = 0
    """Answer tokens."""
    latency_s: float = 0.0
    """Wall time of the call."""
    cost_usd: float | None = None
    """Cost when known."""
    target_max_chars: int | None = None
    """Resynthesis: the length asked for."""
    created_at: str = ""
    """ISO-8601 time."""


class SftMessage(FrozenModel):
    """One chat message of a training row."""

    role: Literal["system", "user", "assistant"]
    """Chat role."""
    content: str
    """Text."""
    step_loss_mask: int = Field(ge=0, le=1)
    """1: the trainer's loss covers this message."""


FIXIT_ROLES = ("system", "user", "assistant", "user", "assistant")
KERNELGEN_ROLES = ("system", "user", "assistant")


class SftRow(FrozenModel):
    """One training example as the Parquet holds it (metadata is a flat mapping, see rows.METADATA_FIELDS)."""

    id: str = Field(min_length=1)
    """Row id."""
    template: Template
    """Layout of `messages`."""
    messages: list[SftMessage]
    """The conversation; loss only on the last message."""
    metadata: dict[str, str | int | float | bool | None]
    """Provenance and sha256 of every part."""

    @model_validator(mode="after")
    def _layout(self) -> SftRow:
        roles = FIXIT_ROLES if self.template is Template.FIXIT else KERNELGEN_ROLES
        if tuple(m.role for m in self.messages) != roles:
            raise ValueError(f"{self.template.value} rows have roles {roles}")
        if [m.step_loss_mask for m in self.messages] != [0] * (len(roles) - 1) + [1]:
            raise ValueError("loss only on the last assistant message")
        return self
