"""Hostile candidates against the real compile stage (nvcc in the sandbox): host files, vendor headers
however spelled, embedded files, compile bombs, huge sources. Each gets the verdict an honest judge gives,
and nothing of a file it must not read appears anywhere in the result."""

from __future__ import annotations

import os
import random
import shutil
import threading
import time
from pathlib import Path

import pytest

from ptxcore.arch import get_architecture
from ptxcore.compile import BuildOptions, CompileCache, compile_candidate
from ptxcore.sandbox import SandboxUnavailableError
from ptxcore.schema import CompileStatus, SandboxMode

from .conftest import VENDOR_MARKER, world_readable_dir

HOPPER = BuildOptions(arch=get_architecture("hopper"))
KERNEL = "__global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n"
STR = "#define STR_(x) #x\n#define STR(x) STR_(x)\n"


def processes_inside(boxes: Path) -> list[int]:
    """PIDs of every process (nvcc, cicc, cc1plus, bwrap) whose mounts come from a sandbox under `boxes`: a
    sandbox's /tmp and scratch are bind mounts of its directory, named in /proc/PID/mountinfo (even once it is
    removed), so builds of other tests, workers or users on the machine never match."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if f" {boxes}/".encode() in (entry / "mountinfo").read_bytes():
                    out.append(int(entry.name))
            except OSError:
                continue
    return out


def assert_rejected(c, *, says: str, never: str) -> None:
    assert c.result.status is CompileStatus.REJECTED, (c.result.status, c.result.reason, c.result.log[:500])
    assert says in c.result.reason and "\n" not in c.result.reason
    assert c.artifact is None and c.sass is None
    assert never not in c.result.model_dump_json()


# ---- host files ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", [
    '#include "/etc/passwd"\n',                           # caught by the source scan
    STR + "#include STR(/etc/passwd)\n",                  # a computed name: only the sandbox sees it
    "#define P </etc/passwd>\n#include P\n",
])
def test_etc_passwd_is_rejected_and_never_quoted(spelling, cache):
    c = compile_candidate("#include <cuda_runtime.h>\n" + spelling + KERNEL, HOPPER, cache)
    assert_rejected(c, says="include outside the allowed headers", never="root:x:0")


def test_a_file_of_api_keys_is_rejected_and_never_quoted(tmp_path, cache):
    keys_dir = world_readable_dir("ptxbench-keys-")  # readable by the sandbox's user, if it could see it
    secret = "sk-proj-" + "".join(random.choices("ABCDEFabcdef0123456789", k=40))
    (keys_dir / "keys.h").write_text(f'OPENAI_API_KEY="{secret}"\nint {secret.replace("-", "_")};\n')
    os.chmod(keys_dir / "keys.h", 0o644)
    try:
        for spelling in (f'#include "{keys_dir}/keys.h"\n', STR + f"#include STR({keys_dir}/keys.h)\n",
                         f'#include "../../../../../..{keys_dir}/keys.h"\n'):
            c = compile_candidate("#include <cuda_runtime.h>\n" + spelling + KERNEL, HOPPER, cache)
            assert_rejected(c, says="include outside the allowed headers", never=secret)
    finally:
        for p in keys_dir.iterdir():
            p.unlink()
        keys_dir.rmdir()


def test_a_visible_system_file_outside_the_headers_is_rejected_unquoted(cache):
    """/usr is mounted (read-only) for the compiler; its non-header files are still not includable."""
    release = Path("/usr/lib/os-release")
    if not release.is_file():
        pytest.skip("no /usr/lib/os-release on this machine")
    line = release.read_text().splitlines()[0]
    c = compile_candidate("#include <cuda_runtime.h>\n" + STR + f"#include STR({release})\n" + KERNEL,
                          HOPPER, cache)
    assert_rejected(c, says="include outside the allowed headers", never=line)


# ---- vendor libraries, however spelled -----------------------------------------------------------------


@pytest.mark.parametrize(("spelling", "library"), [
    ("#define VENDOR <cublas_v2.h>\n#include VENDOR\n", "cuBLAS"),
    ("%:define VENDOR <cudnn.h>\n%:include VENDOR\n", "cuDNN"),
    ("#define VENDOR <cub\\\nlas_v2.h>\n#include VENDOR\n", "cuBLAS"),
    ("#define VENDOR <./cublas_v2.h>\n#include VENDOR\n", "cuBLAS"),
    ("#include_next <cudnn.h>\n", "cuDNN"),
    ("#define VENDOR <flashinfer/prefill.cuh>\n#include VENDOR\n", "FlashInfer"),
    ("#define VENDOR_DIR(f) STR(VROOT/f)\n#include VENDOR_DIR(cublas_v2.h)\n", "cuBLAS"),
    ("#include <cuda.h>\r#include <cublas_v2.h>\r", "cuBLAS"),
    ("#inc\\\nlude <cudnn.h>\n", "cuDNN"),
    ("#include <./cublas_v2.h>\n", "cuBLAS"),
    ('#include "sub/../cudnn.h"\n', "cuDNN"),
    ('#include "sub/../helper.cuh"\n', "include outside"),
])
def test_vendor_headers_are_rejected_whatever_the_spelling(spelling, library, vendor_root, tmp_path):
    source = STR + spelling.replace("VROOT", str(vendor_root)) + KERNEL
    c = compile_candidate(source, HOPPER, CompileCache(tmp_path))
    assert_rejected(c, says=library, never=VENDOR_MARKER)


def test_a_missing_vendor_header_behind_a_macro_is_rejected(cache):
    """On a CPU machine the toolkit has no cuBLAS: the preprocessor's 'not found' names it."""
    c = compile_candidate("#define VENDOR <cublasLt.h>\n#include VENDOR\n" + KERNEL, HOPPER, cache)
    assert_rejected(c, says="cuBLASLt", never="cublasLtCreate")


