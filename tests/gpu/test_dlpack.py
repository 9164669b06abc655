"""The stdlib DLPack producer the candidate child uses (exercised here on CPU memory)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from ptxcore.gpu.child.dlpack import KDL_CPU, RawTensor


def test_torch_sees_the_same_memory_with_shape_and_dtype():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = torch.from_dlpack(RawTensor(a.ctypes.data, (3, 4), "float32", device_type=KDL_CPU))
    assert t.shape == (3, 4) and t.dtype == torch.float32
    a[1, 2] = -7.0
    assert t[1, 2].item() == -7.0


def test_bfloat16_round_trip_through_tvm_ffi():
    import tvm_ffi

    src = torch.arange(6, dtype=torch.bfloat16)
    raw = RawTensor(src.data_ptr(), (2, 3), "bfloat16", device_type=KDL_CPU)
    x = tvm_ffi.from_dlpack(raw)
    assert tuple(x.shape) == (2, 3) and str(x.dtype) == "bfloat16"
    back = torch.from_dlpack(x)
    assert torch.equal(back.flatten(), src)


def test_unknown_dtype_is_refused():
    with pytest.raises(ValueError):
        RawTensor(0, (1,), "complex64")
