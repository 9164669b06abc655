"""What nvcc's later passes see (no nvcc): gcc's preprocessed output is preprocessed again by cudafe++ and
cicc, and cudafe++'s output by gcc once more. Every snippet here goes through the real `g++ -E` (the first
pass nvcc runs), then through the gate's checks of that text; a directive that survives the first pass, a
line splice, a file named by a line directive or `#ident` is refused, whatever the spelling."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

import pytest

from ptxcore.compile.directives import DIRECTIVE_REASON, find_embedding, find_surviving_directive
from ptxcore.compile.includes import check_entered, check_log, named_files
from ptxcore.compile.toolchain import IncludeRoot

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++ (nvcc's host compiler)")

ROOTS = (IncludeRoot("cuda", "/opt/ptxbench-fake-cuda/include"), IncludeRoot("system", "/usr/include"))


def preprocess(tmp_path: Path, snippet: str) -> str:
    """`g++ -E` of `snippet` as nvcc's host pass runs it (C++17, GNU extensions), main file /scratch-like."""
    source = tmp_path / "kernel.cu"
    source.write_text(snippet)
    out = subprocess.run(["g++", "-E", "-x", "c++", "-std=c++17", str(source)], capture_output=True, text=True,
                         timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    return out.stdout


# Each builds a directive (or a line the second preprocessor reads as one) that g++ -E leaves in its output.
SURVIVING = [
    ("macro-include", '#define S # include "x.h"\nS\n'),
    ("macro-define", '#define S # define MID "cbin"\nS\nconst char* s = ".in" MID;\n'),
    ("digraph", '#define S %:include "x.h"\nS\n'),
    ("digraph-define", '#define S %: define MID "cbin"\nS\n'),
    ("hash-macro", '#define H #\nH include "x.h"\n'),
    ("after-pragma", '#define S _Pragma("message(\\"hi\\")") # include "x.h"\nS\n'),
    ("splice-digraph", '#define PB %\\ /**/\nPB\n:include "x.h"\n'),
    ("splice-hash", '#define PB #\\ /**/\nPB\ninclude "x.h"\n'),
    ("splice-in-pragma", '_Pragma("message \\\\")\nint y;\n'),
    ("embed", '#define S # embed "x.bin"\nS\n'),
    ("import", '#define S # import "x.h"\nS\n'),
    ("line", '#define S # line 1 "/etc/passwd"\nS\n'),
    ("trigraph", '??=include "x.h"\n'),
    ("trigraph-macro", '#define S ??=include "x.h"\nS\n'),
    ("ident", '#ident "x\\"\\n.incbin \\"/etc/passwd\\"\\n.ident \\"y"\n'),
    ("sccs", '#sccs "x"\n'),
    ("indented", '#define S # include "x.h"\nint a;\n   S\n'),
]


@pytest.mark.parametrize("snippet", [s for _, s in SURVIVING], ids=[i for i, _ in SURVIVING])
def test_a_directive_that_survives_preprocessing_is_refused(snippet, tmp_path):
    assert find_surviving_directive(preprocess(tmp_path, snippet)) == DIRECTIVE_REASON


def test_a_raw_string_line_that_looks_like_a_directive_is_refused(tmp_path):
    """Conservative on purpose: the gate does not trust the later passes to agree on where a raw string ends."""
    text = preprocess(tmp_path, 'const char* s = R"(\n# include "x.h"\n)";\n')
    assert find_surviving_directive(text) == DIRECTIVE_REASON


HONEST = [
    ("headers", "#include <cstdint>\n#include <climits>\nint x = INT_MAX;\n"),
    ("pragma-unroll", "void f(int* p) {\n#pragma unroll 4\n  for (int i = 0; i < 8; ++i) p[i] = i;\n}\n"),
    ("_Pragma", '#define UNROLL _Pragma("unroll")\nvoid f(int* p) { UNROLL for (int i = 0; i < 8; ++i) p[i] = 0; }\n'),
    ("diagnostic", '#pragma GCC diagnostic push\n#pragma GCC diagnostic ignored "-Wunused"\n#pragma GCC diagnostic pop\n'),
    ("hash-mid-line", '#define H #\nint a; H include "x.h"\n'),
    ("hash-in-strings", 'const char* s = "# include \\"x.h\\"";\nchar c = \'#\';\n'),
    ("stringized", '#define STR(x) #x\nconst char* s = STR(a # b);\n'),
    ("line-in-source", "#line 40\nint y;\n"),
]


@pytest.mark.parametrize("snippet", [s for _, s in HONEST], ids=[i for i, _ in HONEST])
def test_what_honest_code_leaves_passes(snippet, tmp_path):
    text = preprocess(tmp_path, snippet)
    assert find_surviving_directive(text) is None
    assert find_embedding(text) is None


def test_ident_text_reaches_the_assembler_and_is_scanned(tmp_path):
    """`#ident` goes through cudafe++ into the host compile, where gcc writes it into the assembly with its
    escapes decoded: a `.incbin` inside it would run. The embedding scan reads every line but line markers."""
    text = preprocess(tmp_path, '#ident "x\\"\\n.incbin \\"/etc/passwd\\"\\n.ident \\"y"\n')
    assert find_embedding(text) is not None
    assert find_embedding('# 1 "kernel.cu"\n#pragma ident "a\\n.incbin \\"f\\""\n') is not None


def test_the_presumed_file_of_every_line_must_be_allowed(tmp_path):
    """gcc's diagnostics quote the line of the file a line directive names (a warning is enough, on a
    successful build), so every file any marker names is judged, not only the ones entered."""
    def named_besides_the_source(snippet: str) -> set[str]:
        return named_files(preprocess(tmp_path, snippet)) - {str(tmp_path / "kernel.cu")}

    host = named_besides_the_source('#line 1 "/usr/lib/os-release"\nint x;\n')
    assert "/usr/lib/os-release" in host and "include outside" in check_entered(host, ROOTS)
    relative = named_besides_the_source('#line 1 "../../usr/lib/os-release"\nint x;\n')
    assert "include outside" in check_entered(relative, ROOTS)
    vendor = named_besides_the_source('# 1 "/opt/ptxbench-fake-cuda/include/cublas_v2.h"\nint x;\n')
    assert "cuBLAS" in check_entered(vendor, ROOTS)
    allowed = named_besides_the_source('#line 1 "/usr/include/stdio.h"\nint x;\n')
    assert "/usr/include/stdio.h" in allowed and check_entered(allowed, ROOTS) is None


@pytest.mark.parametrize("log", [
    "/scratch/../usr/lib/os-release:1:2: warning: #warning hi [-Wcpp]\n    1 | PRETTY_NAME=...\n",
    "/scratch/./../usr/share/doc/x.txt(3): error: expected a declaration\n",
    "In file included from /scratch/../etc/x.h:2,\n                 from /scratch/kernel.cu:3:\n",
])
def test_a_log_located_outside_the_allowed_files_is_refused_after_normalising(log):
    assert "include outside" in check_log(log, ROOTS)


def test_a_log_located_in_the_source_or_allowed_headers_passes():
    log = ("/scratch/kernel.cu(3): warning #177-D: variable \"x\" was declared but never referenced\n"
           "/opt/ptxbench-fake-cuda/include/cuda/barrier(12): warning: y\n"
           "ptxas info    : Used 10 registers, used 0 barriers\n")
    assert check_log(log, ROOTS) is None


def test_the_checks_are_linear_on_hostile_shapes():
    for text in ("#\n" * 1_000_000, " \\\n" * 500_000, "\r#" * 1_000_000, "??=" * 1_000_000,
                 '# 1 "' + "a" * 2_000_000 + '"\n'):
        started = time.monotonic()
        find_surviving_directive(text)
        named_files(text)
        assert time.monotonic() - started < 5, text[:10]


def test_the_host_compile_of_cudafe_output_includes_only_toolkit_and_build_files(tmp_path):
    """cudafe++'s output is preprocessed once more by gcc: its includes must be nvcc's own."""
    from ptxcore.compile.includes import GENERATED_REASON, check_generated

    toolkit = tmp_path / "cuda" / "include"
    (toolkit / "crt").mkdir(parents=True)
    (toolkit / "crt" / "host_runtime.h").write_text("#pragma once\n")
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "kernel.fatbin.c").write_text("")
    (keep / "kernel.cudafe1.stub.c").write_text('#include "crt/host_runtime.h"\n#include "kernel.fatbin.c"\n')
    roots = (IncludeRoot("cuda", str(toolkit)),)
    generated = '# 1 "kernel.cu"\n#include "crt/host_runtime.h"\nint x;\n#include "kernel.cudafe1.stub.c"\n'
    (keep / "kernel.cudafe1.cpp").write_text(generated)
    assert check_generated(keep, roots, 1 << 20) is None
    for smuggled in ('#include "/usr/lib/os-release"', "  # include <../cuda/include/crt/host_runtime.h>",
                     '%:include "missing.h"', '#embed "kernel.fatbin.c"' + "\n#include \"x\\\\y.h\""):
        (keep / "kernel.cudafe1.cpp").write_text(generated + smuggled + "\n")
        assert check_generated(keep, roots, 1 << 20) == GENERATED_REASON, smuggled
    (keep / "kernel.cudafe1.cpp").write_text(generated + "int pad;\n" * 100)
    assert check_generated(keep, roots, 64) == GENERATED_REASON  # too large to read whole: refused


def test_a_failed_build_may_name_an_output_nvcc_had_not_written_yet(tmp_path):
    """The demo's turn-0 kernels fail in ptxas: the stub then includes kernel.fatbin.c, which nvcc never wrote.
    That failed build is a COMPILE_ERROR, not a rejection; anything else is still refused, failed build or not."""
    from ptxcore.compile.includes import GENERATED_REASON, check_generated

    toolkit = tmp_path / "cuda" / "include"
    toolkit.mkdir(parents=True)
    keep = tmp_path / "keep"
    keep.mkdir()
    (keep / "kernel.cudafe1.stub.c").write_text('#include "kernel.fatbin.c"\n')
    roots = (IncludeRoot("cuda", str(toolkit)),)
    assert check_generated(keep, roots, 1 << 20) == GENERATED_REASON  # a built library must have it
    assert check_generated(keep, roots, 1 << 20, failed=True) is None
    for smuggled in ('#include "/usr/lib/os-release"', '#include "../kernel.fatbin.c"', '#include "missing.h"'):
        (keep / "kernel.cudafe1.stub.c").write_text(smuggled + "\n")
        assert check_generated(keep, roots, 1 << 20, failed=True) == GENERATED_REASON, smuggled
