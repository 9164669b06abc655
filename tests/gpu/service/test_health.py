"""Reading nvidia-smi and the health policy."""

from __future__ import annotations

import pytest

from ptxcore.gpu.service.config import HealthThresholds
from ptxcore.gpu.service.health import assess, decode_clock_events, parse_smi_line
from ptxcore.gpu.service.models import GpuCondition, GpuHealth

GIB = 1 << 30
T = HealthThresholds()


def test_parse_smi_line():
    h = parse_smi_line("1, NVIDIA H200, 41, 1980, 1980, 0x0000000000000044, 143771, 140000, 3")
    assert (h.gpu, h.name, h.temperature_c, h.sm_clock_mhz) == (1, "NVIDIA H200", 41, 1980)
    assert h.throttle_reasons == ["sw_power_cap", "hw_thermal_slowdown"]
    assert h.memory_total_bytes == 143771 << 20 and h.memory_free_bytes == 140000 << 20
    assert h.utilization_pct == 3


def test_parse_smi_line_with_unsupported_fields_and_garbage():
    h = parse_smi_line("0, NVIDIA H200, [N/A], 345, 1980, [N/A], 143771, 143000, [N/A]")
    assert h.temperature_c is None and h.throttle_reasons == [] and h.utilization_pct is None
    with pytest.raises(ValueError):
        parse_smi_line("no gpus found")


def test_idle_is_not_a_slowdown():
    assert decode_clock_events(0x1) == []
    assert decode_clock_events(0x1 | 0x8) == ["hw_slowdown"]


def reading(**kw) -> GpuHealth:
    base = dict(gpu=0, temperature_c=45, memory_total_bytes=80 * GIB, memory_free_bytes=70 * GIB)
    base.update(kw)
    return GpuHealth(**base)


def test_healthy():
    v = assess(reading(throttle_reasons=["sw_power_cap"]), T)
    assert v.condition is GpuCondition.HEALTHY and not v.drains and not v.restarts_worker


@pytest.mark.parametrize(("kw", "condition"), [
    ({"temperature_c": 90}, GpuCondition.HOT),
    ({"throttle_reasons": ["hw_thermal_slowdown"]}, GpuCondition.THROTTLED),
    ({"memory_free_bytes": 1 * GIB}, GpuCondition.LOW_MEMORY),
    ({"error": "nvidia-smi failed", "temperature_c": None, "memory_free_bytes": None}, GpuCondition.UNRESPONSIVE),
])
def test_draining_conditions(kw, condition):
    v = assess(reading(**kw), T)
    assert v.condition is condition and v.drains and v.reasons


def test_own_cached_state_does_not_count_as_low_memory():
    v = assess(reading(memory_free_bytes=2 * GIB, resident={"a/b": 40 * GIB}, worker_allocated_bytes=40 * GIB), T)
    assert v.condition is GpuCondition.HEALTHY


def test_leak_restarts_the_worker_without_draining():
    v = assess(reading(resident={"a/b": GIB}, worker_allocated_bytes=GIB + 512 * (1 << 20)), T)
    assert v.condition is GpuCondition.LEAKING and v.restarts_worker and not v.drains


def test_worst_condition_wins_and_all_reasons_are_kept():
    v = assess(reading(temperature_c=95, throttle_reasons=["hw_slowdown"]), T)
    assert v.condition is GpuCondition.HOT and len(v.reasons) == 2
