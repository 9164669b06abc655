"""The Triton candidate rules: names, one-line descriptions and the allow/deny tables the validator applies.

PTXBench's own Triton rules (facts from its validator): no CuTe/CUTLASS imports, `import torch` without an
alias, no `from torch import ...`, no torch call other than `torch.cuda.*` (`torch.empty` only inside a
function registered with `triton.set_allocator`), no tensor compute methods, no `@` operator, no dynamic
imports, no rebinding of `torch`/`triton`, a `run(...)` entry point and a real `@triton.jit` kernel.

We close what it leaves open with allow-lists instead of deny-lists: only a handful of modules may be imported,
`torch` only for metadata, a few `torch.cuda` queries and the descriptor allocator, `triton` only through its
kernel-writing API; a name must be defined by the file, imported, or one of a few builtins; an attribute of a
value (a tensor, a device, a launched kernel, a string) must be on the host list (metadata, views, container
methods) or, inside @triton.jit code, on the list of triton.language's tensor, descriptor and dtype members; the
module's top level only imports, defines functions and binds constants. Everything here is data; the checker
is `ptxcore.triton.validate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Rule(str, Enum):
    """A named rule; the value is what the model sees in its feedback."""

    SYNTAX = "syntax"
    TOO_LARGE = "source-too-large"
    CUTLASS_IMPORT = "cutlass-import"
    TORCH_ALIAS = "torch-alias-import"
    FROM_TORCH = "from-torch-import"
    FORBIDDEN_MODULE = "forbidden-module"
    IMPORT_NOT_ALLOWED = "import-not-allowed"
    DYNAMIC_IMPORT = "dynamic-import"
    TORCH_COMPUTE = "torch-compute"
    TENSOR_METHOD = "tensor-compute-method"
    TENSOR_ASSIGNMENT = "tensor-assignment"
    ALLOCATOR = "torch-empty-outside-allocator"
    MATMUL_OPERATOR = "matmul-operator"
    SIDE_STREAM = "side-stream"
    CUDA_GRAPH = "cuda-graph"
    TRITON_INTERNALS = "triton-internals"
    REFLECTION = "reflection"
    CODE_EXECUTION = "code-execution"
    FILE_ACCESS = "file-access"
    MONKEY_PATCH = "monkey-patch"
    MODULE_REBIND = "module-rebinding"
    MODULE_AS_VALUE = "module-as-value"
    NAME_NOT_ALLOWED = "name-not-allowed"
    ATTRIBUTE_NOT_ALLOWED = "attribute-not-allowed"
    CLASS_DEFINITION = "class-definition"
    IMPORT_TIME = "import-time-code"
    NO_RUN = "no-run"
    NO_TRITON_IMPORT = "no-triton-import"
    NO_JIT = "no-jit-kernel"
    NO_LAUNCH = "no-kernel-launch"


RULE_DESCRIPTIONS: dict[Rule, str] = {
    Rule.SYNTAX: "kernel.py must be valid Python",
    Rule.TOO_LARGE: "kernel.py must stay under the size limit",
    Rule.CUTLASS_IMPORT: "no CuTe DSL / CUTLASS imports",
    Rule.TORCH_ALIAS: "import torch without an alias (import torch)",
    Rule.FROM_TORCH: "no `from torch ... import ...`",
    Rule.FORBIDDEN_MODULE: "no ctypes, os, sys, subprocess, threading, gc, inspect, importlib, builtins, ...",
    Rule.IMPORT_NOT_ALLOWED: "only torch, triton (its kernel API), math, typing and __future__ may be imported",
    Rule.DYNAMIC_IMPORT: "no __import__ / importlib",
    Rule.TORCH_COMPUTE: "torch only for metadata (dtypes, devices) and a few torch.cuda queries; no torch compute",
    Rule.TENSOR_METHOD: "no tensor compute or copy methods (matmul, softmax, copy_, clone, to, item, ...) outside @triton.jit",
    Rule.TENSOR_ASSIGNMENT: "no item assignment into tensors on the host (a torch copy kernel); write with tl.store",
    Rule.ALLOCATOR: "torch.empty only inside the allocator registered with triton.set_allocator",
    Rule.MATMUL_OPERATOR: "no `@` operator (use tl.dot)",
    Rule.SIDE_STREAM: "no CUDA streams of your own (torch.cuda.Stream, torch.cuda.stream, set_stream)",
    Rule.CUDA_GRAPH: "no CUDA graphs (torch.cuda.graph, CUDAGraph, make_graphed_callables)",
    Rule.TRITON_INTERNALS: "triton only through its kernel API (jit, autotune, Config, heuristics, cdiv, "
                           "next_power_of_2, set_allocator, triton.language, TensorDescriptor)",
    Rule.REFLECTION: "no getattr/setattr/delattr/vars/globals/locals/dir, dunder attributes or __builtins__",
    Rule.CODE_EXECUTION: "no eval / exec / compile / breakpoint / help / exit",
    Rule.FILE_ACCESS: "no file access (open, input)",
    Rule.MONKEY_PATCH: "no attribute writes or deletes (no monkey-patching)",
    Rule.MODULE_REBIND: "do not rebind an imported module's name",
    Rule.MODULE_AS_VALUE: "use imported modules only through their attributes (no aliasing by assignment)",
    Rule.NAME_NOT_ALLOWED: "use only names this file defines or imports and the builtins range, len, min, max, "
                           "abs, int, float, bool, str, tuple, list, dict, set, isinstance, enumerate, zip, "
                           "print, ... (not type, object, super, format, hasattr); do not rebind a builtin",
    Rule.ATTRIBUTE_NOT_ALLOWED: "on values only metadata and views (shape, dtype, device, stride, numel, "
                                "data_ptr, view, reshape, contiguous, ...) and list/dict methods; in @triton.jit "
                                "code only triton.language tensor, descriptor and dtype members",
    Rule.CLASS_DEFINITION: "no classes: the module defines functions and constants only",
    Rule.IMPORT_TIME: "the module's top level only imports, defines functions (decorated with triton.jit, "
                      "autotune, heuristics) and binds constants; nothing else runs at import",
    Rule.NO_RUN: "define a module-level `def run(...)` entry point",
    Rule.NO_TRITON_IMPORT: "import triton",
    Rule.NO_JIT: "define at least one real @triton.jit kernel",
    Rule.NO_LAUNCH: "run(...) must launch a @triton.jit kernel (kernel[grid](...))",
}

MAX_SOURCE_CHARS = 200_000
"""Longer kernel.py files are refused before parsing (no legitimate kernel comes close)."""

ALLOWED_IMPORTS: frozenset[str] = frozenset({
    "torch", "triton", "triton.language", "triton.language.extra", "triton.language.extra.cuda",
    "triton.language.extra.libdevice", "triton.language.extra.cuda.libdevice", "triton.language.math",
    "triton.tools", "triton.tools.tensor_descriptor", "math", "typing", "__future__",
})
"""Modules an `import` / `from ... import` may name."""

FORBIDDEN_MODULES: dict[str, str] = {
    "ctypes": "raw native calls and memory", "cffi": "raw native calls", "os": "process and file system access",
    "sys": "interpreter state (sys.modules)", "subprocess": "child processes", "threading": "threads",
    "_thread": "threads", "multiprocessing": "child processes", "concurrent": "threads and processes",
    "asyncio": "background tasks", "signal": "signal handlers", "gc": "garbage-collector introspection",
    "inspect": "frame and code introspection", "importlib": "dynamic imports", "builtins": "builtin patching",
    "types": "code and function objects", "pickle": "arbitrary object construction", "marshal": "code objects",
    "socket": "network", "shutil": "file system", "pathlib": "file system", "io": "file access",
    "tempfile": "file system", "mmap": "raw memory", "weakref": "finalizers", "atexit": "exit handlers",
    "cupy": "another GPU library", "numba": "another GPU compiler", "pycuda": "raw CUDA driver",
    "cuda": "raw CUDA bindings", "tvm_ffi": "the judge's binding", "ptxcore": "the judge itself",
    "operator": "attribute getters by string", "functools": "caching of results across calls",
}
"""Named with the reason; other modules outside ALLOWED_IMPORTS get the generic import rule."""

CUTLASS_MODULES = ("cutlass", "cute", "cutlass_cppgen", "cuda.cooperative")
"""CuTe DSL / CUTLASS Python packages (PTXBench's rule)."""

TORCH_DTYPES = frozenset({
    "float16", "half", "bfloat16", "float32", "float", "float64", "double", "float8_e4m3fn", "float8_e5m2",
    "float8_e4m3fnuz", "float8_e5m2fnuz", "int8", "uint8", "int16", "int32", "int", "int64", "long", "bool",
})
TORCH_METADATA = frozenset({f"torch.{n}" for n in TORCH_DTYPES} | {
    "torch.Tensor", "torch.dtype", "torch.device", "torch.Size", "torch.finfo", "torch.iinfo",
})
"""torch attributes that are metadata, not compute (references and calls both allowed)."""

TORCH_CUDA_ALLOWED = frozenset(f"torch.cuda.{n}" for n in (
    "is_available", "device_count", "current_device", "set_device", "device", "get_device_properties",
    "get_device_capability", "get_device_name", "synchronize", "current_stream",
))
"""torch.cuda queries and the device context manager."""

TORCH_SIDE_STREAM = frozenset(f"torch.cuda.{n}" for n in (
    "Stream", "stream", "set_stream", "ExternalStream", "StreamContext",
))
TORCH_CUDA_GRAPH = frozenset(f"torch.cuda.{n}" for n in (
    "graph", "graphs", "CUDAGraph", "make_graphed_callables", "graph_pool_handle",
))

TORCH_ALLOCATOR_CALL = "torch.empty"
TRITON_SET_ALLOCATOR = "triton.set_allocator"
TRITON_JIT = "triton.jit"

TRITON_API = frozenset({
    "triton.jit", "triton.autotune", "triton.Config", "triton.heuristics", "triton.cdiv",
    "triton.next_power_of_2", "triton.set_allocator", "triton.constexpr_function",
    "triton.tools.tensor_descriptor.TensorDescriptor",
})
"""Public host-side kernel-writing API (a chain may go on into their attributes, e.g. TensorDescriptor.from_tensor)."""
TRITON_DSL_PATHS = ("triton.language", "triton.language.math", "triton.language.extra.libdevice",
                    "triton.language.extra.cuda.libdevice", "triton.language.extra.cuda")
"""Device-language namespaces: `<path>.<name>` is allowed for any public name that is not a module."""
TRITON_DSL_MODULES = frozenset({
    "core", "extra", "libdevice", "math", "random", "standard", "target_info", "semantic", "cuda", "gdc", "utils",
    "builtins", "inspect", "typing", "warnings", "numbers", "driver", "modules", "pkgutil", "module_from_spec",
})
"""Names inside triton.language that are (or lead to) modules: `tl.core.builtins.eval`, `tl.extra.modules['os']`
(sys.modules), `tl.semantic.driver`. A test checks that the DSL paths expose no other module."""

TYPING_ALLOWED = frozenset({
    "Optional", "Union", "Any", "List", "Dict", "Tuple", "Sequence", "Callable", "Iterable", "TYPE_CHECKING",
    "Final", "Literal",
})
"""typing names an annotation needs (not get_type_hints / ForwardRef, which evaluate strings, nor typing.sys)."""

FORBIDDEN_BUILTINS: dict[str, Rule] = {
    "eval": Rule.CODE_EXECUTION, "exec": Rule.CODE_EXECUTION, "compile": Rule.CODE_EXECUTION,
    "breakpoint": Rule.CODE_EXECUTION, "help": Rule.CODE_EXECUTION, "exit": Rule.CODE_EXECUTION, "quit": Rule.CODE_EXECUTION,
    "__import__": Rule.DYNAMIC_IMPORT, "getattr": Rule.REFLECTION, "setattr": Rule.REFLECTION,
    "delattr": Rule.REFLECTION, "vars": Rule.REFLECTION, "globals": Rule.REFLECTION, "locals": Rule.REFLECTION,
    "dir": Rule.REFLECTION, "__builtins__": Rule.REFLECTION, "__loader__": Rule.REFLECTION,
    "__spec__": Rule.REFLECTION, "open": Rule.FILE_ACCESS, "input": Rule.FILE_ACCESS,
}
"""Builtin names that may not even be mentioned (a mention can be aliased, then called)."""

FRAME_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "f_globals", "f_locals", "f_builtins",
    "f_back", "f_code", "tb_frame", "tb_next", "co_code", "co_consts", "func_globals",
})
"""Frame and code attributes that reach a module's globals (and so its builtins) without a dunder."""

