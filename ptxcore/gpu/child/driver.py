"""A few CUDA driver API calls through ctypes (stdlib only: the candidate child imports no torch/cupy).

Used by the isolated child (context, IPC mapping, synchronisation, persisting-L2 reset) and by
`gpu_available()` on any machine.
"""

from __future__ import annotations

import ctypes
from functools import lru_cache

CUDA_SUCCESS = 0
CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1
IPC_HANDLE_BYTES = 64


class CudaDriverError(RuntimeError):
    """A driver call failed; `code` is the CUresult."""

    def __init__(self, call: str, code: int, text: str) -> None:
        super().__init__(f"{call} failed: {text} (CUresult {code})")
        self.call, self.code, self.text = call, code, text


class CUipcMemHandle(ctypes.Structure):
    _fields_ = [("reserved", ctypes.c_char * IPC_HANDLE_BYTES)]


@lru_cache(maxsize=1)
def _lib() -> ctypes.CDLL | None:
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            return ctypes.CDLL(name)
        except OSError:
            continue
    return None


def _sym(name: str, *fallbacks: str):
    lib = _lib()
    if lib is None:
        raise CudaDriverError(name, -1, "libcuda not found")
    for n in (name, *fallbacks):
        try:
            return getattr(lib, n)
        except AttributeError:
            continue
    raise CudaDriverError(name, -1, "symbol not found in libcuda")


def error_text(code: int) -> str:
    try:
        fn = _sym("cuGetErrorString")
    except CudaDriverError:
        return f"CUresult {code}"
    out = ctypes.c_char_p()
    if fn(ctypes.c_int(code), ctypes.byref(out)) != CUDA_SUCCESS or not out.value:
        return f"CUresult {code}"
    return out.value.decode(errors="replace")


def check(call: str, code: int) -> None:
    if code != CUDA_SUCCESS:
        raise CudaDriverError(call, code, error_text(code))


def devices() -> list[tuple[str, tuple[int, int]]]:
    """(name, compute capability) of every device the driver shows this process; [] without a driver."""
    if _lib() is None:
        return []
    try:
        check("cuInit", _sym("cuInit")(0))
        count = ctypes.c_int(0)
        check("cuDeviceGetCount", _sym("cuDeviceGetCount")(ctypes.byref(count)))
        out = []
        for i in range(count.value):
            dev, major, minor = ctypes.c_int(0), ctypes.c_int(0), ctypes.c_int(0)
            check("cuDeviceGet", _sym("cuDeviceGet")(ctypes.byref(dev), i))
            check("cuDeviceGetAttribute", _sym("cuDeviceGetAttribute")(ctypes.byref(major), 75, dev))
            check("cuDeviceGetAttribute", _sym("cuDeviceGetAttribute")(ctypes.byref(minor), 76, dev))
            name = ctypes.create_string_buffer(256)
            check("cuDeviceGetName", _sym("cuDeviceGetName")(name, 256, dev))
            out.append((name.value.decode(errors="replace"), (major.value, minor.value)))
        return out
    except CudaDriverError:
        return []


def preload_global() -> None:
    """Make libcuda's symbols global in this process: a candidate built once, on a CPU worker without a
    driver (no -lcuda), resolves its driver calls (cuTensorMapEncodeTiled, ...) against it when loaded."""
    for name in ("libcuda.so.1", "libcuda.so"):
        try:
            ctypes.CDLL(name, mode=ctypes.RTLD_GLOBAL)
            return
        except OSError:
            continue
    raise CudaDriverError("dlopen", -1, "libcuda not found")


def driver_version() -> str:
    """CUDA driver API version, e.g. 13000 -> '13.0'."""
    v = ctypes.c_int(0)
    check("cuDriverGetVersion", _sym("cuDriverGetVersion")(ctypes.byref(v)))
    return f"{v.value // 1000}.{(v.value % 1000) // 10}"


def init_primary_context(device: int) -> None:
    """cuInit, retain the device's primary context (the runtime API's) and make it current."""
    check("cuInit", _sym("cuInit")(0))
    dev = ctypes.c_int(0)
    check("cuDeviceGet", _sym("cuDeviceGet")(ctypes.byref(dev), device))
    ctx = ctypes.c_void_p()
    check("cuDevicePrimaryCtxRetain", _sym("cuDevicePrimaryCtxRetain")(ctypes.byref(ctx), dev))
    check("cuCtxSetCurrent", _sym("cuCtxSetCurrent")(ctx))


def synchronize() -> None:
    """cuCtxSynchronize: raises CudaDriverError with the sticky error of a faulting kernel."""
    check("cuCtxSynchronize", _sym("cuCtxSynchronize")())


def ipc_open(handle: bytes) -> int:
    """Map another process's allocation; returns the device pointer in this context."""
    if len(handle) != IPC_HANDLE_BYTES:
        raise ValueError(f"IPC handle must be {IPC_HANDLE_BYTES} bytes, got {len(handle)}")
    h = CUipcMemHandle()
    ctypes.memmove(ctypes.addressof(h), handle, IPC_HANDLE_BYTES)
    ptr = ctypes.c_uint64(0)
    fn = _sym("cuIpcOpenMemHandle_v2", "cuIpcOpenMemHandle")
    check("cuIpcOpenMemHandle", fn(ctypes.byref(ptr), h, ctypes.c_uint(CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)))
    return ptr.value


def ipc_close(ptr: int) -> None:
    check("cuIpcCloseMemHandle", _sym("cuIpcCloseMemHandle")(ctypes.c_uint64(ptr)))


def mem_alloc(nbytes: int) -> int:
    ptr = ctypes.c_uint64(0)
    check("cuMemAlloc", _sym("cuMemAlloc_v2", "cuMemAlloc")(ctypes.byref(ptr), ctypes.c_size_t(nbytes)))
    return ptr.value


def memset_d8_async(ptr: int, value: int, nbytes: int, stream: int = 0) -> None:
    fn = _sym("cuMemsetD8Async")
    check("cuMemsetD8Async", fn(ctypes.c_uint64(ptr), ctypes.c_ubyte(value), ctypes.c_size_t(nbytes),
                                 ctypes.c_void_p(stream)))


CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06


def persisting_l2_limit() -> int:
    """Bytes of L2 set aside for persisting accesses in the current context (0: nothing can persist)."""
    value = ctypes.c_size_t(0)
    check("cuCtxGetLimit", _sym("cuCtxGetLimit")(ctypes.byref(value), ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)))
    return value.value


def clear_persisting_l2() -> bool:
    """If L2 is set aside for persisting accesses: reset those lines and the set-aside to 0.
    Returns whether anything had to be reset (a plain query otherwise: no GPU work). A fresh context on the
    H200 (driver 580) does not start at 0, so the child clears it once before the candidate runs."""
    if persisting_l2_limit() == 0:
        return False
    reset_persisting_l2()
    check("cuCtxSetLimit", _sym("cuCtxSetLimit")(ctypes.c_int(CU_LIMIT_PERSISTING_L2_CACHE_SIZE), ctypes.c_size_t(0)))
    return True


def reset_persisting_l2() -> None:
    """Return every persisting L2 line to normal (a candidate may not keep data hot across calls)."""
    check("cuCtxResetPersistingL2Cache", _sym("cuCtxResetPersistingL2Cache")())
