"""Workload tensors: resolved specs, seeded inputs generated on the GPU, and the batch permutation.

Inputs follow the problem extension: i.i.d. normal/uniform draws from `seed`, index structure for GQA
(valid indptr / page indices), and derived inputs (mha_bwd's O and L from the cuDNN forward of the same
Q, K, V). torch is imported inside the functions that need it.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from ptxcore.gpu.child.dlpack import itemsize
from ptxcore.problems import Problem
from ptxcore.schema import ScalarInput, Workload

if TYPE_CHECKING:
    import torch

# Leading axes along which a problem is a batch of independent sub-problems. Permuting them in the
# inputs permutes the outputs the same way, so every call can see fresh data without a new reference.
BATCH_AXES: dict[str, tuple[str, ...]] = {"gemm": ("M",), "attention": ("B", "H")}


@dataclass(frozen=True)
class TensorInfo:
    """One resolved input or output of a workload."""

    name: str
    shape: tuple[int, ...] | None
    dtype: str
    is_output: bool
    batch_dims: int
    """Leading dims permuted together with the batch (0: this tensor is not permuted)."""
    scalar: float | int | bool | None = None

    @property
    def numel(self) -> int:
        n = 1
        for s in self.shape or ():
            n *= s
        return n

    @property
    def nbytes(self) -> int:
        return self.numel * itemsize(self.dtype)

    @property
    def batch_size(self) -> int:
        n = 1
        for s in (self.shape or ())[: self.batch_dims]:
            n *= s
        return n


@dataclass(frozen=True)
class WorkloadSpec:
    """All tensors of a workload in calling order (inputs, then outputs)."""

    problem: str
    workload_uuid: str
    tensors: tuple[TensorInfo, ...]
    batch_size: int
    """Size of the permutable batch (1: no permutation possible)."""

    @property
    def inputs(self) -> tuple[TensorInfo, ...]:
        return tuple(t for t in self.tensors if not t.is_output)

    @property
    def outputs(self) -> tuple[TensorInfo, ...]:
        return tuple(t for t in self.tensors if t.is_output)


def _batch_dims(op_type: str, axis_names: list[str] | None) -> int:
    axes = BATCH_AXES.get(op_type, ())
    if not axes or axis_names is None or tuple(axis_names[: len(axes)]) != axes:
        return 0
    return len(axes)


def resolve_spec(problem: Problem, workload: Workload) -> WorkloadSpec:
    d = problem.definition
    tensors = []
    for is_output, group in ((False, d.inputs), (True, d.outputs)):
        for name, spec in group.items():
            src = workload.inputs.get(name)
            scalar = src.value if isinstance(src, ScalarInput) else None
            tensors.append(TensorInfo(
                name, d.resolve_shape(spec, workload.axes), spec.dtype.value, is_output,
                _batch_dims(d.op_type, spec.shape), scalar,
            ))
    outs = [t for t in tensors if t.is_output]
    batch = outs[0].batch_size if outs and all(t.batch_dims for t in outs) else 1
    if any(t.batch_dims and t.batch_size != batch for t in tensors):
        batch = 1
    if batch == 1:
        tensors = [TensorInfo(t.name, t.shape, t.dtype, t.is_output, 0, t.scalar) for t in tensors]
    return WorkloadSpec(d.name, workload.uuid, tuple(tensors), batch)


def _torch_dtype(torch: ModuleType, dtype: str) -> torch.dtype:
    return getattr(torch, dtype)


def _structure_tensor(torch: ModuleType, problem: Problem, name: str, gen: torch.Generator, device: str
                      ) -> torch.Tensor:
    st = problem.extension.structure
    if st is None:
        raise ValueError(f"{problem.name}: input {name} is 'structure' but the extension has no structure")

    def indptr(lens: list[int]):
        vals = [0]
        for n in lens:
            vals.append(vals[-1] + n)
        return torch.tensor(vals, dtype=torch.int32, device=device)

    if name == "qo_indptr":
        return indptr(st.q_lens if st.q_lens else [1] * len(st.kv_lens))
    if name == "kv_indptr":
        return indptr([-(-n // st.page_size) for n in st.kv_lens] if st.kind != "ragged" else st.kv_lens)
    if name == "kv_indices":
        pages = sum(-(-n // st.page_size) for n in st.kv_lens)
        perm = torch.randperm(st.num_pages, generator=gen, device=device)
        return perm[:pages].to(torch.int32)
    raise ValueError(f"{problem.name}: no structure rule for input {name}")


def generate_inputs(problem: Problem, spec: WorkloadSpec, seed: int, device: str = "cuda") -> dict:
    """Seeded inputs (torch tensors on `device`, scalars as Python values), in definition order."""
    import torch

    gen = torch.Generator(device=device)
    gen.manual_seed(seed)
    out: dict = {}
    derived: list[TensorInfo] = []
    for t in spec.inputs:
        if t.shape is None:
            out[t.name] = t.scalar
            continue
        dist = problem.extension.inputs.get(t.name)
        kind = dist.distribution if dist is not None else "normal"
        if kind == "derived":
            derived.append(t)
        elif kind == "structure":
            out[t.name] = _structure_tensor(torch, problem, t.name, gen, device)
        elif kind == "uniform":
            x = torch.rand(t.shape, generator=gen, device=device, dtype=torch.float32)
            out[t.name] = (x * (dist.high - dist.low) + dist.low).to(_torch_dtype(torch, t.dtype))
        else:
            mean, std = (dist.mean, dist.std) if dist is not None else (0.0, 1.0)
            x = torch.randn(t.shape, generator=gen, device=device, dtype=torch.float32)
            out[t.name] = (x * std + mean).to(_torch_dtype(torch, t.dtype))
    if derived:
        _fill_derived(problem, spec, out, derived)
    return {t.name: out[t.name] for t in spec.inputs}


def _fill_derived(problem: Problem, spec: WorkloadSpec, values: dict, derived: list[TensorInfo]) -> None:
    from ptxcore.gpu.harness.baselines import attention_forward

    sources = {t.name: problem.extension.inputs[t.name].source for t in derived}
    if not all(s.startswith("attention_forward.") for s in sources.values()):
        raise ValueError(f"{problem.name}: unknown derived sources {sorted(set(sources.values()))}")
    o, lse = attention_forward(values["Q"], values["K"], values["V"], problem.is_causal)
    produced = {"O": o, "LSE": lse}
    for t in derived:
        values[t.name] = produced[sources[t.name].split(".", 1)[1]].reshape(t.shape).contiguous()


def allocate_outputs(spec: WorkloadSpec, device: str = "cuda") -> dict:
    import torch

    return {t.name: torch.empty(t.shape, dtype=_torch_dtype(torch, t.dtype), device=device) for t in spec.outputs}


def call_args(spec: WorkloadSpec, values: dict) -> list:
    """Positional arguments in the solution ABI's order: inputs then outputs."""
    return [values[t.name] for t in spec.tensors]
