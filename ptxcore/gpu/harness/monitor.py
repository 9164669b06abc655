"""Where a judgement ran: GPU, driver, toolkit, library versions; clocks, temperature and throttling.

NVML through nvidia-ml-py when installed, else `nvidia-smi --query-gpu`; a monitor that cannot read the
GPU reports zeros and no throttle reasons (and says so in `extra`).
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from dataclasses import dataclass

log = logging.getLogger(__name__)

# NVML clocks-event (throttle) reason bits that mean thermal or power throttling.
THROTTLE_BITS: dict[int, str] = {
    0x4: "sw_power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown", 0x80: "hw_power_brake_slowdown",
}


@dataclass(frozen=True)
class GpuSnapshot:
    sm_clock_mhz: int
    temperature_c: int
    reasons_mask: int

    @property
    def throttle_reasons(self) -> list[str]:
        return [name for bit, name in THROTTLE_BITS.items() if self.reasons_mask & bit]


class GpuMonitor:
    """Reads clocks, temperature and throttle reasons of one GPU."""

    def __init__(self, device: int = 0) -> None:
        self.device = device
        self.source = "none"
        self._nvml = None
        self._handle = None
        try:
            import pynvml

            pynvml.nvmlInit()
            self._nvml = pynvml
            self._handle = pynvml.nvmlDeviceGetHandleByIndex(device)
            self.source = "nvml"
        except Exception as exc:  # noqa: BLE001 - nvidia-ml-py absent or NVML refused
            log.info("NVML unavailable (%s); falling back to nvidia-smi", exc)
            self.source = "nvidia-smi" if shutil.which("nvidia-smi") else "none"

    def compute_pids(self) -> set[int] | None:
        """PIDs of the processes holding a compute context on this GPU (None: NVML cannot say)."""
        if self._nvml is None:
            return None
        try:
            return {int(p.pid) for p in self._nvml.nvmlDeviceGetComputeRunningProcesses(self._handle)}
        except Exception as exc:  # noqa: BLE001 - an unanswered question, never a failed judgement
            log.warning("NVML could not list the GPU's processes: %s", exc)
            return None

    def snapshot(self) -> GpuSnapshot:
        try:
            if self._nvml is not None:
                return self._snapshot_nvml()
            if self.source == "nvidia-smi":
                return self._snapshot_smi()
        except Exception as exc:  # noqa: BLE001 - monitoring must never fail a judgement
            log.warning("GPU snapshot failed: %s", exc)
        return GpuSnapshot(0, 0, 0)

    def _snapshot_nvml(self) -> GpuSnapshot:
        n, h = self._nvml, self._handle
        clock = n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)
        temp = n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU)
        getter = getattr(n, "nvmlDeviceGetCurrentClocksEventReasons", None) or n.nvmlDeviceGetCurrentClocksThrottleReasons
        return GpuSnapshot(int(clock), int(temp), int(getter(h)))

    def _snapshot_smi(self) -> GpuSnapshot:
        q = "clocks.sm,temperature.gpu,clocks_event_reasons.active"
        out = subprocess.run(
            ["nvidia-smi", f"--id={self.device}", f"--query-gpu={q}", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=20,
        ).stdout.strip().split(",")
        return GpuSnapshot(int(float(out[0])), int(float(out[1])), int(out[2].strip(), 16))


def _version(module: str) -> str:
    try:
        mod = __import__(module)
        return str(getattr(mod, "__version__", "?"))
    except Exception:  # noqa: BLE001
        return ""


def static_environment(device: int = 0) -> dict[str, str]:
    """GPU name, driver and library versions (read once per engine)."""
    import torch

    from ptxcore.compile import toolkit_version
    from ptxcore.gpu.child import driver

    info = {
        "gpu_name": torch.cuda.get_device_name(device),
        "torch_version": torch.__version__,
        "cuda_driver_api": driver.driver_version(),
        "cupy": _version("cupy"), "tvm_ffi": _version("tvm_ffi"),
    }
    try:
        info["cuda_toolkit"] = toolkit_version()
    except Exception:  # noqa: BLE001 - nvcc missing is reported, not fatal here
        info["cuda_toolkit"] = ""
    info["driver_version"] = _driver_release()
    return info


def _driver_release() -> str:
    try:
        import pynvml

        pynvml.nvmlInit()
        v = pynvml.nvmlSystemGetDriverVersion()
        return v.decode() if isinstance(v, bytes) else str(v)
    except Exception:  # noqa: BLE001
        pass
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    return ""
