"""ptxcore.gym: the judge as a training environment (reset / step / reward), recorded like a campaign.

  spec.py      EnvSpec: problem, architecture, prompt variant, reward, turn budget, evaluation profile
  reward.py    RewardSpec (YAML or pydantic), the staged score of one verdict, discounted returns
  profiles.py  evaluation profiles quick / standard (the paper's protocol) / thorough
  env.py       KernelEnv: reset(seed) -> the agent's first messages; step(completion) -> feedback, reward, ends
  judging.py   the evaluator: CPU stage, then the judge seam (any route), folded as a campaign folds it
  build.py     the prompt of a spec and the judge of a route; EnvBuilder for the environments of one run
  batch.py     EnvPool: step_many and as_completed (many environments' steps in flight, a timeout each)
  records.py   EnvStepRecord: the reward row beside each turn (warehouse table env_steps)
  http/        the HTTP front (FastAPI behind the profiling service's guard) and its thin client

No Gymnasium dependency: the five-tuple is StepResult.as_tuple(). Light: no torch, no duckdb at import.
"""

from .build import EnvBuilder, EnvSpecError, make_env, spec_judge, spec_prompt
from .env import EnvStateError, KernelEnv, Prompt, StepRecorder, reward_facts
from .profiles import PROFILES, EvalProfile, ProfileName, get_profile
from .records import EnvStepRecord, RecordSource, RewardSpecRecord
from .reward import (
    DEFAULT_REWARD,
    RewardBasis,
    RewardBreakdown,
    RewardFacts,
    RewardSpec,
    discounted_return,
    load_reward_spec,
    returns_to_go,
    score,
)
from .spec import EnvSpec
from .steps import ResetResult, StepInfo, StepResult

__all__ = [
    "EnvBuilder", "EnvSpecError", "make_env", "spec_judge", "spec_prompt", "EnvStateError", "KernelEnv", "Prompt",
    "StepRecorder", "reward_facts", "PROFILES", "EvalProfile", "ProfileName", "get_profile", "EnvStepRecord",
    "RecordSource", "RewardSpecRecord", "DEFAULT_REWARD", "RewardBasis", "RewardBreakdown", "RewardFacts",
    "RewardSpec", "discounted_return", "load_reward_spec", "returns_to_go", "score", "EnvSpec", "ResetResult",
    "StepInfo", "StepResult",
]