TENSOR_METHODS = frozenset({
    # matmul-like (PTXBench's list)
    "addbmm", "addmm", "baddbmm", "bmm", "conv1d", "conv2d", "conv3d", "einsum", "linear", "matmul", "mm",
    "scaled_dot_product_attention", "softmax",
    # copies, conversions, fills: each is a torch kernel on the call's stream
    "copy_", "clone", "to", "cuda", "cpu", "float", "half", "bfloat16", "double", "numpy",
    "tolist", "item", "fill_", "zero_", "normal_", "uniform_", "random_", "masked_fill", "masked_fill_",
    "index_copy_", "index_add_", "index_fill_", "index_select", "scatter", "scatter_", "scatter_add_",
    "gather", "resize_", "set_", "as_strided_", "new_empty", "new_zeros", "new_ones", "new_full",
    "new_tensor", "record_stream", "pin_memory", "share_memory_", "untyped_storage", "storage",
    # reductions and elementwise maths
    "sum", "mean", "amax", "amin", "logsumexp", "log_softmax", "exp", "exp_", "log", "sqrt", "rsqrt",
    "tanh", "sigmoid", "relu", "add_", "sub_", "mul_", "div_", "addcmul_", "lerp_", "clamp_", "cumsum",
    "topk", "argmax", "argmin", "tril", "triu", "where", "masked_scatter_", "norm", "backward", "max", "min",
    "mul", "div", "sub", "pow", "abs", "neg", "prod", "std", "var", "exp2", "log2", "erf", "cumprod",
})
"""Method names that are torch compute or copies when the receiver is a tensor; refused outside @triton.jit
whatever the receiver (`list.sort`, `set.add` and `dict.copy` stay allowed: they are not on this list).
`contiguous()` is allowed: the judge's inputs are contiguous, where it returns the tensor itself; a copy it
would launch is a non-Triton kernel in the call (`evidence.foreign_kernels`)."""


