"""ELF DT_NEEDED reading and /proc/PID/maps parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from ptxcore.gpu.harness.deps import ElfError, forbidden_library, needed_libraries, parse_maps


def test_needed_libraries_of_a_real_shared_object():
    import tvm_ffi.libinfo as li

    needed = needed_libraries(Path(li.find_libtvm_ffi()))
    assert any(n.startswith("libc.so") for n in needed)


def test_non_elf_is_an_error(tmp_path):
    p = tmp_path / "x.so"
    p.write_text("not an elf")
    with pytest.raises(ElfError):
        needed_libraries(p)


def test_parse_maps_keeps_shared_objects_once():
    text = "\n".join([
        "7f00-7f10 r-xp 00000000 08:01 1 /usr/lib/libc.so.6",
        "7f10-7f20 r--p 00001000 08:01 1 /usr/lib/libc.so.6",
        "7f20-7f30 rw-p 00000000 00:00 0 [heap]",
        "7f30-7f40 r-xp 00000000 08:01 2 /opt/nvidia/cu13/lib/libcublasLt.so.13",
        "7f40-7f50 r--p 00000000 08:01 3 /usr/bin/python3.12",
    ])
    libs = parse_maps(text)
    assert libs == ["/usr/lib/libc.so.6", "/opt/nvidia/cu13/lib/libcublasLt.so.13"]
    assert forbidden_library(libs) == ("cuBLASLt", "libcublasLt.so.13")
    assert forbidden_library([*libs, "/x/libcublas.so.13"])[0] == "cuBLAS"


@pytest.mark.parametrize("name,family", [
    ("libcublas.so.12", "cuBLAS"), ("libcudnn_ops.so.9", "cuDNN"), ("flashinfer_kernels.so", "FlashInfer"),
    ("libtorch_cuda.so", "PyTorch CUDA (dispatches to cuBLAS/cuDNN)"),
])
def test_forbidden_families(name, family):
    assert forbidden_library([f"/some/dir/{name}"])[0] == family


def test_allowed_libraries():
    assert forbidden_library(["libcuda.so.1", "libcupti.so.13", "libnvrtc.so.13", "libcudart.so.13"]) is None
