"""The rotating buffer pool: dedicated (non-pooled) CuPy allocations the candidate child maps by CUDA IPC.

Each tensor of a slot is its own cudaMalloc, so an IPC handle exposes exactly that buffer and nothing
the judge keeps (reference outputs, pristine inputs and the caching allocator's pool stay private).
A fresh slot per trial means the candidate sees new pointers in every trial.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING

from ptxcore.gpu.harness.workloads import TensorInfo, WorkloadSpec

if TYPE_CHECKING:
    import cupy
    import torch

POISON_BYTE = 0xFF  # all-ones bit pattern: NaN in bf16/fp16/fp32, -1 in integers


@dataclass
class SharedBuffer:
    """One IPC-exportable device allocation and a torch view of it."""

    info: TensorInfo
    memory: cupy.cuda.Memory
    tensor: torch.Tensor
    """A view of `memory`."""
    handle: bytes

    @property
    def ptr(self) -> int:
        return int(self.memory.ptr)


def _torch_view(cupy: ModuleType, torch: ModuleType, mem: cupy.cuda.Memory, info: TensorInfo) -> torch.Tensor:
    raw = cupy.ndarray((info.nbytes,), dtype=cupy.uint8, memptr=cupy.cuda.MemoryPointer(mem, 0))
    return torch.from_dlpack(raw).view(getattr(torch, info.dtype)).view(info.shape)


@dataclass
class SharedSlot:
    """All tensors of one workload in shared buffers (scalars travel by value)."""

    spec: WorkloadSpec
    buffers: dict[str, SharedBuffer] = field(default_factory=dict)

    @classmethod
    def allocate(cls, spec: WorkloadSpec) -> SharedSlot:
        import cupy
        import torch

        slot = cls(spec)
        for t in spec.tensors:
            if t.shape is None:
                continue
            mem = cupy.cuda.Memory(max(t.nbytes, 1))
            handle = bytes(cupy.cuda.runtime.ipcGetMemHandle(mem.ptr))
            slot.buffers[t.name] = SharedBuffer(t, mem, _torch_view(cupy, torch, mem, t), handle)
        return slot

    def descriptor(self) -> list[dict]:
        """What the child needs to map the slot: per tensor its IPC handle, shape and dtype."""
        out = []
        for t in self.spec.tensors:
            if t.shape is None:
                out.append({"name": t.name, "handle": None, "scalar": t.scalar})
            else:
                out.append({"name": t.name, "handle": self.buffers[t.name].handle.hex(),
                            "shape": list(t.shape), "dtype": t.dtype})
        return out

    def load_inputs(self, inputs: dict, perm: torch.Tensor | None = None) -> None:
        """Copy the pristine inputs in, permuted along the batch (perm: int64 tensor) where they batch."""
        import torch

        for t in self.spec.inputs:
            if t.shape is None:
                continue
            dst, src = self.buffers[t.name].tensor, inputs[t.name]
            if perm is not None and t.batch_dims:
                nb = t.batch_size
                torch.index_select(src.reshape(nb, -1), 0, perm, out=dst.view(nb, -1))
            else:
                dst.copy_(src)

    def poison_outputs(self) -> None:
        import cupy

        for t in self.spec.outputs:
            buf = self.buffers[t.name]
            cupy.cuda.runtime.memsetAsync(buf.ptr, POISON_BYTE, t.nbytes, 0)

    def release(self) -> None:
        self.buffers.clear()
