"""GPU health between tasks: reading nvidia-smi, and the policy that drains a GPU or restarts a worker.

The reading is a subprocess of `nvidia-smi` (no NVML binding needed); the policy is a pure function.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass

from ptxcore.gpu.service.config import HealthThresholds
from ptxcore.gpu.service.models import GpuCondition, GpuHealth

log = logging.getLogger(__name__)

# NVML clock-event (throttle) reason bits, as nvidia-smi prints them in clocks_event_reasons.active.
CLOCK_EVENT_BITS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}

SMI_FIELDS = (
    "index,name,temperature.gpu,clocks.sm,clocks.max.sm,clocks_event_reasons.active,"
    "memory.total,memory.free,utilization.gpu"
)
_LEGACY_FIELDS = SMI_FIELDS.replace("clocks_event_reasons", "clocks_throttle_reasons")


def decode_clock_events(mask: int) -> list[str]:
    """Names of the active reasons, gpu_idle left out (it is not a slowdown)."""
    return [name for bit, name in CLOCK_EVENT_BITS.items() if mask & bit and name != "gpu_idle"]


def _int_or_none(text: str) -> int | None:
    text = text.strip()
    try:
        return int(float(text))
    except ValueError:
        return None


def parse_smi_line(line: str) -> GpuHealth:
    """One CSV line of `nvidia-smi --query-gpu=SMI_FIELDS --format=csv,noheader,nounits`."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != 9:
        raise ValueError(f"unexpected nvidia-smi line: {line!r}")
    index, name, temp, clock, max_clock, mask, total_mib, free_mib, util = parts
    reasons = decode_clock_events(int(mask, 16)) if mask.startswith("0x") else []
    mib = 1 << 20
    total, free = _int_or_none(total_mib), _int_or_none(free_mib)
    return GpuHealth(
        gpu=int(index), name=name, temperature_c=_int_or_none(temp), sm_clock_mhz=_int_or_none(clock),
        max_sm_clock_mhz=_int_or_none(max_clock), throttle_reasons=reasons,
        memory_total_bytes=None if total is None else total * mib,
        memory_free_bytes=None if free is None else free * mib, utilization_pct=_int_or_none(util),
    )


def read_nvidia_smi(gpu: int, timeout_s: float = 20.0) -> GpuHealth:
    """Read one GPU (physical index). Failures come back as a reading with `error` set."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return GpuHealth(gpu=gpu, error="nvidia-smi not found")
    last = ""
    for fields in (SMI_FIELDS, _LEGACY_FIELDS):
        try:
            out = subprocess.run([smi, f"--query-gpu={fields}", "--format=csv,noheader,nounits", "-i", str(gpu)],
                                 capture_output=True, text=True, timeout=timeout_s)
        except (OSError, subprocess.TimeoutExpired) as exc:
            return GpuHealth(gpu=gpu, error=f"nvidia-smi failed: {exc}")
        if out.returncode == 0 and out.stdout.strip():
            try:
                return parse_smi_line(out.stdout.strip().splitlines()[0])
            except ValueError as exc:
                last = str(exc)
                continue
        lines = (out.stderr or out.stdout).strip().splitlines()
        last = lines[-1] if lines else f"exit status {out.returncode}"
    return GpuHealth(gpu=gpu, error=f"nvidia-smi: {last}")


_NVML: dict = {}


def read_nvml(gpu: int) -> GpuHealth | None:
    """Read one GPU (physical index) through NVML (nvidia-ml-py); None when NVML is not usable."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        if not _NVML:
            pynvml.nvmlInit()
            _NVML["ok"] = True
        h = pynvml.nvmlDeviceGetHandleByIndex(gpu)
        reasons_fn = getattr(pynvml, "nvmlDeviceGetCurrentClocksEventReasons", None) or \
            pynvml.nvmlDeviceGetCurrentClocksThrottleReasons
        mem = pynvml.nvmlDeviceGetMemoryInfo(h)
        name = pynvml.nvmlDeviceGetName(h)
        return GpuHealth(
            gpu=gpu, name=name.decode() if isinstance(name, bytes) else str(name),
            temperature_c=int(pynvml.nvmlDeviceGetTemperature(h, pynvml.NVML_TEMPERATURE_GPU)),
            sm_clock_mhz=int(pynvml.nvmlDeviceGetClockInfo(h, pynvml.NVML_CLOCK_SM)),
            max_sm_clock_mhz=int(pynvml.nvmlDeviceGetMaxClockInfo(h, pynvml.NVML_CLOCK_SM)),
            throttle_reasons=decode_clock_events(int(reasons_fn(h))), memory_total_bytes=int(mem.total),
            memory_free_bytes=int(mem.free), utilization_pct=int(pynvml.nvmlDeviceGetUtilizationRates(h).gpu))
    except Exception as exc:  # noqa: BLE001 - NVML refused: fall back to nvidia-smi
        log.info("NVML read of GPU %d failed (%s); using nvidia-smi", gpu, exc)
        return None


def read_gpu(gpu: int) -> GpuHealth:
    """NVML when available, else nvidia-smi."""
    return read_nvml(gpu) or read_nvidia_smi(gpu)


@dataclass(frozen=True)
class HealthVerdict:
    """What the policy concluded from one reading."""

    condition: GpuCondition
    """Worst condition found."""
    reasons: tuple[str, ...]
    """Every finding, human-readable."""

    @property
    def drains(self) -> bool:
        """The GPU must take no tasks (its measurements would be distorted or it cannot serve)."""
        return self.condition in (GpuCondition.HOT, GpuCondition.THROTTLED, GpuCondition.LOW_MEMORY,
                                  GpuCondition.UNRESPONSIVE)

    @property
    def restarts_worker(self) -> bool:
        """The worker's state is suspect: replace the process (fresh workload state)."""
        return self.condition in (GpuCondition.LEAKING, GpuCondition.UNRESPONSIVE)


def assess(h: GpuHealth, t: HealthThresholds) -> HealthVerdict:
    """Pure policy. Order of severity: unresponsive, hot, throttled, low memory, leaking."""
    found: list[tuple[GpuCondition, str]] = []
    if h.error and h.temperature_c is None and h.memory_free_bytes is None:
        found.append((GpuCondition.UNRESPONSIVE, f"health probe failed: {h.error}"))
    if h.temperature_c is not None and h.temperature_c >= t.max_temperature_c:
        found.append((GpuCondition.HOT, f"temperature {h.temperature_c} C >= {t.max_temperature_c} C"))
    bad = [r for r in h.throttle_reasons if r in t.draining_throttle_reasons]
    if bad:
        found.append((GpuCondition.THROTTLED, "clock slowdown: " + ", ".join(bad)))
    # Our own cached workload state is evictable: only memory held by others counts against the floor.
    available = None if h.memory_free_bytes is None else h.memory_free_bytes + h.resident_bytes
    if available is not None and available < t.min_free_bytes:
        found.append((GpuCondition.LOW_MEMORY,
                      f"available memory {available >> 20} MiB < {t.min_free_bytes >> 20} MiB"))
    if h.leaked_bytes > t.max_leaked_bytes:
        found.append((GpuCondition.LEAKING,
                      f"worker holds {h.leaked_bytes >> 20} MiB beyond its workload state"))
    if not found:
        return HealthVerdict(GpuCondition.HEALTHY, ())
    return HealthVerdict(found[0][0], tuple(r for _, r in found))
