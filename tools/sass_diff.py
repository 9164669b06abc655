"""Compare the SASS of two kernel sources: are they the same machine code?

    python tools/sass_diff.py OLD.cu NEW.cu [OLD2.cu NEW2.cu ...]

Each file is compiled for sm_90a with the project's flags (through the compile cache) and disassembled
with the project's cuobjdump; instruction addresses, encodings and the anonymous-namespace hash that
nvcc derives from the source are dropped, the rest of `cuobjdump --dump-sass` must match line for line.
Prints IDENTICAL or the first differences per pair, and the per-mnemonic count changes; exit 1 when a
pair differs or does not compile. Used to check that the generated d128 kernels equal the hand-kept ones.
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.sass.tools import find_tool

_NOISE = (
    (re.compile(r"/\*[0-9a-f]{4,}\*/"), ""),  # addresses
    (re.compile(r"/\* 0x[0-9a-f]+ \*/"), ""),  # encodings
    (re.compile(r"_GLOBAL__N__\w+?_kernel_cu_\w{8}"), "NS"),  # anonymous namespace hash
)


def normalized_sass(path: Path) -> list[str]:
    compiled = compile_candidate(path.read_text(), BuildOptions(arch=get_architecture("hopper")), CompileCache())
    if compiled.artifact is None:
        raise ValueError(f"{path}: {compiled.result.status.value}: {compiled.result.log[-500:]}")
    text = subprocess.run(
        [find_tool("cuobjdump"), "--dump-sass", str(compiled.artifact)], capture_output=True, text=True, check=True
    ).stdout
    lines = []
    for line in text.splitlines():
        for pattern, repl in _NOISE:
            line = pattern.sub(repl, line)
        line = line.strip()
        if line and not line.startswith(("code for", "Fatbin", "arch =", "identifier", "host =", "compile_size")):
            lines.append(line)
    return lines


def mnemonics(lines: list[str]) -> Counter:
    return Counter(m.group(1) for line in lines if (m := re.match(r"(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9]+)", line)))


def compare(old: Path, new: Path) -> bool:
    a, b = normalized_sass(old), normalized_sass(new)
    if a == b:
        print(f"{new}: IDENTICAL SASS to {old} ({len(a)} lines)")
        return True
    print(f"{new}: DIFFERENT from {old} ({len(a)} vs {len(b)} lines)")
    print("\n".join(list(difflib.unified_diff(a, b, str(old), str(new), lineterm="", n=0))[:40]))
    ca, cb = mnemonics(a), mnemonics(b)
    changed = {k: (ca[k], cb[k]) for k in sorted(set(ca) | set(cb)) if ca[k] != cb[k]}
    print(f"mnemonic counts (old, new): {changed}")
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="pairs OLD NEW")
    args = parser.parse_args(argv)
    if len(args.files) % 2:
        print("error: give the files in pairs OLD NEW", file=sys.stderr)
        return 2
    ok = True
    for old, new in zip(args.files[::2], args.files[1::2], strict=True):
        try:
            ok &= compare(old, new)
        except (OSError, ValueError, subprocess.CalledProcessError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            ok = False
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