ALLOWED_BUILTINS = frozenset({
    "abs", "all", "any", "bool", "callable", "chr", "dict", "divmod", "enumerate", "filter", "float", "frozenset",
    "hash", "int", "isinstance", "issubclass", "iter", "len", "list", "map", "max", "min", "next", "ord", "pow",
    "print", "range", "repr", "reversed", "round", "set", "slice", "sorted", "str", "sum", "tuple", "zip",
    "None", "True", "False", "Ellipsis", "NotImplemented",
    "ArithmeticError", "AssertionError", "Exception", "IndexError", "KeyError", "LookupError", "NotImplementedError",
    "OverflowError", "RuntimeError", "StopIteration", "TypeError", "ValueError", "ZeroDivisionError",
})
"""The only builtins a candidate may name (any other builtin name may neither be used nor rebound: `type`,
`object`, `super`, `format`, `hasattr` and the like reach classes and attributes by the back door)."""

HOST_ATTRIBUTES = frozenset({
    # tensor metadata and views (no kernel; `contiguous`/`reshape` copy only a non-contiguous input, which the
    # judge's inputs never are, and a copy would be a foreign kernel in the call)
    "shape", "dtype", "device", "ndim", "numel", "dim", "size", "stride", "is_contiguous", "contiguous",
    "data_ptr", "element_size", "is_cuda", "storage_offset", "nbytes", "itemsize", "is_floating_point",
    "T", "mT", "t", "view", "reshape", "unsqueeze", "squeeze", "flatten", "unflatten", "permute", "transpose",
    "expand", "narrow", "split", "chunk", "unbind",
    # a torch.device and the device properties
    "index", "multi_processor_count", "name", "major", "minor", "total_memory", "warp_size",
    "max_threads_per_multi_processor", "shared_memory_per_block", "shared_memory_per_block_optin",
    "shared_memory_per_multiprocessor", "L2_cache_size", "regs_per_multiprocessor",
    # dtype metadata
    "is_signed", "is_complex",
    # methods of the lists, dicts and strings the file builds
    "append", "extend", "insert", "pop", "items", "keys", "values", "get", "update", "join",
})
"""Attributes a host-side value may be asked for. Anything else on a value - a tensor's compute and copy
methods, a jit function's internals (`get_capture_scope`, `fn`, `run`, `cache`), a launched kernel's `asm`,
`str.format` - is refused whatever the receiver turns out to be."""

