"""What the preprocessor opened (no nvcc): line markers, failed-pass diagnostics, vendor paths."""

from __future__ import annotations

from ptxcore.compile.includes import check_entered, check_log, named_files
from ptxcore.compile.toolchain import IncludeRoot

ROOTS = (IncludeRoot("cuda", "/opt/ptxbench-fake-cuda/include"),
         IncludeRoot("system", "/usr/include"))
II = '''# 0 "/scratch/kernel.cu"
# 0 "<built-in>"
# 0 "<command-line>"
# 1 "/usr/include/stdc-predef.h" 1 3 4
# 1 "/opt/ptxbench-fake-cuda/bin/../include/cuda_runtime.h" 1
int x;
# 12 "/scratch/kernel.cu" 2
'''


def test_named_files_are_every_file_a_marker_names():
    assert named_files(II) == {"/scratch/kernel.cu", "<built-in>", "<command-line>", "/usr/include/stdc-predef.h",
                               "/opt/ptxbench-fake-cuda/bin/../include/cuda_runtime.h"}
    assert "/usr/lib/os-release" in named_files(II + '# 3 "/usr/lib/os-release"\nint y;\n')  # a #line, no flag


def test_allowed_files_pass_and_anything_else_rejects():
    assert check_entered(named_files(II), ROOTS) is None
    outside = II + '# 1 "/usr/lib/os-release" 1\n'
    assert "include outside" in check_entered(named_files(outside), ROOTS)
    forged = II + '# 7 "relative.h" 1\n'  # a GNU line directive the candidate wrote: never hides, only adds
    assert "include outside" in check_entered(named_files(forged), ROOTS)
    scratch = II + '# 1 "/scratch/keep/kernel.cpp4.ii" 1\n'
    assert "include outside" in check_entered(named_files(scratch), ROOTS)


def test_vendor_paths_under_an_allowed_root_are_named():
    vendor = II + '# 1 "/opt/ptxbench-fake-cuda/include/cublas_v2.h" 1\n'
    assert "cuBLAS" in check_entered(named_files(vendor), ROOTS)
    torch = II + '# 1 "/usr/include/torch/csrc/api.h" 1\n'
    assert "PyTorch" in check_entered(named_files(torch), ROOTS)


def test_failed_pass_diagnostics():
    missing_vendor = "/scratch/kernel.cu:3:10: fatal error: cudnn_frontend.h: No such file or directory\n"
    assert "cuDNN" in check_log(missing_vendor, ROOTS)
    missing_abs = "/scratch/kernel.cu:3:10: fatal error: /home/u/.env: No such file or directory\n"
    assert "include outside" in check_log(missing_abs, ROOTS)
    quoted_elsewhere = ("In file included from /scratch/kernel.cu:2:\n/usr/share/doc/x.txt:1:3: warning: "
                        "missing terminating ' character\n")
    assert "include outside" in check_log(quoted_elsewhere, ROOTS)
    ordinary = "/scratch/kernel.cu:3:10: fatal error: my_helpers.h: No such file or directory\n"
    assert check_log(ordinary, ROOTS) is None
    edg = "/opt/ptxbench-fake-cuda/include/cuda/barrier(12): error: bad\n"
    assert check_log(edg, ROOTS) is None


def test_logs_lose_sandbox_and_host_specific_paths():
    import dataclasses

    from ptxcore.compile.nvcc import scrub_log
    from ptxcore.compile.toolchain import toolchain

    tc = toolchain("hopper")
    tc = dataclasses.replace(tc, include_roots=(*tc.include_roots, IncludeRoot("tvm_ffi", "/home/u/venv/tvm_ffi/include")))
    log = ("/scratch/kernel.cu(3): error: x\n/scratch/keep/kernel.ptx, line 4; error\n"
           "/home/u/venv/tvm_ffi/include/tvm/ffi/any.h(9): warning: y\n")
    out = scrub_log(log, tc)
    assert "/scratch" not in out and "/home/u" not in out
    assert "kernel.cu(3)" in out and "kernel.ptx, line 4" in out and "<tvm_ffi>/tvm/ffi/any.h(9)" in out
