"""Process-local state of a running campaign, looked up by key from tasks and subflows.

Flow parameters go to the Prefect API as JSON, so subflows receive a plan (a pydantic model) and this
key rather than live objects such as the writer or the model clients.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ptxcore.agent import CampaignConfig, TrajectoryPlan
from ptxcore.agent.types import FeedbackAugmenter, LLMClient
from ptxcore.schema import TrajectoryRecord, TurnRecord
from tasks.judge import JudgeBackend

from .writer import RecordWriter


@dataclass(frozen=True)
class Prompt:
    """The assembled messages of one (variant, problem)."""

    system: str
    user: str
    sha256: str


PromptBuilder = Callable[[TrajectoryPlan], Prompt]


def assembled_prompt(plan: TrajectoryPlan) -> Prompt:
    """The prompts package's assembly for the plan's variant and problem (cached)."""
    return _assembled(plan.prompt_variant, plan.problem)


@functools.lru_cache(maxsize=256)
def _assembled(variant: str, problem: str) -> Prompt:
    from ptxcore.problems import get_problem
    from ptxcore.prompts import assemble_prompt, load_variant

    p = assemble_prompt(load_variant(variant), get_problem(problem))
    return Prompt(system=p.system, user=p.user, sha256=p.sha256)


@dataclass
class CampaignRuntime:
    """Everything a trajectory of the campaign needs that is not a plain value."""

    config: CampaignConfig
    writer: RecordWriter
    clients: dict[str, LLMClient]
    """Model clients by model name (label)."""
    judges: dict[str, JudgeBackend]
    """Judge backends by architecture key."""
    recorded: dict[str, list[TurnRecord]] = field(default_factory=dict)
    """Turns recorded before this run, by trajectory id (resume)."""
    trajectories: dict[str, TrajectoryRecord] = field(default_factory=dict)
    """Trajectory records written before this run, by trajectory id."""
    prompt_builder: PromptBuilder = assembled_prompt
    """How a plan's system and user messages are built."""
    augmenter: FeedbackAugmenter | None = None
    """Repair retrieval added to failing turns' feedback (the campaign's `repair_retrieval`), if any."""


_RUNTIMES: dict[str, CampaignRuntime] = {}
_LOCK = threading.Lock()


def register_runtime(key: str, runtime: CampaignRuntime) -> None:
    with _LOCK:
        if key in _RUNTIMES:
            raise RuntimeError(f"campaign {key!r} is already running in this process")
        _RUNTIMES[key] = runtime


def unregister_runtime(key: str) -> None:
    with _LOCK:
        _RUNTIMES.pop(key, None)


def get_runtime(key: str) -> CampaignRuntime:
    with _LOCK:
        if key not in _RUNTIMES:
            raise RuntimeError(f"campaign {key!r} is not running in this process")
        return _RUNTIMES[key]