JIT_ATTRIBUTES = frozenset({
    # triton.language.tensor members (methods forward to the tl functions of the same name)
    "T", "to", "dtype", "shape", "numel", "trans", "permute", "reshape", "view", "broadcast_to", "expand_dims",
    "split", "ravel", "flip", "sum", "max", "min", "argmax", "argmin", "xor_sum", "reduce_or", "cumsum",
    "cumprod", "reduce", "associative_scan", "sort", "histogram", "gather", "abs", "exp", "exp2", "log", "log2",
    "cos", "sin", "sqrt", "sqrt_rn", "rsqrt", "sigmoid", "softmax", "erf", "floor", "ceil", "cdiv",
    "logical_and", "logical_or", "advance", "item", "cast", "atomic_add", "atomic_and", "atomic_cas",
    "atomic_max", "atomic_min", "atomic_or", "atomic_xchg", "atomic_xor",
    # tensor descriptors
    "load", "store", "scatter", "block_shape", "strides", "block_type",
    # dtypes (and pointer / block types) and constexpr
    "element_ty", "scalar", "primitive_bitwidth", "int_bitwidth", "fp_mantissa_width", "exponent_bias", "name",
    "is_fp8", "is_fp8e4nv", "is_fp8e5", "is_fp16", "is_bf16", "is_fp32", "is_fp64", "is_int1", "is_int8",
    "is_int16", "is_int32", "is_int64", "is_uint8", "is_uint16", "is_uint32", "is_uint64", "is_floating",
    "is_standard_floating", "is_int_signed", "is_int_unsigned", "is_int", "is_bool", "is_ptr", "is_block",
    "is_const", "get_block_shapes", "get_int_max_value", "get_int_min_value", "with_element_ty",
    "address_space", "value",
})
"""Attributes of values inside @triton.jit code (Triton's code generator evaluates attribute access on any
object it reaches, Python objects included, at compile time in the candidate's process)."""

TRITON_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics", "triton.constexpr_function"})
"""The decorators a module-level function may carry (a decorator runs at import)."""

IMPORT_TIME_CALLS = frozenset({
    "triton.Config", "triton.language.constexpr", "triton.cdiv", "triton.next_power_of_2", "triton.jit",
    "range", "len", "min", "max", "abs", "int", "float", "bool", "str", "tuple", "list", "dict", "set",
    "enumerate", "zip", "sorted", "reversed", "round",
})
"""What an expression evaluated at import (a constant, a decorator's arguments, a default value or an
annotation of a module-level function) may call."""


@dataclass(frozen=True)
class TritonViolation:
    """One broken rule at one source line."""

    rule: Rule
    """Which rule."""
    line: int
    """1-based source line (0 when the whole file is concerned)."""
    detail: str
    """What was found, e.g. `torch.matmul`."""
    column: int = 0
    """0-based column (orders several violations on one line)."""

    def message(self) -> str:
        where = f" (line {self.line})" if self.line else ""
        return f"rejected [{self.rule.value}]: {self.detail}{where}; rule: {RULE_DESCRIPTIONS[self.rule]}"