# ---- file-embedding assembler directives ---------------------------------------------------------------


@pytest.mark.parametrize("spelling", [
    'asm(".incbin \\"/usr/include/stdio.h\\"");\n',
    'asm(".inc" "bin \\"/usr/include/stdio.h\\"");\n',
    'asm("\\x2eincbin \\"/usr/include/stdio.h\\"");\n',
    STR + 'asm(STR(.incbin "/usr/include/stdio.h"));\n',
    '__attribute__((section(".data\\n.incbin \\"/usr/include/stdio.h\\"\\n#"))) int smuggled = 1;\n',
    'asm(R"(.include "/usr/include/stdio.h")");\n',
])
def test_file_embedding_directives_are_rejected(spelling, cache):
    c = compile_candidate("#include <cuda_runtime.h>\n" + spelling + KERNEL, HOPPER, cache)
    assert_rejected(c, says="file-embedding assembler directive", never="extern int printf")


# ---- what nvcc's later passes see ------------------------------------------------------------------
# cudafe++ and cicc preprocess gcc's output again, and gcc compiles cudafe++'s output: a directive that survives
# the first pass, or a line directive naming a file, is obeyed (or quoted) by a pass the include check never saw.

OS_RELEASE = Path("/usr/lib/os-release")
SMUGGLED_INCLUDE = {
    "macro": '#define S # include "../../usr/lib/os-release"\nS\n',
    "splice-digraph": '#define PB %\\ /**/\nPB\n:include "../../usr/lib/os-release"\n',
}


@pytest.mark.skipif(not OS_RELEASE.is_file(), reason="no /usr/lib/os-release on this machine")
@pytest.mark.parametrize("spelling", list(SMUGGLED_INCLUDE.values()), ids=list(SMUGGLED_INCLUDE))
def test_an_include_made_for_the_later_passes_is_rejected_and_never_quoted(spelling, cache):
    c = compile_candidate("#include <cuda_runtime.h>\n" + spelling + KERNEL, HOPPER, cache)
    assert_rejected(c, says="directive survives preprocessing", never=OS_RELEASE.read_text().splitlines()[0])


def test_a_vendor_header_included_by_the_later_passes_is_rejected(vendor_root, tmp_path):
    c = compile_candidate(f'#define S # include "{vendor_root}/cublas_v2.h"\nS\n' + KERNEL, HOPPER,
                          CompileCache(tmp_path))
    assert_rejected(c, says="directive survives preprocessing", never=VENDOR_MARKER)


@pytest.mark.parametrize("spelling", [
    '#define S # define MID "cbin \\"/usr/include/stdio.h\\""\nS\nasm(".in" MID);\n',
    '#ident "x\\"\\n.incbin \\"/usr/include/stdio.h\\"\\n.ident \\"y"\n',
], ids=["smuggled-define", "ident"])
def test_a_file_embedded_through_the_later_passes_is_rejected(spelling, cache):
    c = compile_candidate("#include <cuda_runtime.h>\n" + spelling + KERNEL, HOPPER, cache)
    assert c.result.status is CompileStatus.REJECTED and c.artifact is None, (c.result.status, c.result.reason)
    assert "extern int printf" not in c.result.model_dump_json()


@pytest.mark.skipif(not OS_RELEASE.is_file(), reason="no /usr/lib/os-release on this machine")
def test_a_line_directive_naming_a_host_file_is_rejected_and_never_quoted(cache):
    """gcc quotes the presumed file's line in a warning: the build succeeded and its log showed the file."""
    source = f'#include <cuda_runtime.h>\n#line 1 "{OS_RELEASE}"\n#warning look\n' + KERNEL
    assert_rejected(compile_candidate(source, HOPPER, cache), says="include outside the allowed headers",
                    never=OS_RELEASE.read_text().splitlines()[0])


def test_embed_is_rejected_before_any_build(cache):
    for spelling in ('#embed "/usr/lib/os-release"\n', '%:  embed </usr/lib/os-release>\n',
                     '# /* */ em\\\nbed "x"\n'):
        c = compile_candidate(spelling + KERNEL, HOPPER, cache)
        assert c.result.status is CompileStatus.REJECTED and "#embed" in c.result.reason, spelling
        assert c.result.toolkit_version is None and c.result.cache_key is None  # no build ran


