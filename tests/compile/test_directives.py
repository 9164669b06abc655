"""String literals as the assembler will see them (no nvcc): the directive scan of preprocessed text."""

from __future__ import annotations

import time

import pytest

from ptxcore.compile.directives import concatenated, find_embedding, string_literals


@pytest.mark.parametrize("text", [
    'asm(".incbin \\"/etc/passwd\\"");',
    'asm(".inc" "bin \\"f\\"");',
    'asm(".incl"\n# 12 "/scratch/kernel.cu"\n   "ude \\"f\\"");',
    'asm("\\x2eincbin f");',
    'asm("\\056include f");',
    'asm(R"x(.INCBIN "f")x");',
    'asm(u8R"(.incbin "f")");',
    'int a = 1\'000\'000; asm(".incbin f");',
    "char c = u8'a'; asm(\".incbin f\");",
    'asm(".inc%c0 \\"f\\"" :: "s"(bin));',
    'asm("%c0bin \\"f\\"" :: "s"(&dot_inc));',
    'asm(".macro m x\\n.inc\\\\x \\"f\\"\\n.endm\\nm bin");',
    '__attribute__((section(".text\\n.incbin \\"f\\"\\n#"))) int x;',
    '#ident "x\\"\\n.incbin \\"f\\"\\n.ident \\"y"\nint x;',  # gcc writes #ident text into the assembly
    '#pragma ident ".incbin f"\nint x;',  # pragma lines are read too (only line markers are skipped)
])
def test_embedding_attempts_are_found(text):
    assert find_embedding(text) is not None


@pytest.mark.parametrize("text", [
    'asm volatile("atom.global.inc.u32 %0, [%1], %2;" : "=r"(o) : "l"(p), "r"(n));',
    'asm volatile("wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0}, %1, %2;");',
    '#pragma message("no file is embedded here")\nint x;',
    "const char* s = \"it's fine\"; char q = '\"'; int n = 0x1'FF;",
])
def test_honest_text_passes(text):
    assert find_embedding(text) is None


def test_adjacent_literals_join_and_escapes_decode():
    assert concatenated('f("a" "b"\n# 3 "k.cu"\n "c"); g("d");') == ["abc", "d"]  # markers are skipped
    assert [s for _, _, s in string_literals('x("\\x41\\102\\n");')] == ["AB\n"]


def test_the_scan_is_linear_on_hostile_shapes():
    for text in ('"' * 1_000_000, "'" * 1_000_000, 'R"(' * 200_000, '"\\x' + "f" * 1_000_000 + '"',
                 ('"a"' + " " * 100 + "\n#x\n") * 50_000):
        started = time.process_time()  # this process's CPU: parallel workers cannot inflate it, as they do wall time
        find_embedding(text)
        assert time.process_time() - started < 5, text[:20]
