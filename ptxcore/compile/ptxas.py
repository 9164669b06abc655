"""Parse `nvcc -Xptxas -v` output into per-kernel resources and performance advisories."""

from __future__ import annotations

import re

from ptxcore.schema import KernelResources, PtxasResources

_ENTRY = re.compile(r"Compiling entry function '([^']+)' for '(\w+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_FRAME = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads"
)
_USED = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_PERF_WARNING = re.compile(r"(?:ptxas\s+)?(?:warning|info)\s*:.*?\b(C75\d\d)\b.*", re.IGNORECASE)
_ADVISORY = re.compile(r".*(Potential Performance Loss|wgmma.*serializ|setmaxnreg.*ignored).*", re.IGNORECASE)


def _num(pattern: re.Pattern[str], line: str) -> int | None:
    m = pattern.search(line)
    return int(m.group(1)) if m else None


def parse_ptxas(log: str) -> PtxasResources:
    """Resources of each compiled entry function, in the order ptxas reported them."""
    kernels: dict[str, dict] = {}
    current: str | None = None
    warnings: list[str] = []
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
            kernels.setdefault(current, {"function": current, "arch": m.group(2)})
            continue
        if m := _PROPS.search(line):
            current = m.group(1) if m.group(1) in kernels else current
            continue
        if current is not None and (m := _FRAME.search(line)):
            k = kernels[current]
            k["stack_frame_bytes"], k["spill_store_bytes"], k["spill_load_bytes"] = map(int, m.groups())
            continue
        if current is not None and (regs := _num(_USED, line)) is not None:
            k = kernels[current]
            k["registers"] = regs
            k["barriers"] = _num(_BARRIERS, line) or 0
            k["shared_bytes"] = _num(_SMEM, line) or 0
            k["constant_bytes"] = _num(_CMEM, line) or 0
            continue
        if _PERF_WARNING.search(line) or _ADVISORY.match(line):
            text = line.strip()
            if text not in warnings:
                warnings.append(text)
    return PtxasResources(
        kernels=[KernelResources(**k) for k in kernels.values()], performance_warnings=warnings
    )
