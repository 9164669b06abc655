"""Repair campaigns: one teacher trajectory per selected failure, planned for the campaign machinery.

The teacher gets the failing trajectory's system prompt (same knowledge-pack variant) and a first user
message holding the task (the source's first user message: the definition and the answer format), the
wrong kernel, the error message it earned (the feedback of that turn), and the request to fix it with the
minimal change. Trajectories run through the ordinary campaign flow: fan-out, resume, tag limits, judge.
"""

from __future__ import annotations

import functools
from collections import defaultdict
from collections.abc import Sequence

import yaml
from pydantic import Field

from ptxcore.agent import AgentConfig, CampaignConfig, TrajectoryPlan
from ptxcore.agent.feedback import clean_log
from ptxcore.schema import FrozenModel, Language, TurnRecord

from .errors import AdaptError
from .models import RepairRecord, SelectionRecord
from .recipe import TeacherSpec


class SourcePrompt(FrozenModel):
    """System and first user message of a trajectory, rebuilt from its variant and problem."""

    system: str
    """System message."""
    user: str
    """First user message."""
    sha256: str = Field(min_length=64, max_length=64)
    """sha256 of system + NUL + user (what turn records store)."""


@functools.lru_cache(maxsize=128)
def source_prompt(variant: str, problem: str) -> SourcePrompt:
    """The prompts package's assembly (deterministic: equal to what the source campaign sent)."""
    from ptxcore.problems import get_problem
    from ptxcore.prompts import assemble_prompt, load_variant

    p = assemble_prompt(load_variant(variant), get_problem(problem))
    return SourcePrompt(system=p.system, user=p.user, sha256=p.sha256)


def checked_source_prompt(record: SelectionRecord | TurnRecord) -> SourcePrompt:
    """The source prompt, verified against the hash recorded with the turn."""
    prompt = source_prompt(record.prompt_variant, record.problem)
    if record.prompt_sha256 and prompt.sha256 != record.prompt_sha256:
        raise AdaptError(f"{record.prompt_variant} / {record.problem}: the assembled prompt no longer matches the "
                         "one the source campaign sent (knowledge pack edited since?)")
    return prompt


def repair_user_message(task: str, wrong_kernel: str, error_message: str) -> str:
    """The teacher's first message: task, wrong kernel, its error, and the minimal-change request."""
    return (
        f"Task:\n{task.rstrip()}\n\n"
        f"Kernel:\n\n```cpp\n{wrong_kernel.rstrip()}\n```\n\n"
        f"Error message:\n\n{error_message.rstrip()}\n\n"
        "Fix this CUDA kernel with the minimal change, so that it implements the definition's PyTorch "
        "reference correctly. Answer with the complete fixed .cu file in one ```cpp code block.\n"
    )


def repair_prompt(item: SelectionRecord, source: TurnRecord) -> SourcePrompt:
    """System = the source variant's system prompt; user = repair_user_message."""
    from ptxcore.prompts import prompt_sha256

    if source.kernel_text is None:
        raise AdaptError(f"{item.item_id}: the selected turn has no kernel")
    base = checked_source_prompt(item)
    user = repair_user_message(base.user, source.kernel_text, clean_log(source.feedback))
    return SourcePrompt(system=base.system, user=user, sha256=prompt_sha256(base.system, user))


def repair_campaign_id(build_id: str) -> str:
    return f"{build_id}-repair"


def repair_config(build_id: str, teacher: TeacherSpec, items: Sequence[SelectionRecord],
                  warehouse: str) -> tuple[CampaignConfig, str]:
    """The repair campaign as a campaign config, and its YAML text (recorded like a campaign file)."""
    config = CampaignConfig(
        name=repair_campaign_id(build_id), description=f"repair trajectories of adapt build {build_id}",
        models=[teacher.model], architectures=sorted({i.arch for i in items}),
        problems=sorted({i.problem for i in items}), prompt_variants=sorted({i.prompt_variant for i in items}),
        trajectories=1, turns=teacher.turns, target_speedup=teacher.target_speedup,
        context_policy=teacher.context_policy, concurrency=teacher.concurrency, profilers=teacher.profilers,
        warehouse=warehouse, recorded_verdicts=teacher.recorded_verdicts)
    text = yaml.safe_dump(config.model_dump(mode="json", exclude_defaults=True), sort_keys=True)
    return config, text


def plan_repairs(build_id: str, teacher: TeacherSpec, items: Sequence[SelectionRecord], sources: dict[str, TurnRecord],
                 config: CampaignConfig) -> tuple[list[TrajectoryPlan], dict[str, SourcePrompt], list[RepairRecord]]:
    """One plan per selected item (trajectory id ends in fix-<item id>), its prompt, and its record."""
    agent = AgentConfig(max_turns=teacher.turns, target_speedup=teacher.target_speedup,
                        context_policy=teacher.context_policy, language=Language.CUDA,
                        reserve_output_tokens=teacher.model.reserve_output_tokens)
    cells: dict[tuple[str, str, str], list[SelectionRecord]] = defaultdict(list)
    for item in sorted(items, key=lambda i: i.item_id):
        cells[(item.arch, item.prompt_variant, item.problem)].append(item)
    plans, prompts, records = [], {}, []
    for (arch, variant, problem), members in sorted(cells.items()):
        for index, item in enumerate(members):
            tid = f"{teacher.model.name}/{arch}/{variant}/{problem}/fix-{item.item_id}"
            plans.append(TrajectoryPlan(campaign_id=config.id, trajectory_id=tid, model=teacher.model, arch=arch,
                                        prompt_variant=variant, problem=problem, index=index,
                                        language=Language.CUDA, agent=agent))
            prompts[tid] = repair_prompt(item, sources[item.item_id])
            records.append(RepairRecord(build_id=build_id, item_id=item.item_id, repair_campaign_id=config.id,
                                        repair_trajectory_id=tid, prompt_sha256=prompts[tid].sha256))
    return plans, prompts, records
