"""Expand a campaign into trajectories: model x architecture x prompt variant x trajectory x problem."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import Field

from ptxcore.schema import CampaignLanguage, FrozenModel, StopReason, TrajectoryRecord

from .campaign import MAX_TRAJECTORIES, CampaignConfig, CampaignConfigError, ModelSpec
from .types import AgentConfig, CallContext, ContextPolicy

VariantArch = Callable[[str], str]
"""Variant name -> the architecture key it is written for (raises for an unknown name)."""
DefaultVariants = Callable[[str, str], list[str]]
"""(architecture key, language) -> the default variant names."""


class TrajectoryPlan(FrozenModel):
    """One trajectory to run."""

    campaign_id: str
    """Parent campaign."""
    trajectory_id: str
    """`<model>/<arch>/<variant>/<problem>/<index>`, unique within the campaign."""
    model: ModelSpec
    """Model under test."""
    arch: str
    """Architecture key."""
    prompt_variant: str
    """Prompt variant name."""
    problem: str
    """Definition name."""
    index: int = Field(ge=0)
    """Trajectory number within its (model, arch, variant, problem) cell."""
    language: CampaignLanguage
    """Solution language."""
    agent: AgentConfig
    """Turn budget, target speedup, context policy."""

    @property
    def label(self) -> str:
        """Human name for run names: model / arch / variant / problem / #index."""
        return f"{self.model.name} / {self.arch} / {self.prompt_variant} / {self.problem} / #{self.index}"

    def call_context(self, turn: int = 0) -> CallContext:
        return CallContext(problem=self.problem, arch=self.arch, prompt_variant=self.prompt_variant,
                           trajectory_index=self.index, turn=turn)

    def record(self, **updates: object) -> TrajectoryRecord:
        base = TrajectoryRecord(
            campaign_id=self.campaign_id, trajectory_id=self.trajectory_id, model=self.model.model,
            arch=self.arch, prompt_variant=self.prompt_variant, problem=self.problem,
            language=self.language.value, index=self.index, max_turns=self.agent.max_turns,
            stop_reason=StopReason.RUNNING,
        )
        return base.model_copy(update=updates) if updates else base


def _prompts_variant_arch(name: str) -> str:
    from ptxcore.prompts import load_variant

    return load_variant(name).arch


def _prompts_defaults(arch: str, language: str) -> list[str]:
    from ptxcore.prompts import default_variants

    return default_variants(arch, language)


def variants_by_arch(
    config: CampaignConfig, variant_arch: VariantArch | None = None, defaults: DefaultVariants | None = None
) -> dict[str, list[str]]:
    """Per architecture of the campaign, the variants to run (a variant belongs to one architecture)."""
    variant_arch = variant_arch or _prompts_variant_arch
    defaults = defaults or _prompts_defaults
    out: dict[str, list[str]] = {}
    if config.prompt_variants is None:
        return {arch: list(defaults(arch, config.language.value)) for arch in config.architectures}
    owners = {}
    for name in config.prompt_variants:
        try:
            owners[name] = variant_arch(name)
        except (KeyError, ValueError) as exc:
            raise CampaignConfigError(f"prompt_variants: {str(exc).strip(chr(39))}") from exc
        if owners[name] not in config.architectures:
            raise CampaignConfigError(
                f"prompt_variants: {name} is written for {owners[name]}, which the campaign does not run"
            )
    for arch in config.architectures:
        out[arch] = [n for n in config.prompt_variants if owners[n] == arch]
        if not out[arch]:
            raise CampaignConfigError(f"prompt_variants: none is written for {arch}")
    return out


class GridSize(FrozenModel):
    """How much a campaign plans, by arithmetic (nothing expanded)."""

    models: int
    """Models under test."""
    arch_variant_pairs: int
    """(architecture, prompt variant) pairs."""
    trajectories_per_cell: int
    """Trajectories per (model, architecture, variant, problem)."""
    problems: int
    """Problems."""
    turns: int
    """Turn budget per trajectory."""

    @property
    def trajectories(self) -> int:
        return self.models * self.arch_variant_pairs * self.trajectories_per_cell * self.problems

    @property
    def max_turns(self) -> int:
        return self.trajectories * self.turns


def grid_size(config: CampaignConfig, variants: dict[str, list[str]] | None = None) -> GridSize:
    """The campaign's grid; CampaignConfigError when it plans more than MAX_TRAJECTORIES trajectories."""
    variants = variants if variants is not None else variants_by_arch(config)
    size = GridSize(models=len(config.models), arch_variant_pairs=sum(len(v) for v in variants.values()),
                    trajectories_per_cell=config.trajectories, problems=len(config.problem_names()), turns=config.turns)
    if size.trajectories > MAX_TRAJECTORIES:
        raise CampaignConfigError(
            f"{size.models} models x {size.arch_variant_pairs} (architecture, variant) pairs x "
            f"{size.trajectories_per_cell} trajectories x {size.problems} problems = {size.trajectories:,} "
            f"trajectories, more than the {MAX_TRAJECTORIES:,} a campaign may plan (trajectories, models, problems)")
    return size


def plan_campaign(
    config: CampaignConfig, variant_arch: VariantArch | None = None, defaults: DefaultVariants | None = None
) -> list[TrajectoryPlan]:
    """Every trajectory of the campaign, in fan-out order (the grid's size is checked first)."""
    variants = variants_by_arch(config, variant_arch, defaults)
    grid_size(config, variants)
    problems = config.problem_names()
    plans = []
    for model in config.models:
        agent = AgentConfig(
            max_turns=config.turns, target_speedup=config.target_speedup,
            context_policy=model.context_policy or config.context_policy or ContextPolicy.FULL,
            language=config.language, reserve_output_tokens=model.reserve_output_tokens,
        )
        for arch in config.architectures:
            for variant in variants[arch]:
                for index in range(config.trajectories):
                    for problem in problems:
                        plans.append(TrajectoryPlan(
                            campaign_id=config.id, trajectory_id=f"{model.name}/{arch}/{variant}/{problem}/{index}",
                            model=model, arch=arch, prompt_variant=variant, problem=problem, index=index,
                            language=config.language, agent=agent,
                        ))
    return plans
