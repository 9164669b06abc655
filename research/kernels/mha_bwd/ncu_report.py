"""Nsight Compute CSV -> one summary row per profiled kernel launch, and a plain-text table of them.

Two CSV layouts of the same report (`ncu --import R.ncu-rep --csv --page details|raw`):

- details: one row per metric ("ID", ..., "Kernel Name", ..., "Block Size", "Grid Size", ..., "Section Name",
  "Metric Name", "Metric Unit", "Metric Value"), the section headers' metrics under their labels ("Duration",
  "Compute (SM) Throughput", ...); later ncu releases add rule columns, which are ignored.
- raw: one row per launch, a column per raw metric (`gpu__time_duration.sum`, ...), the second row the units.
  The warp-stall reasons and the pipe utilizations are only here (the details page prints section headers).

Values may carry thousands separators ("1,234.56"); units are converted (ns/us/ms, byte/Kbyte/...).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field, replace

ID, KERNEL, BLOCK, GRID = "ID", "Kernel Name", "Block Size", "Grid Size"
FIXED_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", KERNEL, "Context", "Stream", BLOCK, GRID,
                 "Device", "CC")
WANTED: dict[str, tuple[str, ...]] = {
    "duration_us": ("Duration", "gpu__time_duration.sum"),
    "sm_pct": ("Compute (SM) Throughput", "sm__throughput.avg.pct_of_peak_sustained_elapsed"),
    "dram_pct": ("DRAM Throughput", "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
                 "dram__throughput.avg.pct_of_peak_sustained_elapsed"),
    "tensor_pct": ("sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
                   "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
                   "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
                   "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"),
    "occupancy_pct": ("Achieved Occupancy", "sm__warps_active.avg.pct_of_peak_sustained_active"),
    "registers": ("Registers Per Thread", "launch__registers_per_thread"),
    "dyn_smem_kib": ("Dynamic Shared Memory Per Block", "launch__shared_mem_per_block_dynamic"),
}
"""Per summary column: the metric names that give it (a details label or a raw name), the first present wins.
The tensor pipe has no details label: its names are raw, Hopper's GMMA pipe first."""
STALL_FAMILIES = (  # cycles per issued instruction (the Warp State chart), else total latency per reason
    re.compile(r"^smsp__average_warps_issue_stalled_(\w+?)_per_issue_active\.ratio$"),
    re.compile(r"^smsp__average_warp_latency_issue_stalled_(\w+?)\.ratio$"),
)
NOT_A_STALL = {"selected"}
TIME_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6,
           "second": 1e6}
BYTES = {"b": 1, "byte": 1, "kb": 1e3, "kbyte": 1e3, "mb": 1e6, "mbyte": 1e6, "kib": 1024, "mib": 1024**2}


@dataclass(frozen=True)
class Metric:
    unit: str
    value: float | str
    """A number when ncu printed one (separators removed), else its text ("n/a", "(132, 1, 1)")."""


@dataclass(frozen=True)
class KernelLaunch:
    """One profiled launch: its ncu ID, name, launch shape and every metric the CSV gave, by name."""

    id: str
    name: str
    block: str
    grid: str
    metrics: dict[str, Metric] = field(default_factory=dict)


@dataclass(frozen=True)
class KernelRow:
    """The table's row of one launch (None: no such metric in the report)."""

    name: str
    duration_us: float | None
    sm_pct: float | None
    dram_pct: float | None
    tensor_pct: float | None
    occupancy_pct: float | None
    registers: float | None
    dyn_smem_kib: float | None
    block: str
    grid: str
    stalls: tuple[tuple[str, float], ...]
    """The three largest warp-stall reasons, (reason, cycles per issued instruction), largest first."""


def number(text: str) -> float | str:
    cleaned = text.strip().replace(",", "")
    try:
        return float(cleaned)
    except ValueError:
        return text.strip()


