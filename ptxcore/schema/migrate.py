"""Reading schema-v1 records (warehouses and task stores written before the typed statistics).

v1 kept protocol facts in string dicts (`Correctness.extra`, `EnvironmentInfo.extra`) and wrote 0 / ""
for values that were not measured. v2 has typed fields and None. These helpers run as `mode="before"`
validators, so a v1 JSON document validates into a v2 model unchanged in meaning.
"""

from __future__ import annotations

from typing import Any

_V1_ENV_VERSIONS = ("cupy", "tvm_ffi", "cuda_driver_api", "ncu")
_V1_ENV_STRINGS = ("gpu_name", "driver_version", "cuda_toolkit", "torch_version")
_V1_ENV_READINGS = ("sm_clock_mhz_before", "sm_clock_mhz_after", "temperature_c_before", "temperature_c_after")


def empty_to_none(value: Any) -> Any:
    """v1's "" for a missing identifier or version is None now."""
    return None if value == "" else value


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x.strip()]


def migrate_environment(data: Any) -> Any:
    """A v1 EnvironmentInfo dict (v1 always wrote `extra`, and no schema_version) -> v2 fields. Anything else
    (a v2 document, or keyword arguments in code) passes through untouched."""
    if not isinstance(data, dict) or "schema_version" in data or "extra" not in data:
        return data
    out = {k: v for k, v in data.items() if k != "extra"}
    for key in _V1_ENV_STRINGS:
        if out.get(key) == "":
            out[key] = None
    for key in _V1_ENV_READINGS:
        if out.get(key) == 0:  # v1 wrote 0 for "not read" (no GPU judged the turn)
            out[key] = None
    extra = dict(data.get("extra") or {})
    if "env_stream_ids" in extra:
        out["env_stream_ids"] = _ints(extra.pop("env_stream_ids"))
    if "trial_medians_ms" in extra:
        out["trial_medians_ms"] = _floats(extra.pop("trial_medians_ms"))
    if "persisting_l2_resets" in extra:
        out["persisting_l2_resets"] = int(extra.pop("persisting_l2_resets"))
    out["library_versions"] = {k: str(v) for k, v in extra.items()}
    out["schema_version"] = 1
    return out


def migrate_correctness(data: Any) -> Any:
    """A v1 Correctness dict (statistics in `extra`) -> v2 `stats`."""
    if not isinstance(data, dict) or "extra" not in data:
        return data
    out = {k: v for k, v in data.items() if k != "extra"}
    extra = data.get("extra")
    out["stats"] = dict(extra) if extra else None
    return out
