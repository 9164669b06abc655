"""What nvcc's later passes could be steered by, in preprocessed text: surviving directives and file-embedding
assembler directives.

cudafe++ and cicc preprocess gcc's output (the .ii) again, and gcc compiles cudafe++'s output: a directive that
survives the first pass - made by a macro (`#define S # include "f"`), joined by a line splice, spelled with a
digraph or trigraph, or one gcc passes through (`#ident`) - would be obeyed by a pass the include check never
saw. So every line of the .ii that a preprocessor could read as a directive must be one of gcc's own line
markers or a `#pragma`, and no line may end in a splice (`find_surviving_directive`).

Inline assembly, asm labels and section names are string literals that reach the assembler verbatim, and the
GNU assembler can read files (`.incbin`, `.include`). We read them as the compiler will: every string literal
of the preprocessed text (raw strings included), adjacent literals concatenated, escapes decoded; then look
for those directives and for the ways gas or gcc could spell one at assembly time (gas macros, operand
substitution right before the rest of the name). The sandbox is the guarantee (the assembler sees only public
files); this check turns an attempt into a REJECTED verdict.

The scan is linear: one C-speed search for the next quote, then a bounded match per literal.
"""

from __future__ import annotations

import re

_STRING_BODY = re.compile(r'"([^"\\\n]*(?:\\.[^"\\\n]*)*)"', re.S)
_CHAR_BODY = re.compile(r"'[^'\\\n]*(?:\\.[^'\\\n]*)*'", re.S)
_RAW_OPEN = re.compile(r'R"([^()\\\s]{0,16})\(')
_GAP = re.compile(r"\s*(?:#[^\n]*\n\s*)*")
_ESCAPE = re.compile(r"\\(x[0-9a-fA-F]+|[0-7]{1,3}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)", re.S)
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "v": "\v", "f": "\f", "a": "\a", "b": "\b", "e": "\x1b"}
_CHAR_PREFIXES = {"u8", "u", "U", "L"}
_RAW_PREFIXES = {"R", "u8R", "uR", "UR", "LR"}
FORBIDDEN_DIRECTIVE = re.compile(
    r"\.\s*inc(?:bin|lude)\b"                       # the file-reading directives
    r"|\.inc(?=[%\\])"                              # '.inc' completed by operand or macro substitution
    r"|(?:%[a-zA-Z]?(?:\d+|\[\w+\]))(?:bin|lude)\b"  # operand substitution before the rest of the name
    r"|\.(?:macro|irpc?|altmacro)\b",               # gas macro machinery (not PTX)
    re.IGNORECASE)
_LINE_MARKER = re.compile(r'# \d+ "[^"\\\n\r]*(?:\\[^\n\r][^"\\\n\r]*)*"(?: [1-4])*(?=[\r\n]|\Z)')
_PRAGMA = re.compile(r"#pragma(?:[ \t][^\r\n]*)?")
_DIRECTIVE_START = re.compile(r"(?:^|(?<=[\r\n]))(?:[^\S\r\n]|\x00)*(?:#|%:|\?\?=)")
_REST_OF_LINE = re.compile(r"[^\r\n]*")
_SPLICE = re.compile(r"(?:\\|\?\?/)[^\S\r\n]*(?:[\r\n]|\Z)")
DIRECTIVE_REASON = ("a preprocessor directive survives preprocessing (built by a macro or a line splice, or "
                    "#ident) and nvcc's later passes would obey it; kernels may not build directives")
EMBED_REASON = ("file-embedding assembler directive (.incbin/.include or a macro that builds one) in inline "
                "assembly or a section name; kernels may not embed files")


def _decode(body: str) -> str:
    def one(m: re.Match[str]) -> str:
        esc = m.group(1)
        if esc[0] in "xuU" and len(esc) > 1:
            return chr(min(int(esc[1:], 16), 0x10FFFF))
        if esc[0] in "01234567":
            return chr(int(esc, 8))
        return _SIMPLE.get(esc, esc)

    return _ESCAPE.sub(one, body)