def _csv_rows(text: str) -> list[list[str]]:
    """The CSV from its header on (ncu may print ==PROF== or the application's lines before it)."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith(f'"{ID}"')), None)
    if start is None:
        return []
    return list(csv.reader(ln for ln in lines[start:] if ln.startswith('"')))


def _launch(r: list[str], col: dict[str, int]) -> tuple[str, str, str, str]:
    """(ID, kernel name, block size, grid size) of a row; a layout without the shape columns gives ""."""
    def cell(name: str) -> str:
        return r[col[name]] if name in col else ""

    return cell(ID), cell(KERNEL), cell(BLOCK), cell(GRID)


def parse_details(text: str) -> list[KernelLaunch]:
    rows = _csv_rows(text)
    col = {name: i for i, name in enumerate(rows[0])} if rows else {}
    if not {KERNEL, "Metric Name", "Metric Unit", "Metric Value"} <= set(col):
        return []
    heads: dict[str, tuple[str, str, str, str]] = {}
    metrics: dict[str, dict[str, Metric]] = {}
    for r in rows[1:]:
        if len(r) < len(col) or not r[col["Metric Name"]]:
            continue  # a rule's row, or a truncated one
        heads.setdefault(r[col[ID]], _launch(r, col))
        metrics.setdefault(r[col[ID]], {}).setdefault(
            r[col["Metric Name"]], Metric(r[col["Metric Unit"]], number(r[col["Metric Value"]])))
    return [KernelLaunch(*head, metrics=metrics[i]) for i, head in heads.items()]


def parse_raw(text: str) -> list[KernelLaunch]:
    rows = _csv_rows(text)
    if not rows or KERNEL not in rows[0]:
        return []
    head, body = rows[0], rows[1:]
    units = [""] * len(head)
    if body and not body[0][0]:  # the units row has no ID
        units, body = body[0], body[1:]
    col = {name: i for i, name in enumerate(head)}
    return [KernelLaunch(*_launch(r, col), metrics={h: Metric(units[i], number(r[i])) for i, h in enumerate(head)
                                                    if h not in FIXED_COLUMNS})
            for r in body if len(r) >= len(head)]


def merge(details: list[KernelLaunch], raw: list[KernelLaunch]) -> list[KernelLaunch]:
    """Details launches with the raw metrics of the same ID added (raw-only launches kept), in ID order."""
    by_id = {k.id: k for k in details}
    for k in raw:
        known = by_id.get(k.id)
        by_id[k.id] = k if known is None else replace(known, metrics={**k.metrics, **known.metrics})
    return sorted(by_id.values(), key=lambda k: int(k.id) if k.id.isdigit() else 0)


def short_name(name: str, width: int = 56) -> str:
    """`void ns::kernel<...>(args)` -> `kernel<…>`; a longer one keeps its start and its end (cuDNN's names
    differ in their tails: tile shape, kernel index)."""
    base = name.removeprefix("void ").split("(", 1)[0]
    head, templated = base.split("<", 1)[0], "<" in base
    base = head.rsplit("::", 1)[-1] + ("<…>" if templated else "")
    return base if len(base) <= width else base[: width // 2 - 1] + "…" + base[-(width // 2):]


def _scaled(column: str, metric: Metric) -> float | None:
    if not isinstance(metric.value, float):
        return None
    unit = metric.unit.split("/", 1)[0].strip().lower()
    if column == "duration_us":
        return metric.value * TIME_US[unit] if unit in TIME_US else None
    if column == "dyn_smem_kib":
        return metric.value * BYTES[unit] / 1024 if unit in BYTES else None
    return metric.value


def top_stalls(metrics: dict[str, Metric], n: int = 3) -> tuple[tuple[str, float], ...]:
    for family in STALL_FAMILIES:
        found = [(m.group(1), v.value) for name, v in metrics.items()
                 if (m := family.match(name)) and isinstance(v.value, float) and m.group(1) not in NOT_A_STALL]
        if found:
            return tuple(sorted(found, key=lambda kv: -kv[1])[:n])
    return ()


def summarize(launch: KernelLaunch) -> KernelRow:
    values: dict[str, float | None] = {}
    for column, names in WANTED.items():
        metric = next((launch.metrics[n] for n in names if n in launch.metrics), None)
        values[column] = None if metric is None else _scaled(column, metric)
    return KernelRow(name=short_name(launch.name), block=launch.block, grid=launch.grid,
                     stalls=top_stalls(launch.metrics), **values)


HEADERS = ("kernel", "us", "SM%", "DRAM%", "tensor%", "occ%", "regs", "dynsmem KiB", "block", "grid",
           "top stalls (cycles/issue)")


def _cell(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _line(cells) -> str:
    return "  ".join(cells).rstrip()


def format_table(title: str, rows: list[KernelRow]) -> str:
    body = [(r.name, _cell(r.duration_us), _cell(r.sm_pct), _cell(r.dram_pct), _cell(r.tensor_pct),
             _cell(r.occupancy_pct), _cell(r.registers, 0), _cell(r.dyn_smem_kib), r.block, r.grid,
             ", ".join(f"{k} {v:.2f}" for k, v in r.stalls) or "-") for r in rows]
    widths = [max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(HEADERS)]
    out = [title, _line(h.ljust(w) for h, w in zip(HEADERS, widths, strict=True)),
           _line("-" * w for w in widths)]
    out += [_line(c.ljust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    total = sum(r.duration_us or 0.0 for r in rows)
    out.append(f"total {total:,.1f} us over {len(rows)} kernel launch(es)")
    return "\n".join(out)
