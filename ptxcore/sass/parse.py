"""Parse `cuobjdump --dump-sass` text into per-function instruction lists. Pure text processing."""

from __future__ import annotations

import re
from dataclasses import dataclass

_FUNCTION = re.compile(r"^\s*Function\s*:\s*(\S+)")
# `/*0060*/   @!P0 HGMMA.64x8x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0 ;   /* 0x... */`
_INSTRUCTION = re.compile(
    r"^\s*/\*(?P<addr>[0-9a-fA-F]+)\*/\s+(?:(?P<pred>@!?U?P[T0-9])\s+)?(?P<opcode>[A-Z][A-Za-z0-9_.]*)(?P<rest>[^;]*);"
)


@dataclass(frozen=True)
class SassInstruction:
    """One executable instruction row."""

    function: str
    address: int
    opcode: str
    text: str

    @property
    def mnemonic(self) -> str:
        return self.opcode.split(".", 1)[0]


def parse_sass(text: str) -> list[SassInstruction]:
    """All executable instruction rows, with the kernel function they belong to."""
    function = ""
    out: list[SassInstruction] = []
    for line in text.splitlines():
        fm = _FUNCTION.match(line)
        if fm:
            function = fm.group(1)
            continue
        im = _INSTRUCTION.match(line)
        if im is None:
            continue
        body = f"{im.group('opcode')}{im.group('rest')}".strip()
        out.append(SassInstruction(function, int(im.group("addr"), 16), im.group("opcode"), body))
    return out