def _prefix(text: str, quote_at: int) -> str:
    """The identifier characters right before a quote, when they form the whole identifier."""
    start = quote_at
    while start > 0 and quote_at - start < 3 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        start -= 1
    if start > 0 and (text[start - 1].isalnum() or text[start - 1] == "_"):
        return "\0"  # part of a longer identifier or number
    return text[start:quote_at]


class _Quotes:
    """Positions of the next quote characters, found with str.find (linear over the whole text)."""

    def __init__(self, text: str) -> None:
        self.text, self.next = text, {'"': -1, "'": -1}

    def find(self, pos: int) -> int:
        """The first quote at or after `pos`, or -1 (a quote with none left is never searched again)."""
        for q, at in self.next.items():
            if at < pos:
                found = self.text.find(q, pos)
                self.next[q] = len(self.text) if found < 0 else found
        first = min(self.next.values())
        return -1 if first >= len(self.text) else first


def find_surviving_directive(text: str) -> str | None:
    """DIRECTIVE_REASON when a later preprocessing pass could read a line of `text` as a directive other than
    gcc's line markers and pragmas, or join two lines with a splice; None otherwise. Linear."""
    if _SPLICE.search(text):
        return DIRECTIVE_REASON
    for m in _DIRECTIVE_START.finditer(text):
        line = _REST_OF_LINE.match(text, m.start()).group(0)  # a CR ends a line too, as some readers take it
        if not (_LINE_MARKER.fullmatch(line) or _PRAGMA.fullmatch(line)):
            return DIRECTIVE_REASON
    return None


def string_literals(text: str) -> list[tuple[int, int, str]]:
    """(start, end, decoded content) of every string literal, in order (gcc's line markers are skipped: their
    file names are no literals; every other line is read, pragmas and #ident included)."""
    out: list[tuple[int, int, str]] = []
    quotes, pos, line_start = _Quotes(text), 0, 0
    while (i := quotes.find(pos)) >= 0:
        newline = text.rfind("\n", pos, i)
        line_start = newline + 1 if newline >= 0 else line_start
        if text.startswith("# ", line_start) and _LINE_MARKER.match(text, line_start):
            end = text.find("\n", i)
            pos = len(text) if end < 0 else end
            continue
        prefix = _prefix(text, i)
        if text[i] == "'":
            char = None if prefix and prefix not in _CHAR_PREFIXES else _CHAR_BODY.match(text, i)
            pos = char.end() if char else i + 1  # no match: a digit separator such as 1'000
            continue
        if prefix in _RAW_PREFIXES and (raw := _RAW_OPEN.match(text, i - 1)):
            close = text.find(f"){raw.group(1)}\"", raw.end())
            end = len(text) if close < 0 else close + len(raw.group(1)) + 2
            out.append((i, end, text[raw.end():close if close >= 0 else len(text)]))
            pos = end
            continue
        body = _STRING_BODY.match(text, i)
        if body is not None:
            out.append((i, body.end(), _decode(body.group(1))))
        pos = body.end() if body is not None else i + 1
    return out


def concatenated(text: str) -> list[str]:
    """Runs of adjacent string literals (separated only by white space or line markers), joined."""
    runs: list[list[str]] = []
    last_end = -1
    for start, end, content in string_literals(text):
        gap = _GAP.match(text, last_end, start) if last_end >= 0 else None
        if gap is not None and gap.end() == start:
            runs[-1].append(content)
        else:
            runs.append([content])
        last_end = end
    return ["".join(parts) for parts in runs]


def find_embedding(text: str) -> str | None:
    """EMBED_REASON when a string of the preprocessed text could make the assembler read a file."""
    for run in concatenated(text):
        if FORBIDDEN_DIRECTIVE.search(run):
            return EMBED_REASON
    return None
