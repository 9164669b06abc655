"""Pull the kernel out of a model answer: exactly one complete ```cpp (or ```python) block.

No block, an unterminated block (a truncated answer) or several blocks of the expected fence are all
extraction errors: the turn counts, and the feedback says what was wrong.
"""

from __future__ import annotations

import re

from ptxcore.schema import Language

from .types import Extraction

# A fence opens at the start of a line with ``` and an info string, and closes at the next line that
# is exactly ``` (leading spaces allowed, as Markdown does).
_BLOCK = re.compile(
    r"^[ \t]{0,3}```[ \t]*(?P<info>[^\n`]*)\n(?P<body>.*?)^[ \t]{0,3}```[ \t]*$",
    re.MULTILINE | re.DOTALL,
)


def _fence_tag(info: str) -> str:
    return info.strip().split()[0].lower() if info.strip() else ""


def extract_kernel(text: str, language: Language | str = Language.CUDA) -> Extraction:
    """The single block of the language's fence, or an Extraction with code None."""
    fence = Language(language).fence
    bodies = [m.group("body") for m in _BLOCK.finditer(text or "") if _fence_tag(m.group("info")) == fence]
    bodies = [b for b in bodies if b.strip()]
    if len(bodies) == 1:
        return Extraction(code=bodies[0].rstrip() + "\n", fence=fence, blocks_found=1)
    return Extraction(code=None, fence=fence, blocks_found=len(bodies))


def extraction_feedback(extraction: Extraction) -> str:
    """The message for an answer without a usable block."""
    fence = extraction.fence
    what = "CUDA kernel" if fence == "cpp" else "Triton kernel.py"
    if extraction.blocks_found == 0:
        found = f"Could not extract a ```{fence} code block from your response (none found, or it was not closed)."
    else:
        found = (
            f"Your response contains {extraction.blocks_found} ```{fence} code blocks; "
            "exactly one is required, so none was evaluated."
        )
    return f"Status: EXTRACTION_ERROR\n{found}\nPlease provide your complete {what} in a single ```{fence} code block."
