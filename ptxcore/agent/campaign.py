"""Campaign files: what to run (models x architectures x prompt variants x trajectories x problems).

A campaign file is YAML validated by `CampaignConfig`; an error names the file, the line and the key.
Model decoding settings are passed to litellm unchanged (the paper's Appendix A.1 settings are in
campaigns/paper.yaml as examples).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from ptxcore.arch import UnknownArchitectureError, get_architecture
from ptxcore.schema import CampaignLanguage, FrozenModel, Language

from .endpoints import OWN_PREFIX, check_decoding
from .retrieval_spec import RepairRetrievalSpec
from .types import MAX_MODEL_CALLS, ContextPolicy
from .yamlfile import YamlModelError, load_yaml_model, parse_yaml_model, read_yaml_text

_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")
"""Campaign ids name directories (runs/<id>/) and MLflow experiments: one safe path component. Every id pattern
here is applied with `fullmatch` (a `$` would let a trailing newline through)."""
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:@+\-/]{0,199}")
"""A litellm model string or label: no spaces, quotes or control characters."""
_REPLAY_LIBRARY = re.compile(r"[A-Za-z0-9][A-Za-z0-9_\-]{0,99}")
"""`replay/<library>`: a folder name under replay/ (no dots, so never `..`)."""
_ENV_VAR = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")
MAX_TRAJECTORIES = 100_000
"""Most trajectories one campaign may plan (model x architecture x variant x trajectory x problem); the
paper's full grid is about 4,000. Checked arithmetically before anything is expanded."""
ID_RULE = "use letters, digits, '_', '-', '.' (at most 128, starting with a letter or digit)"


def _arch_key(name: str) -> str:
    return get_architecture(name).key


def _problem_name(name: str) -> str:
    from ptxcore.problems import ProblemNotFoundError, get_problem

    try:
        get_problem(name)
    except ProblemNotFoundError as exc:
        raise ValueError(str(exc)) from None
    return name


ArchName = Annotated[str, AfterValidator(_arch_key)]
ProblemName = Annotated[str, AfterValidator(_problem_name)]


class CampaignConfigError(YamlModelError):
    """A campaign file that does not validate (one line: file:line: key: problem)."""


class ModelSpec(FrozenModel):
    """One model under test."""

    model: str = Field(min_length=1)
    """litellm model string, e.g. anthropic/claude-opus-4-8, openai/Qwen/Qwen3.6-27B, replay/demo
    (`replay/<library>` serves replay/<library>/; `replay/warehouse:<campaign>` re-serves a recorded campaign)."""
    label: str = ""
    """Short unique name used in trajectory ids and run names (default: the model string)."""
    decoding: dict[str, Any] = Field(default_factory=dict)
    """Passed to litellm.completion as is: temperature, top_p, max_tokens, reasoning_effort, extra_body ... (sampling
    and output settings only: ptxcore.agent.endpoints.DECODING_KEYS)."""
    api_base: str | None = None
    """OpenAI-compatible server (SGLang, vLLM), e.g. http://localhost:30000/v1; used only when the user allowed it
    outside the file (`--allow-endpoint URL` or $PTXBENCH_ALLOWED_ENDPOINTS), unless it is the provider's own."""
    api_key_env: str | None = None
    """Name of the environment variable that holds the API key (never the key itself): one litellm reads for the
    model's provider (ptxcore.agent.endpoints.PROVIDER_KEYS; SGLANG_API_KEY / VLLM_API_KEY for an allowed
    self-hosted api_base), never a PTXBENCH_ variable."""
    context_window_tokens: int | None = Field(default=None, gt=0)
    """Override of litellm's model info (needed for self-hosted models)."""
    concurrency: int = Field(default=4, ge=1)
    """Model calls in flight for this model's provider (Prefect tag limit llm:<provider>)."""
    context_policy: ContextPolicy | None = None
    """Override of the campaign's context policy for this model."""

    @field_validator("model", "label")
    @classmethod
    def _model_string(cls, v: str) -> str:
        if v and not _MODEL.fullmatch(v):
            raise ValueError(f"{v[:80]!r} is not a model string (letters, digits and _.:@+-/ only, at most 200)")
        return v

    @field_validator("model")
    @classmethod
    def _replay_name(cls, v: str) -> str:
        from .replay import WAREHOUSE_PREFIX

        if not v.startswith("replay/"):
            return v
        name = v.removeprefix("replay/")
        if name.startswith(WAREHOUSE_PREFIX):
            if not _ID.fullmatch(name.removeprefix(WAREHOUSE_PREFIX)):
                raise ValueError(f"{v!r}: replay/warehouse:<campaign id>, the id as campaign ids are ({ID_RULE})")
        elif not _REPLAY_LIBRARY.fullmatch(name):
            raise ValueError(f"{v!r}: replay/<library>, a folder name under replay/ (letters, digits, '_', '-')")
        return v

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, v: str | None) -> str | None:
        if v is not None and not _ENV_VAR.fullmatch(v):
            raise ValueError(f"{v[:80]!r} is not an environment variable name")
        if v is not None and v.startswith(OWN_PREFIX):
            raise ValueError(f"{v} is one of this project's own variables, never a model's key")
        return v

    @field_validator("decoding")
    @classmethod
    def _decoding_keys(cls, v: dict[str, Any]) -> dict[str, Any]:
        check_decoding(v)
        return v

    @field_validator("api_base")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"https?://[^\s]+", v):
            raise ValueError(f"{v[:80]!r}: expected an http(s) URL")
        return v

    @property
    def name(self) -> str:
        return self.label or self.model

    @property
    def reserve_output_tokens(self) -> int:
        value = self.decoding.get("max_tokens") or self.decoding.get("max_completion_tokens") or 0
        return int(value)


