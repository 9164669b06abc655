"""Schema: FlashInfer-Trace compatible models plus our records. Imports nothing of ours."""

from .arbitration import Arbitration, ArbitrationOutcome, DisputedElement, OutputArbitration
from .augmentation import (
    AugmentationStatus,
    FeedbackAugmentation,
    ItemKind,
    RetrievalCondition,
    RetrievedItem,
)
from .base import SCHEMA_VERSION, FrozenModel
from .campaign import CampaignRecord, StopReason, TrajectoryRecord
from .definition import AxisConst, AxisVar, Definition, TensorSpec
from .enums import (
    CAMPAIGN_LANGUAGES,
    JUDGED_LANGUAGES,
    Binding,
    CampaignLanguage,
    CompileStatus,
    DType,
    EvaluationStatus,
    JudgedLanguage,
    Language,
    SandboxMode,
    StaticTarget,
    TargetInstruction,
)
from .hashing import text_sha256
from .records import (
    CompileResult,
    CorrectnessStats,
    EnvironmentInfo,
    JudgeCorrectness,
    JudgeResult,
    KernelResources,
    LLMUsage,
    PtxasResources,
    RecordedVerdict,
    SanitizerSummary,
    SassReport,
    TargetInstructionEvidence,
    TurnRecord,
    recorded_label,
)
from .solution import BuildSpec, Solution, SourceFile
from .text import exception_line
from .timing import MeterStatus, TimingAudit, TrialAudit
from .trace import Correctness, Environment, Evaluation, Performance, Trace
from .work import ProfiledKernel, ProfileOutcome, TargetOpCount, TargetWork, TargetWorkShare
from .workload import RandomInput, SafetensorsInput, ScalarInput, Workload

__all__ = [
    "SCHEMA_VERSION", "FrozenModel", "text_sha256", "exception_line", "CampaignRecord", "StopReason", "TrajectoryRecord", "AxisConst", "AxisVar", "Definition", "TensorSpec",
    "CAMPAIGN_LANGUAGES", "JUDGED_LANGUAGES", "CampaignLanguage", "JudgedLanguage", "CorrectnessStats", "JudgeCorrectness", "Binding", "CompileStatus", "DType", "EvaluationStatus", "Language", "SandboxMode", "StaticTarget",
    "TargetInstruction", "CompileResult", "EnvironmentInfo", "JudgeResult", "KernelResources",
    "LLMUsage", "PtxasResources", "RecordedVerdict", "recorded_label", "SanitizerSummary", "SassReport", "TargetInstructionEvidence",
    "TurnRecord", "BuildSpec", "SourceFile", "Solution", "Correctness", "Environment",
    "Evaluation", "Performance", "Trace", "RandomInput", "SafetensorsInput", "ScalarInput", "Workload",
    "MeterStatus", "TimingAudit", "TrialAudit",
    "Arbitration", "ArbitrationOutcome", "DisputedElement", "OutputArbitration",
    "ProfiledKernel", "ProfileOutcome", "TargetOpCount", "TargetWork", "TargetWorkShare",
    "AugmentationStatus", "FeedbackAugmentation", "ItemKind", "RetrievalCondition", "RetrievedItem",
]
