"""Static verdict: which target instruction families a binary contains, after exclusions."""

from __future__ import annotations

import logging
import subprocess
from collections import Counter
from pathlib import Path

from ptxcore.arch import Architecture
from ptxcore.schema import SassReport, StaticTarget

from .parse import SassInstruction, parse_sass
from .tools import find_tool

log = logging.getLogger(__name__)


class SassDumpError(RuntimeError):
    """cuobjdump failed on a binary that should contain device code."""


def dump_sass(binary: Path, timeout_s: float = 120.0) -> str:
    """`cuobjdump --dump-sass` text of a cubin, object or shared library."""
    cmd = [find_tool("cuobjdump"), "--dump-sass", str(binary)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if proc.returncode != 0:
        raise SassDumpError(f"cuobjdump failed on {binary.name}: {proc.stderr.strip()[:500]}")
    return proc.stdout


def classify(instructions: list[SassInstruction], arch: Architecture) -> SassReport:
    """Count mnemonics and target families; apply the family exclusions."""
    counts: Counter[str] = Counter()
    per_function: dict[str, Counter[str]] = {}
    families: Counter[str] = Counter()
    excluded: list[str] = []
    for ins in instructions:
        counts[ins.mnemonic] += 1
        per_function.setdefault(ins.function, Counter())[ins.mnemonic] += 1
        for fam in arch.all_families:
            verdict = fam.classify(ins.opcode, ins.text)
            if verdict == "counted":
                families[fam.name] += 1
            elif verdict == "excluded":
                excluded.append(f"{ins.function}@{ins.address:#06x}: {ins.text}")
    required = [f.name for f in arch.target_families]
    present = any(families.get(name, 0) > 0 for name in required)
    return SassReport(
        arch=arch.key,
        counts=dict(sorted(counts.items())),
        functions={fn: dict(sorted(c.items())) for fn, c in per_function.items()},
        family_counts=dict(sorted(families.items())),
        excluded=excluded,
        target_static=StaticTarget.PRESENT if present else StaticTarget.ABSENT,
        required_families=required,
    )


def inspect_binary(binary: Path, arch: Architecture) -> SassReport:
    """Disassemble and classify a built object."""
    return classify(parse_sass(dump_sass(binary)), arch)


def device_code_sha256(binary: Path, timeout_s: float = 120.0) -> str:
    """sha256 over the device ELF images embedded in a binary (`cuobjdump -xelf all`)."""
    import hashlib
    import tempfile

    with tempfile.TemporaryDirectory(prefix="xelf-") as tmp:
        cmd = [find_tool("cuobjdump"), "-xelf", "all", str(binary.resolve())]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, cwd=tmp)
        if proc.returncode != 0:
            raise SassDumpError(f"cuobjdump -xelf failed on {binary.name}: {proc.stderr.strip()[:300]}")
        h = hashlib.sha256()
        for f in sorted(Path(tmp).iterdir()):
            h.update(f.read_bytes())
        return h.hexdigest()
