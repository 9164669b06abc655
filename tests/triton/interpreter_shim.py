"""Two fixes to Triton 3.6's CPU interpreter (TRITON_INTERPRET=1), test-only, for numerics of our kernels:

- with NumPy >= 2.3 `int()` of the interpreter's 1-element scalar arrays raises (used by `tl.range` bounds);
- bf16 operands reach `np.matmul` as their raw uint16 bits, so `tl.dot` on bf16 multiplies integers.

Both are patched at the interpreter's own seams; on the GPU neither path exists. Import before any kernel
module is imported (the @triton.jit decorators read TRITON_INTERPRET when they run).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import triton.language as tl
import triton.runtime.interpreter as interp

_patch_lang_tensor = interp._patch_lang_tensor
_create_dot = interp.InterpreterBuilder.create_dot


def _patched_lang_tensor(tensor: Any, scope: Any) -> None:  # the interpreter's own (untyped) objects
    _patch_lang_tensor(tensor, scope)
    scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))


def _as_fp32(handle: interp.TensorHandle) -> interp.TensorHandle:
    if handle.dtype.scalar == tl.bfloat16:
        return interp.TensorHandle((handle.data.astype(np.uint32) << 16).view(np.float32), tl.float32)
    return handle


def _create_dot_bf16(self: interp.InterpreterBuilder, a: interp.TensorHandle, b: interp.TensorHandle,
                     d: interp.TensorHandle, *args: Any) -> interp.TensorHandle:
    return _create_dot(self, _as_fp32(a), _as_fp32(b), d, *args)


interp._patch_lang_tensor = _patched_lang_tensor
interp.InterpreterBuilder.create_dot = _create_dot_bf16