class ConcurrencySpec(FrozenModel):
    """How much runs at once."""

    trajectories: int = Field(default=4, ge=1)
    """Trajectories in flight (threads of the campaign flow): generation of one overlaps judging of others."""
    compile: int = Field(default=2, ge=1)
    """nvcc builds at once (Prefect tag limit `compile`)."""
    gpu_slots: dict[str, int] = Field(default_factory=dict)
    """Per architecture: judge tasks at once (Prefect tag limit gpu:<arch>); default 1."""

    @field_validator("gpu_slots")
    @classmethod
    def _known_archs(cls, v: dict[str, int]) -> dict[str, int]:
        out = {}
        for name, slots in v.items():
            if slots < 1:
                raise ValueError(f"gpu_slots for {name} must be >= 1")
            out[_arch_key(name)] = slots
        return out


class CampaignConfig(FrozenModel):
    """A campaign file."""

    name: str = Field(min_length=1)
    """Human name; also the campaign id unless campaign_id is given."""
    campaign_id: str | None = None
    """Identity: rerunning the same id resumes (skips recorded turns)."""
    description: str = ""
    """Free text."""
    models: list[ModelSpec] = Field(min_length=1)
    """Models under test."""
    architectures: list[ArchName] = Field(default_factory=lambda: ["hopper"], min_length=1)
    """Architecture keys or aliases (hopper/h100/h200, blackwell/b200)."""
    problems: Literal["primary", "all"] | list[ProblemName] = "primary"
    """Definition names, or `primary` (the paper's five) or `all`."""
    prompt_variants: list[str] | None = None
    """Prompt variant names; default: the prompts package's defaults for each architecture."""
    trajectories: int = Field(default=4, ge=1, le=MAX_TRAJECTORIES)
    """Trajectories per (model, architecture, variant, problem)."""
    turns: int = Field(default=MAX_MODEL_CALLS, ge=1, le=MAX_MODEL_CALLS)
    """Model calls per trajectory."""
    target_speedup: float = Field(default=1.2, gt=0)
    """Early stop once a correct turn reaches this speedup."""
    context_policy: ContextPolicy = ContextPolicy.FULL
    """What the model sees of earlier turns."""
    language: CampaignLanguage = Language.CUDA
    """Solution language."""
    concurrency: ConcurrencySpec = Field(default_factory=ConcurrencySpec)
    """Concurrency limits."""
    judge_retries: int = Field(default=2, ge=0)
    """Extra attempts of a judge task after an infrastructure error (never for a bad kernel)."""
    judge_retry_delay_s: float = Field(default=10.0, ge=0)
    """Seconds between judge attempts."""
    profilers: dict[str, str] = Field(default_factory=dict)
    """Per architecture: the judge route (ptxcore.judge.route): a profiling-service URL, `prefect` (Prefect task
    workers, `ptxbench worker --arch ARCH`), `recorded:PATH`, `local`, `none`; default `auto` (this host's GPU,
    if any)."""
    recorded_verdicts: str | None = None
    """A folder of verdicts recorded on a GPU earlier (FlashInfer-Trace, `ptxbench warehouse export-traces`):
    where no GPU of an architecture is here and its route is `auto`, a kernel recorded there gets that verdict,
    marked as recorded; any other kernel is NOT_EVALUATED. Relative to the working directory."""
    warehouse: str | None = None
    """DuckDB file; default runs/<campaign_id>/warehouse.duckdb."""
    mlflow_tracking_uri: str | None = None
    """MLflow store; default sqlite under mlruns/ (absolute path)."""
    repair_retrieval: RepairRetrievalSpec | None = None
    """Repair-notes retrieval appended to failing turns' feedback (Table 4 conditions); None: plain feedback."""

    @field_validator("architectures")
    @classmethod
    def _archs(cls, v: list[str]) -> list[str]:
        if len(set(v)) != len(v):
            raise ValueError("an architecture is listed twice")
        return v

    @field_validator("profilers")
    @classmethod
    def _profiler_archs(cls, v: dict[str, str]) -> dict[str, str]:
        from ptxcore.judge.route import JudgeRoute

        return {_arch_key(k): str(JudgeRoute.parse(url)) for k, url in v.items()}

    @field_validator("problems")
    @classmethod
    def _problems(cls, v: list[str] | str) -> list[str] | str:
        if not isinstance(v, str) and len(set(v)) != len(v):
            raise ValueError("a problem is listed twice")
        return v

    @field_validator("campaign_id")
    @classmethod
    def _id(cls, v: str | None) -> str | None:
        if v is not None and not _ID.fullmatch(v):
            raise ValueError(ID_RULE)
        return v

    @model_validator(mode="after")
    def _unique_labels(self) -> CampaignConfig:
        names = [m.name for m in self.models]
        if len(set(names)) != len(names):
            raise ValueError("two models share a label: give each a distinct `label`")
        if self.campaign_id is None and not _ID.fullmatch(self.name):
            raise ValueError("name is not a valid campaign id: set campaign_id")
        return self

    @property
    def id(self) -> str:
        return self.campaign_id or self.name

    def problem_names(self) -> list[str]:
        from ptxcore.problems import load_catalog

        if isinstance(self.problems, list):
            return list(self.problems)
        catalog = load_catalog()
        if self.problems == "all":
            return sorted(catalog)
        return sorted(n for n, p in catalog.items() if p.extension.primary)


