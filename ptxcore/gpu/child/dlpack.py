"""A minimal DLPack producer over a raw pointer (stdlib ctypes only).

The isolated child wraps IPC-mapped device memory into tensors for tvm_ffi (and torch, for the trusted
baseline child) without importing torch or cupy, so that no cuBLAS/cuDNN is loaded into the candidate's
process before it runs.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass, field

KDL_CPU, KDL_CUDA = 1, 2
# DLPack type codes
KDL_INT, KDL_UINT, KDL_FLOAT, KDL_BFLOAT, KDL_BOOL = 0, 1, 2, 4, 6

DTYPES: dict[str, tuple[int, int]] = {
    "float32": (KDL_FLOAT, 32), "float16": (KDL_FLOAT, 16), "bfloat16": (KDL_BFLOAT, 16),
    "float8_e4m3fn": (10, 8), "float8_e5m2": (12, 8),
    "int64": (KDL_INT, 64), "int32": (KDL_INT, 32), "int16": (KDL_INT, 16), "int8": (KDL_INT, 8),
    "uint8": (KDL_UINT, 8), "bool": (KDL_BOOL, 8),
}


def itemsize(dtype: str) -> int:
    return DTYPES[dtype][1] // 8


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int), ("device_id", ctypes.c_int)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int), ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)), ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


_DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", _DELETER)]


@_DELETER
def _noop_deleter(_ptr: int) -> None:  # memory is owned by the RawTensor (or the IPC mapping)
    return None


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]


@dataclass
class RawTensor:
    """A contiguous tensor view of `ptr` that speaks the legacy DLPack protocol.

    Keep the RawTensor alive while any consumer uses the memory (the consumer's deleter is a no-op).
    """

    ptr: int
    shape: tuple[int, ...]
    dtype: str
    device_type: int = KDL_CUDA
    device_id: int = 0
    _keep: list = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if self.dtype not in DTYPES:
            raise ValueError(f"unsupported dtype {self.dtype!r}")

    @property
    def nbytes(self) -> int:
        n = 1
        for s in self.shape:
            n *= s
        return n * itemsize(self.dtype)

    def __dlpack_device__(self) -> tuple[int, int]:
        return (self.device_type, self.device_id)

    def __dlpack__(self, stream: int | None = None, **_kwargs: object) -> object:  # a PyCapsule
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        code, bits = DTYPES[self.dtype]
        managed = DLManagedTensor()
        managed.dl_tensor.data = ctypes.c_void_p(self.ptr)
        managed.dl_tensor.device = DLDevice(self.device_type, self.device_id)
        managed.dl_tensor.ndim = ndim
        managed.dl_tensor.dtype = DLDataType(code, bits, 1)
        managed.dl_tensor.shape = ctypes.cast(shape, ctypes.POINTER(ctypes.c_int64))
        managed.dl_tensor.strides = ctypes.POINTER(ctypes.c_int64)()  # NULL: compact row-major
        managed.dl_tensor.byte_offset = 0
        managed.deleter = _noop_deleter
        self._keep.append((shape, managed))
        return _capsule_new(ctypes.addressof(managed), b"dltensor", None)
