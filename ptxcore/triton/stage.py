"""The CPU stage for a Triton candidate: the static validator folded into a `CompileResult`.

There is nothing to build on the CPU (Triton compiles at the first launch, on the GPU host, for the launch's
argument types), so the stage is the validator alone: REJECTED with the rule named in one line, COMPILE_ERROR
for a Python syntax error, otherwise COMPILED with empty build fields (the GPU host compiles; its Triton
compile errors come back from the child as COMPILE_ERROR verdicts). The GPU host runs the same function
again before the child imports the file, so a source that skipped the CPU stage meets the same rules.
"""

from __future__ import annotations

import logging

from ptxcore.schema import CompileResult, CompileStatus, text_sha256

from .validate import TritonCheck, validate_triton_source

log = logging.getLogger(__name__)

TRITON_FLAGS = ["triton"]
"""What CompileResult.flags records for a Triton candidate (no nvcc command line)."""


def triton_stage(source: str, arch_key: str) -> tuple[CompileResult, TritonCheck]:
    """Validate kernel.py; the CompileResult the turn records and the full check (jit kernel names)."""
    check = validate_triton_source(source)
    sha = text_sha256(source)
    if check.ok:
        result = CompileResult(status=CompileStatus.COMPILED, source_sha256=sha, arch=arch_key, flags=TRITON_FLAGS)
        return result, check
    status = CompileStatus.COMPILE_ERROR if check.is_syntax_error else CompileStatus.REJECTED
    first = check.first
    assert first is not None
    log_text = "\n".join(v.message() for v in check.violations[:20])
    log.info("triton candidate %s: %s", status.value, first.message())
    result = CompileResult(status=status, source_sha256=sha, arch=arch_key, flags=TRITON_FLAGS,
                           reason=first.message(), log=log_text)
    return result, check