def _wrap(exc: ValueError) -> CampaignConfigError:
    return CampaignConfigError(str(exc))


def parse_campaign(text: str, where: str = "<campaign>") -> CampaignConfig:
    try:
        return parse_yaml_model(text, CampaignConfig, where=where)
    except YamlModelError as exc:
        raise _wrap(exc) from exc
    except UnknownArchitectureError as exc:  # raised outside pydantic's error collection
        raise CampaignConfigError(f"{where}: {exc}") from exc


OVERRIDE_OPTIONS = {"campaign_id": "--campaign-id", "warehouse": "--warehouse", "profilers": "--profiler",
                    "mlflow_tracking_uri": "--mlflow-uri", "turns": "--turns"}
"""Command-line option of each field that `apply_overrides` accepts (named in its errors)."""


def check_campaign_id(value: str, option: str = "--campaign-id") -> str:
    """A campaign id from the command line: one line naming the option when it is not a safe slug."""
    if not _ID.fullmatch(value):
        raise CampaignConfigError(f"{option} {value[:80]!r}: {ID_RULE}")
    return value


def apply_overrides(config: CampaignConfig, **updates: Any) -> CampaignConfig:
    """The config with command-line overrides (re-validated); an error names the option and the value."""
    if not updates:
        return config
    if "campaign_id" in updates:
        check_campaign_id(updates["campaign_id"])
    try:
        return CampaignConfig.model_validate({**config.model_dump(mode="json"), **updates})
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else ""
        option = OVERRIDE_OPTIONS.get(field, field or "override")
        raise CampaignConfigError(f"{option} {updates.get(field)!r}: {err['msg'].removeprefix('Value error, ')}") from exc
    except UnknownArchitectureError as exc:
        raise CampaignConfigError(f"--profiler: {exc}") from exc


def load_campaign(path: Path | str) -> tuple[CampaignConfig, str]:
    """The validated config and the file's text (recorded with the campaign)."""
    path = Path(path)
    if not path.exists():
        raise CampaignConfigError(f"no such campaign file: {path}")
    try:
        text = read_yaml_text(path)
    except YamlModelError as exc:
        raise _wrap(exc) from exc
    return parse_campaign(text, where=str(path)), text


__all__ = ["MAX_TRAJECTORIES", "CampaignConfig", "CampaignConfigError", "ConcurrencySpec", "ModelSpec",
           "apply_overrides", "check_campaign_id", "load_campaign", "load_yaml_model", "parse_campaign"]
