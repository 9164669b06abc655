"""Kernel text -> BM25 tokens: comments stripped, identifiers and numbers kept (inline-PTX strings included).

Comments are found by Pygments' C++ lexer (a maintained lexer knows string literals, raw strings and
line continuations; a hand-written stripper would have to). Preprocessor lines are kept: `#include`
and `#define` names are strong signals of which primitives a kernel uses. Tokens: identifiers and
digit runs, lower-cased; one-letter identifiers are dropped (loop indices say nothing). Text inside
string literals is kept, because inline PTX lives there (`wgmma.mma_async.sync.aligned.m64n128k16`
gives wgmma, mma_async, sync, aligned, m64n128k16).
"""

from __future__ import annotations

import re

from pygments.lexers import CppLexer
from pygments.token import Comment

_TOKEN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*|\d+")
_LEXER = CppLexer(stripnl=False, ensurenl=False)
_KEPT_COMMENT = (Comment.Preproc, Comment.PreprocFile)


def strip_comments(source: str) -> str:
    """The source without // and /* */ comments (each replaced by one space or its newline)."""
    out: list[str] = []
    for kind, text in _LEXER.get_tokens(source):
        if kind in Comment and not any(kind in keep for keep in _KEPT_COMMENT):
            out.append("\n" if text.endswith("\n") else " ")
        else:
            out.append(text)
    return "".join(out)


def tokenize(source: str) -> list[str]:
    """BM25 tokens of a kernel, in source order (repeats kept: they are term frequencies)."""
    tokens = (t.lower() for t in _TOKEN.findall(strip_comments(source)))
    return [t for t in tokens if len(t) > 1 or t.isdigit()]