def test_a_file_named_by_a_line_directive_is_in_the_cache_key(vendor_root, tmp_path):
    """An allowed header may be named (its lines are public), but its content shapes the log: it is keyed."""
    helper = vendor_root / "helper.cuh"
    source = f'#line 1 "{helper}"\n#warning look\n' + KERNEL
    cache = CompileCache(tmp_path)
    first = compile_candidate(source, HOPPER, cache)
    assert first.result.status is CompileStatus.COMPILED and "#pragma once" in first.result.log
    helper.write_text("#pragma twice\n" + helper.read_text())
    second = compile_candidate(source, HOPPER, cache)
    assert not second.result.cache_hit and "#pragma twice" in second.result.log
    assert second.result.cache_key != first.result.cache_key


# ---- bombs and sizes -----------------------------------------------------------------------------------

BOMB = "".join(f"#define A{i} {' '.join([f'A{i - 1}'] * 8)}\n" for i in range(1, 12)) + "#define A0 x\nA11\n"


def test_a_preprocessor_bomb_times_out_and_leaves_nothing_behind(tmp_path, monkeypatch):
    cache_root = tmp_path / "cache"
    boxes = world_readable_dir("ptxbench-boxes-") / "sandbox"  # this build's own sandbox parent
    monkeypatch.setenv("PTXBENCH_SANDBOX_DIR", str(boxes))
    seen, done = set(), threading.Event()

    def watch() -> None:
        while not done.wait(0.2):
            seen.update(processes_inside(boxes))

    watcher = threading.Thread(target=watch)
    watcher.start()
    started = time.monotonic()
    try:
        c = compile_candidate(BOMB + KERNEL, BuildOptions(arch=HOPPER.arch, timeout_s=6), CompileCache(cache_root))
    finally:
        done.set()
        watcher.join()
    assert time.monotonic() - started < 30
    assert c.result.status is CompileStatus.COMPILE_ERROR and "timed out after 6 s" in c.result.reason
    assert len(seen) >= 2, "the probe saw the build's processes while they ran"
    assert processes_inside(boxes) == [], "no cicc/cc1plus/nvcc survives"
    assert list(boxes.iterdir()) == [], "the sandbox's directory is removed"
    assert not list(cache_root.glob("build-*")) and not list(cache_root.glob("*/*/result.json"))
    shutil.rmtree(boxes.parent)


def test_the_memory_limit_binds_and_is_part_of_the_cache_key(tmp_path, monkeypatch):
    from ptxcore.compile import stage as stage_module

    tiny = BuildOptions(arch=HOPPER.arch, memory_limit_bytes=96 << 20)
    source = "#include <cuda_runtime.h>\n" + KERNEL + "// memory limit\n"
    c = compile_candidate(source, tiny, CompileCache(tmp_path))
    assert c.result.status is CompileStatus.COMPILE_ERROR and c.artifact is None
    assert "out of memory" in c.result.log or "killed by signal" in c.result.reason
    keys = {stage_module.lookup_key(source, opts, stage_module.toolchain("hopper")) for opts in (tiny, HOPPER)}
    assert len(keys) == 2, "a build with another limit is not served the out-of-memory entry"


def test_a_50_mb_source_is_rejected_at_once(cache):
    started = time.monotonic()
    c = compile_candidate("\n" * (50 << 20), HOPPER, cache)
    assert time.monotonic() - started < 5
    assert c.result.status is CompileStatus.REJECTED and "limit" in c.result.reason


def test_the_source_scan_is_linear_on_blank_lines_and_comment_openers():
    from ptxcore.compile.forbidden import source_rejection

    for source in ("\n" * 400_000, "\n" * (1 << 20 - 1), "/*" * 400_000, '"' * 800_000, "\r" * 900_000):
        started = time.process_time()  # this process's CPU: parallel workers cannot inflate it, as they do wall time
        source_rejection(source)
        assert time.process_time() - started < 5, len(source)


# ---- the sandbox is required ---------------------------------------------------------------------------


def test_without_bwrap_the_stage_raises_instead_of_building_unsandboxed(monkeypatch, tmp_path):
    monkeypatch.setenv("PTXBENCH_BWRAP", "/nonexistent/bwrap")
    with pytest.raises(SandboxUnavailableError):
        compile_candidate("#include <cuda_runtime.h>\n" + KERNEL + "// no bwrap\n", HOPPER, CompileCache(tmp_path))
    assert not list(tmp_path.glob("*/*/result.json"))


def test_the_development_opt_out_is_recorded(monkeypatch, tmp_path, fixtures_dir):
    monkeypatch.setenv("PTXBENCH_UNSANDBOXED", "1")
    c = compile_candidate((fixtures_dir / "kernels" / "syntax_error.cu").read_text(), HOPPER,
                          CompileCache(tmp_path))
    assert c.result.status is CompileStatus.COMPILE_ERROR and c.result.sandbox is SandboxMode.UNSANDBOXED
    assert 'identifier "undeclared_value" is undefined' in c.result.log and str(tmp_path) not in c.result.log
