"""Where a judgement was made: GPU, driver, toolkit, clocks and the timing protocol's facts."""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from .base import SCHEMA_VERSION, FrozenModel
from .migrate import migrate_environment


class EnvironmentInfo(FrozenModel):
    """Where a judgement was made. None: not known / not measured (e.g. no GPU judged the turn)."""

    schema_version: int = SCHEMA_VERSION
    """Record schema version (v1 kept versions and protocol facts in a string dict `extra`)."""
    gpu_name: str | None = None
    """e.g. NVIDIA H200."""
    driver_version: str | None = None
    """NVIDIA driver."""
    cuda_toolkit: str | None = None
    """nvcc release."""
    torch_version: str | None = None
    """torch.__version__ on the judge."""
    sm_clock_mhz_before: int | None = None
    """SM clock before timing, MHz."""
    sm_clock_mhz_after: int | None = None
    """SM clock after timing, MHz."""
    temperature_c_before: int | None = None
    """GPU temperature before timing, degrees C."""
    temperature_c_after: int | None = None
    """GPU temperature after timing, degrees C."""
    throttle_reasons: list[str] = Field(default_factory=list)
    """Active clock-throttle reasons seen during timing (empty when clean)."""
    library_versions: dict[str, str] = Field(default_factory=dict)
    """Further versions, by library: cupy, tvm_ffi, cuda_driver_api, the baseline library (flashinfer)."""
    env_stream_ids: list[int] = Field(default_factory=list)
    """CUPTI ids of the TVM-FFI environment stream the candidate had to launch on."""
    trial_medians_ms: list[float] = Field(default_factory=list)
    """Median kernel time of each timed trial, ms (the latency is their mean)."""
    persisting_l2_resets: int | None = None
    """Calls after which the judge had to clear a persisting-L2 set-aside the candidate left behind."""

    @model_validator(mode="before")
    @classmethod
    def _v1(cls, data: Any) -> Any:
        return migrate_environment(data)
