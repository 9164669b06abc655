"""MiniPTXAgent: the multi-turn loop, its feedback and extraction, campaign files and replay.

Importing this package does not import litellm; the client adapter (`ptxcore.agent.llm`) does, and
sets LITELLM_LOCAL_MODEL_COST_MAP first so litellm never fetches its cost map.
"""

import os

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

from .campaign import (  # noqa: E402
    CampaignConfig,
    CampaignConfigError,
    ModelSpec,
    apply_overrides,
    check_campaign_id,
    load_campaign,
    parse_campaign,
)
from .evaluation import fold_evaluation  # noqa: E402
from .extraction import extract_kernel  # noqa: E402
from .feedback import format_feedback  # noqa: E402
from .loop import AgentState, MiniPTXAgent, PriorTurn, messages_for_turn, stop_rule  # noqa: E402
from .plan import TrajectoryPlan, plan_campaign  # noqa: E402
from .records import step_metrics, turn_record  # noqa: E402
from .summary import CampaignSummary, HeadlineRow, headline_markdown, headline_rows  # noqa: E402
from .types import (  # noqa: E402
    AgentConfig,
    CallContext,
    ContextOverflowError,
    ContextPolicy,
    Extraction,
    LLMReply,
    TrajectoryResult,
    TurnEvaluation,
    TurnOutcome,
)

__all__ = [
    "stop_rule", "messages_for_turn",
    "CampaignConfig", "CampaignConfigError", "ModelSpec", "apply_overrides", "check_campaign_id", "load_campaign",
    "parse_campaign", "fold_evaluation",
    "extract_kernel", "format_feedback", "AgentState", "MiniPTXAgent", "PriorTurn", "TrajectoryPlan",
    "plan_campaign", "step_metrics", "turn_record", "CampaignSummary", "HeadlineRow", "headline_markdown", "headline_rows",
    "AgentConfig", "CallContext", "ContextOverflowError", "ContextPolicy", "Extraction", "LLMReply",
    "TrajectoryResult", "TurnEvaluation", "TurnOutcome",
]
