"""Forbidden-source check: library use is found in code, not in comments or unrelated strings."""

from __future__ import annotations

import pytest

from ptxcore.compile import find_forbidden, strip_comments


@pytest.mark.parametrize(
    ("source", "library"),
    [
        ("#include <cublas_v2.h>\n", "cuBLAS"),
        ('#  include "cublasLt.h"\n', "cuBLASLt"),
        ("#include <cudnn.h>\n", "cuDNN"),
        ("#include <cudnn_frontend.h>\n", "cuDNN"),
        ("#include <flashinfer/attention/prefill.cuh>\n", "FlashInfer"),
        ("#include <ATen/cuda/CUDABlas.h>\n", "PyTorch"),
        ('void* h = dlopen("libcublasLt.so.13", RTLD_NOW);\n', "libcublas"),
        ('#pragma comment(lib, "cudnn")\n', "cudnn"),
    ],
)
def test_forbidden_uses_are_found(source, library):
    found = find_forbidden(source)
    assert found is not None and library in found.library
    assert "forbidden library use" in found.message()


@pytest.mark.parametrize(
    "source",
    [
        "// #include <cublas_v2.h>\n#include <cuda_bf16.h>\n",
        "/* we do not use\n#include <cudnn.h>\n */ int x;\n",
        '#include <cuda.h>\nconst char* s = "faster than cuBLAS";\n',
        "#include <cuda/barrier>\n#include <cute/tensor.hpp>\n",
    ],
)
def test_clean_sources_pass(source):
    assert find_forbidden(source) is None


def test_strip_comments_keeps_strings_and_line_count():
    src = 'a // x\nb /* y\n z */ c "// not a comment" \'/\'\n'
    out = strip_comments(src)
    assert out.count("\n") == src.count("\n")
    assert '"// not a comment"' in out and "x" not in out and "y" not in out and "c" in out
