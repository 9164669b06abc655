# Minimal Triton solution: y = alpha * x + y0. Definition order: inputs (x, y0, alpha), outputs (y).
import torch
import triton
import triton.language as tl


@triton.jit
def _axpy_kernel(x_ptr, y0_ptr, y_ptr, alpha, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    y0 = tl.load(y0_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (alpha * x + y0).to(y_ptr.dtype.element_ty), mask=mask)


def run(x, y0, alpha, y):
    """Writes into the preallocated `y`; allocates nothing."""
    n = y.numel()
    block = 1024
    with torch.cuda.device(x.device):
        _axpy_kernel[(triton.cdiv(n, block),)](x, y0, y, alpha, n, BLOCK=block)
