"""The Triton validator: every rule refuses its hostile input, every bypass attempt is caught, real kernels pass."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from ptxcore.triton.rules import RULE_DESCRIPTIONS, Rule
from ptxcore.triton.validate import validate_triton_source

REPO = Path(__file__).resolve().parents[2]

KERNEL = '''
import torch
import triton
import triton.language as tl


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask).to(tl.float32).to(y_ptr.dtype.element_ty), mask=mask)


def run(x, y):
    n = y.numel()
{body}
    _copy[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
'''


def src(body: str = "", module: str = "") -> str:
    """KERNEL with `body` inserted into run (4-space indented) and `module` appended at module level."""
    inner = textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") if body.strip() else "    pass"
    return KERNEL.format(body=inner) + textwrap.dedent(module)


def rules_of(source: str) -> set[Rule]:
    return validate_triton_source(source).rules


def test_the_base_kernel_passes():
    check = validate_triton_source(src())
    assert check.ok, [v.message() for v in check.violations]
    assert check.jit_kernels == ("_copy",)


@pytest.mark.parametrize("path", sorted((REPO / "solutions" / "triton").glob("*/*.py")), ids=lambda p: p.parent.name + "/" + p.name)
def test_our_solutions_pass(path: Path):
    check = validate_triton_source(path.read_text())
    assert check.ok, [v.message() for v in check.violations]
    assert check.jit_kernels


def test_knowledge_pack_example_passes():
    check = validate_triton_source((REPO / "knowledge_packs" / "shared" / "triton_example.py").read_text())
    assert check.ok, [v.message() for v in check.violations]


# (case id, body inside run, module-level addition, expected rule)
HOSTILE = [
    # PTXBench's rules
    ("cutlass", "", "import cutlass.cute as cute\n", Rule.CUTLASS_IMPORT),
    ("cutlass-from", "", "from cutlass import cute\n", Rule.CUTLASS_IMPORT),
    ("torch-alias", "", "import torch as T\n", Rule.TORCH_ALIAS),
    ("from-torch", "", "from torch import matmul\n", Rule.FROM_TORCH),
    ("from-torch-nn", "", "from torch.nn import functional as F\n", Rule.FROM_TORCH),
    ("torch-matmul", "torch.matmul(x, x.T, out=y)", "", Rule.TORCH_COMPUTE),
    ("torch-empty-like", "t = torch.empty_like(x)", "", Rule.TORCH_COMPUTE),
    ("torch-sdpa", "torch.nn.functional.scaled_dot_product_attention(x, x, x)", "", Rule.TORCH_COMPUTE),
    ("torch-ops", "torch.ops.aten.mm(x, x)", "", Rule.TORCH_COMPUTE),
    ("torch-cpp-ext", "torch.utils.cpp_extension.load_inline('m', '')", "", Rule.TORCH_COMPUTE),
    ("torch-private", "torch._C._cuda_getCurrentRawStream(0)", "", Rule.TORCH_COMPUTE),
    ("torch-tensor-class-method", "torch.Tensor.matmul(x, x)", "", Rule.TORCH_COMPUTE),
    ("torch-backends-flag", "torch.backends.cuda.matmul.allow_tf32 = True", "", Rule.MONKEY_PATCH),
    ("method-mm", "y.copy_(x.mm(x))", "", Rule.TENSOR_METHOD),
    ("method-matmul", "y.copy_(x.matmul(x))", "", Rule.TENSOR_METHOD),
    ("method-softmax", "z = x.softmax(-1)", "", Rule.TENSOR_METHOD),
    ("method-copy", "y.copy_(x)", "", Rule.TENSOR_METHOD),
    ("method-clone", "x = x.clone()", "", Rule.TENSOR_METHOD),
    ("method-to", "x = x.to(torch.float32)", "", Rule.TENSOR_METHOD),
    ("method-item", "v = x.item()", "", Rule.TENSOR_METHOD),
    ("method-zero", "y.zero_()", "", Rule.TENSOR_METHOD),
    ("slice-assign", "y[:] = x", "", Rule.TENSOR_ASSIGNMENT),
    ("slice-assign-view", "y.view(-1)[0] = 1", "", Rule.TENSOR_ASSIGNMENT),
    ("matmul-op", "z = x @ x", "", Rule.MATMUL_OPERATOR),
    ("matmul-aug", "x @= x", "", Rule.MATMUL_OPERATOR),
    ("dunder-import", "m = __import__('torch')", "", Rule.DYNAMIC_IMPORT),
    ("importlib", "", "import importlib\n", Rule.DYNAMIC_IMPORT),
    ("importlib-from", "", "from importlib import import_module\n", Rule.DYNAMIC_IMPORT),
    ("rebind-torch", "torch = None", "", Rule.MODULE_REBIND),
    ("no-alloc-empty", "buf = torch.empty(16, device='cuda')", "", Rule.ALLOCATOR),
    # holes PTXBench leaves open
    ("ctypes", "", "import ctypes\n", Rule.FORBIDDEN_MODULE),
    ("ctypes-from", "", "from ctypes import CDLL\n", Rule.FORBIDDEN_MODULE),
    ("os", "", "import os\n", Rule.FORBIDDEN_MODULE),
    ("os-path", "", "import os.path\n", Rule.FORBIDDEN_MODULE),
    ("sys", "", "import sys\n", Rule.FORBIDDEN_MODULE),
    ("subprocess", "", "import subprocess\n", Rule.FORBIDDEN_MODULE),
    ("threading", "", "import threading\n", Rule.FORBIDDEN_MODULE),
    ("gc", "", "import gc\n", Rule.FORBIDDEN_MODULE),
    ("inspect", "", "import inspect\n", Rule.FORBIDDEN_MODULE),
    ("builtins", "", "import builtins\n", Rule.FORBIDDEN_MODULE),
    ("functools", "", "import functools\n", Rule.FORBIDDEN_MODULE),
    ("numpy", "", "import numpy\n", Rule.IMPORT_NOT_ALLOWED),
    ("import-in-function", "import os", "", Rule.FORBIDDEN_MODULE),
    ("relative-import", "", "from . import helper\n", Rule.IMPORT_NOT_ALLOWED),
    ("star-import", "", "from triton.language import *\n", Rule.IMPORT_NOT_ALLOWED),
    ("cuda-stream", "s = torch.cuda.Stream()", "", Rule.SIDE_STREAM),
    ("cuda-stream-ctx", "with torch.cuda.stream(None):\n    pass", "", Rule.SIDE_STREAM),
    ("cuda-set-stream", "torch.cuda.set_stream(None)", "", Rule.SIDE_STREAM),
    ("cuda-graph", "g = torch.cuda.CUDAGraph()", "", Rule.CUDA_GRAPH),
    ("cuda-graph-ctx", "with torch.cuda.graph(None):\n    pass", "", Rule.CUDA_GRAPH),
    ("cuda-graphed-callables", "f = torch.cuda.make_graphed_callables(run, (x, y))", "", Rule.CUDA_GRAPH),
    ("triton-knobs-patch", "triton.knobs.runtime.launch_enter_hook = None", "", Rule.TRITON_INTERNALS),
    ("triton-runtime", "d = triton.runtime.driver.active", "", Rule.TRITON_INTERNALS),
    ("triton-testing", "triton.testing.do_bench(lambda: None)", "", Rule.TRITON_INTERNALS),
    ("triton-compile", "triton.compile(None)", "", Rule.TRITON_INTERNALS),
    ("triton-from-runtime", "", "from triton.runtime import driver\n", Rule.TRITON_INTERNALS),
    ("triton-import-compiler", "", "import triton.compiler\n", Rule.TRITON_INTERNALS),
    ("triton-private", "x = triton._C", "", Rule.TRITON_INTERNALS),
    ("tl-private", "x = tl._semantic", "", Rule.TRITON_INTERNALS),
    ("tl-core-builtins", "e = tl.core.builtins.eval", "", Rule.TRITON_INTERNALS),
    ("tl-extra-sys-modules", "m = tl.extra.modules['os']", "", Rule.TRITON_INTERNALS),
    ("tl-semantic-driver", "d = tl.semantic.driver", "", Rule.TRITON_INTERNALS),
    ("tl-submodule-alias", "c = tl.math\nc.core.builtins.eval('1')", "", Rule.TRITON_INTERNALS),
    ("from-tl-core", "", "from triton.language import core\n", Rule.TRITON_INTERNALS),
    ("libdevice-core", "", "from triton.language.extra import libdevice\nb = libdevice.core.builtins\n", Rule.TRITON_INTERNALS),
    ("typing-sys", "m = typing.sys.modules", "import typing\n", Rule.REFLECTION),
    ("typing-get-type-hints", "", "from typing import get_type_hints\n", Rule.REFLECTION),
    ("monkey-patch-tl", "tl.dot = None", "", Rule.MONKEY_PATCH),
    ("monkey-patch-module-level", "", "triton.language.dot = print\n", Rule.MONKEY_PATCH),
    ("monkey-patch-del", "del torch.cuda.synchronize", "", Rule.MONKEY_PATCH),
    ("monkey-patch-param", "y.data = x", "", Rule.MONKEY_PATCH),
    ("module-dict-write", "torch.__dict__['cuda'] = None", "", Rule.REFLECTION),
    ("eval", "eval('1')", "", Rule.CODE_EXECUTION),
    ("exec", "exec('x = 1')", "", Rule.CODE_EXECUTION),
    ("compile", "c = compile('1', 'f', 'eval')", "", Rule.CODE_EXECUTION),
    ("exit", "exit(0)", "", Rule.CODE_EXECUTION),
    ("open", "open('/etc/passwd').read()", "", Rule.FILE_ACCESS),
    ("syntax", "x = (", "", Rule.SYNTAX),
    # bypass attempts
    ("string-built-name", "f = getattr(torch, 'mat' + 'mul')", "", Rule.REFLECTION),
    ("globals", "globals()['torch'].matmul(x, x)", "", Rule.REFLECTION),
    ("globals-alias", "g = globals", "", Rule.REFLECTION),
    ("builtins-dict", "__builtins__['eval']('1')", "", Rule.REFLECTION),
    ("builtins-attr", "__builtins__.__import__('os')", "", Rule.REFLECTION),
    ("vars", "vars(torch)['matmul'](x, x)", "", Rule.REFLECTION),
    ("dunder-class", "c = x.__class__", "", Rule.REFLECTION),
    ("dunder-subclasses", "c = ().__class__.__base__.__subclasses__()", "", Rule.REFLECTION),
    ("dunder-globals", "g = run.__globals__", "", Rule.REFLECTION),
    ("generator-frame", "g = (i for i in [0])\nb = g.gi_frame.f_globals", "", Rule.REFLECTION),
    ("traceback-frame", "try:\n    1 / 0\nexcept Exception as e:\n    f = e.__traceback__.tb_frame", "", Rule.REFLECTION),
    ("name-main-rebind", "", "__name__ = '__main__'\n", Rule.REFLECTION),
    ("alias-assign", "t = torch\nt.matmul(x, x)", "", Rule.MODULE_AS_VALUE),
    ("alias-walrus", "(t := torch)", "", Rule.MODULE_AS_VALUE),
    ("alias-tuple", "t, = (torch,)", "", Rule.MODULE_AS_VALUE),
    ("alias-call-arg", "print(torch)", "", Rule.MODULE_AS_VALUE),
    ("alias-submodule", "c = torch.cuda\nc.graph(None)", "", Rule.TORCH_COMPUTE),
    ("alias-default-arg", "", "def helper(t=torch):\n    return t.matmul\n", Rule.MODULE_AS_VALUE),
    ("alias-lambda", "f = lambda: torch\nf().matmul(x, x)", "", Rule.MODULE_AS_VALUE),
    ("lambda-compute", "f = lambda a: torch.matmul(a, a)\nf(x)", "", Rule.TORCH_COMPUTE),
    ("nested-function", "def inner(a):\n    return torch.mm(a, a)\ninner(x)", "", Rule.TORCH_COMPUTE),
    ("decorator", "", "@torch.compile\ndef helper(a):\n    return a\n", Rule.TORCH_COMPUTE),
    ("decorator-no-grad", "", "@torch.no_grad()\ndef helper(a):\n    return a\n", Rule.TORCH_COMPUTE),
    ("param-shadow", "", "def helper(torch):\n    return torch.matmul\n", Rule.MODULE_REBIND),
    ("import-as-torch", "", "import numpy as torch\n", Rule.IMPORT_NOT_ALLOWED),
    ("from-import-as-torch", "", "from triton import jit as torch\n", Rule.MODULE_REBIND),
    ("except-as-torch", "try:\n    pass\nexcept Exception as torch:\n    pass", "", Rule.MODULE_REBIND),
    ("for-torch", "for torch in range(2):\n    pass", "", Rule.MODULE_REBIND),
    ("match-as-torch", "match n:\n    case torch:\n        pass", "", Rule.MODULE_REBIND),
    ("class-attr-write", "", "class K:\n    pass\nK.x = 1\n", Rule.MONKEY_PATCH),
    ("allocator-lambda-elsewhere", "f = lambda s, a, st: torch.empty(s, device='cuda', dtype=torch.int8)", "", Rule.ALLOCATOR),
    ("torch-empty-in-jit", "", "@triton.jit\ndef k2(p):\n    torch.empty(4)\n", Rule.ALLOCATOR),
    ("torch-in-jit", "", "@triton.jit\ndef k2(p):\n    torch.matmul(p, p)\n", Rule.TORCH_COMPUTE),
    ("matmul-in-jit", "", "@triton.jit\ndef k2(a, b):\n    c = a @ b\n", Rule.MATMUL_OPERATOR),
    ("main-guard-else", "", "if __name__ == '__main__':\n    pass\nelse:\n    import os\n", Rule.FORBIDDEN_MODULE),
    ("cuda-event", "e = torch.cuda.Event()", "", Rule.TORCH_COMPUTE),
    # found (issue 26): accepted by the deny-lists, refused by the allow-lists of names and attributes
    ("capture-scope-exec", "", "_copy.get_capture_scope()['__builtins__']['exec']('import os')\n",
     Rule.ATTRIBUTE_NOT_ALLOWED),
    ("capture-scope-in-run", "_copy.get_capture_scope()", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("addmm-inplace", "y.addmm_(x, x.t(), beta=0.0)", "", Rule.TENSOR_METHOD),
    ("baddbmm-inplace", "y.baddbmm_(x, x, beta=0.0)", "", Rule.TENSOR_METHOD),
    ("method-alias", "f = y.copy_\nf(x)", "", Rule.TENSOR_METHOD),
    ("type-mm", "y.copy_(type(x).mm(x, x))", "", Rule.NAME_NOT_ALLOWED),
    ("type-mm-alias", "mm = type(x).mm", "", Rule.NAME_NOT_ALLOWED),
    ("self-is-any-name", "self = type(y)\nself.x = 1", "", Rule.MONKEY_PATCH),
    ("format-reflection", "s = '{0.__class__.__mro__}'.format(x)", "", Rule.REFLECTION),
    # their neighbours
    ("format-method", "s = '{0.device}'.format(x)", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("format-map", "s = '{a.device}'.format_map({'a': x})", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("str-format-unbound", "s = str.format('{0}', x)", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("format-builtin", "s = format(x, '')", "", Rule.NAME_NOT_ALLOWED),
    ("dunder-string", "d = {}\nv = d.get('__builtins__')", "", Rule.REFLECTION),
    ("dunder-string-in-jit", "", "@triton.jit\ndef k2(p):\n    q = '__globals__'\n", Rule.REFLECTION),
    ("object-builtin", "o = object", "", Rule.NAME_NOT_ALLOWED),
    ("super-builtin", "s = super", "", Rule.NAME_NOT_ALLOWED),
    ("hasattr", "h = hasattr(x, 'mm')", "", Rule.NAME_NOT_ALLOWED),
    ("type-by-lambda", "f = lambda: type", "", Rule.NAME_NOT_ALLOWED),
    ("builtin-shadowed-by-param", "", "def helper(type):\n    return type\n", Rule.NAME_NOT_ALLOWED),
    ("builtin-shadowed-at-module", "", "type = 1\n", Rule.NAME_NOT_ALLOWED),
    ("undefined-name", "v = something_never_defined", "", Rule.NAME_NOT_ALLOWED),
    ("dunder-name", "p = __file__", "", Rule.REFLECTION),
    ("jit-fn-attr", "f = _copy.fn", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("jit-run-attr", "_copy.run(x, y, n, BLOCK=1024, grid=(1,), warmup=False)", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("jit-cache-attr", "c = _copy.device_caches", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("launch-result-attr", "k = _copy[(1,)](x, y, n, BLOCK=1024)\nptx = k.asm", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("jit-code-capture-scope", "", "@triton.jit\ndef k2(p):\n    s = _copy.get_capture_scope()\n",
     Rule.ATTRIBUTE_NOT_ALLOWED),
    ("tensor-data", "d = y.data", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("tensor-sort", "y.sort()", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("tensor-add-method", "z = y.add(x)", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("inplace-unlisted", "y.addcdiv_(x, x)", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("exception-attr", "try:\n    pass\nexcept Exception as e:\n    t = e.with_traceback", "",
     Rule.ATTRIBUTE_NOT_ALLOWED),
    ("generator-send", "g = (i for i in [0])\ns = g.send", "", Rule.ATTRIBUTE_NOT_ALLOWED),
    ("class-def", "", "class K:\n    pass\n", Rule.CLASS_DEFINITION),
    ("class-in-function", "class K:\n    pass", "", Rule.CLASS_DEFINITION),
    ("self-attr-write", "", "def helper(self):\n    self.block = 64\n", Rule.MONKEY_PATCH),
    ("top-level-call", "", "print('hi')\n", Rule.IMPORT_TIME),
    ("top-level-helper-call", "", "def h():\n    return 1\nX = h()\n", Rule.IMPORT_TIME),
    ("top-level-launch", "", "K = _copy[(1,)](None, None, 0, BLOCK=1024)\n", Rule.IMPORT_TIME),
    ("top-level-for", "", "for i in range(2):\n    pass\n", Rule.IMPORT_TIME),
    ("top-level-try", "", "try:\n    pass\nexcept Exception:\n    pass\n", Rule.IMPORT_TIME),
    ("top-level-with", "", "with torch.cuda.device(0):\n    pass\n", Rule.IMPORT_TIME),
    ("top-level-if", "", "if True:\n    X = 1\n", Rule.IMPORT_TIME),
    ("top-level-device-query", "", "N = torch.cuda.device_count()\n", Rule.IMPORT_TIME),
    ("decorator-own-function", "", "def deco(f):\n    return f\n@deco\ndef helper():\n    pass\n",
     Rule.IMPORT_TIME),
    ("default-arg-call", "", "def h():\n    return 1\ndef helper(a=h()):\n    return a\n", Rule.IMPORT_TIME),
    ("annotation-call", "", "def h():\n    return int\ndef helper(a: h()):\n    return a\n", Rule.IMPORT_TIME),
    ("autotune-configs-from-helper", "", "def cfgs():\n    return []\n@triton.autotune(configs=cfgs(), "
     "key=['n'])\n@triton.jit\ndef k2(p, n):\n    pass\n", Rule.IMPORT_TIME),
    ("walrus-at-top-level", "", "X = (Y := print('hi'))\n", Rule.IMPORT_TIME),
]


@pytest.mark.parametrize("case,body,module,rule", HOSTILE, ids=[h[0] for h in HOSTILE])
def test_hostile_input_is_refused(case: str, body: str, module: str, rule: Rule):
    check = validate_triton_source(src(body, module))
    assert not check.ok, case
    assert rule in check.rules, (case, [v.message() for v in check.violations])
    message = check.first.message()
    assert "\n" not in message and message.startswith("rejected [")


def test_every_rule_has_a_description_and_a_hostile_case():
    covered = {h[3] for h in HOSTILE} | {Rule.TOO_LARGE, Rule.NO_RUN, Rule.NO_TRITON_IMPORT, Rule.NO_JIT,
                                          Rule.NO_LAUNCH}
    assert set(Rule) == covered
    assert set(RULE_DESCRIPTIONS) == set(Rule)


def test_structure_rules():
    no_run = src().replace("def run(x, y):", "def entry(x, y):")
    assert Rule.NO_RUN in rules_of(no_run)
    no_jit = src().replace("@triton.jit\n", "")
    assert Rule.NO_JIT in rules_of(no_jit)
    no_triton = "import torch\n\ndef run(x, y):\n    pass\n"
    assert {Rule.NO_TRITON_IMPORT, Rule.NO_JIT} <= rules_of(no_triton)
    assert Rule.TOO_LARGE in rules_of(src(module="#" * 300_000))


def test_a_jit_kernel_that_run_never_launches_is_refused():
    never = src().replace("    _copy[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)\n", "")
    never += "\n\ndef unused(x, y, n):\n    _copy[(1,)](x, y, n, BLOCK=1024)\n"
    assert Rule.NO_LAUNCH in rules_of(never)
    # launched through a helper that run calls: fine
    helper = never.replace("    pass\n", "    unused(x, y, n)\n", 1)
    assert validate_triton_source(helper).ok, [v.message() for v in validate_triton_source(helper).violations]
    module_level = src().replace("    _copy[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)\n", "")
    module_level += "\n_copy[(1,)](None, None, 0, BLOCK=1024)\n"
    assert Rule.NO_LAUNCH in rules_of(module_level)


ALLOWED = [
    ("allocator-def", "triton.set_allocator(_alloc)",
     "def _alloc(size, alignment, stream):\n    return torch.empty(size, device='cuda', dtype=torch.int8)\n"),
    ("allocator-lambda", "triton.set_allocator(lambda s, a, st: torch.empty(s, device='cuda', dtype=torch.int8))", ""),
    ("allocator-nested", "def alloc(size, alignment, stream):\n    return torch.empty(size, device='cuda', dtype=torch.int8)\n"
                         "triton.set_allocator(alloc)", ""),
    ("metadata", "assert x.dtype == torch.bfloat16 and x.is_contiguous()\nM, K = x.shape\ns = x.stride(0)", ""),
    ("device-ctx", "with torch.cuda.device(x.device):\n    p = torch.cuda.get_device_properties(x.device).multi_processor_count", ""),
    ("isinstance", "assert isinstance(x, torch.Tensor)", ""),
    ("views", "a = x.view(-1)\nb = x.T\nc = x.reshape(-1)\nd = x.data_ptr()\ne = x.contiguous()", ""),
    ("host-descriptor", "d = TensorDescriptor.from_tensor(x, [64, 64])",
     "from triton.tools.tensor_descriptor import TensorDescriptor\n"),
    ("container-methods", "cfg = [3, 1]\ncfg.append(2)\nd = {}\nd.update(a=1)\nv = d.get('a')\n"
                          "for k, w in d.items():\n    cfg.extend([w])", ""),
    ("math", "s = math.sqrt(128.0) * math.log2(math.e)", "import math\n"),
    ("main-guard", "", "if __name__ == '__main__':\n    import os\n    x = torch.randn(4)\n    print(torch.allclose(x, x))\n"),
    ("autotune", "", "@triton.autotune(configs=[triton.Config({'B': 64}, num_warps=4)], key=['n'])\n@triton.jit\ndef k2(p, n, B: tl.constexpr):\n    tl.store(p + tl.arange(0, B), tl.load(p + tl.arange(0, B)))\n"),
    ("libdevice", "", "from triton.language.extra import libdevice\n\n@triton.jit\ndef k3(p):\n    tl.store(p, libdevice.exp(tl.load(p)))\n"),
    ("jit-tensor-methods", "", "@triton.jit\ndef k4(p, B: tl.constexpr):\n    x = tl.load(p + tl.arange(0, B)).to(tl.float32)\n    tl.store(p, x.sum(axis=0))\n"),
    ("builtins", "nb = max(1, min(len(x.shape), abs(-3)))\nok = isinstance(n, int) and bool(n)\n"
                 "for i, d in enumerate(zip(x.shape, x.stride())):\n    pass\nprint('shape', tuple(x.shape), str(n))", ""),
    ("raise", "if x.dim() != 1:\n    raise ValueError('1-d tensors only')", ""),
    ("device-properties", "p = torch.cuda.get_device_properties(x.device)\nsms = p.multi_processor_count\n"
                          "i = x.device.index", ""),
    ("host-grid-helper", "g = grid({'B': 64})", "def grid(meta):\n    return (triton.cdiv(16, meta['B']),)\n"),
    ("top-level-constants", "", "CONFIGS = [triton.Config({'B': b}, num_warps=4) for b in (64, 128)]\n"
                                "BLOCK: tl.constexpr = tl.constexpr(64)\nDTYPE = tl.bfloat16\nSIZES = (1, 2)\n"
                                "GRID = lambda meta: (triton.cdiv(1024, meta['B']),)\n"),
    ("heuristics", "", "@triton.heuristics({'EVEN': lambda args: args['n'] % 16 == 0})\n@triton.jit\n"
                       "def k5(p, n, EVEN: tl.constexpr):\n    pass\n"),
    ("jit-descriptor", "", "@triton.jit\ndef k6(p, M, B: tl.constexpr):\n"
                           "    d = tl.make_tensor_descriptor(p, shape=[M, B], strides=[B, 1], block_shape=[B, B])\n"
                           "    t = d.load([0, 0])\n    d.store([0, 0], t.to(p.dtype.element_ty).T)\n"),
    ("docstrings", "", "def helper():\n    \"\"\"Not __init__: a plain helper.\"\"\"\n    return 1\n"),
    ("typing", "", "from typing import Optional\n"),
]


@pytest.mark.parametrize("case,body,module", ALLOWED, ids=[a[0] for a in ALLOWED])
def test_legitimate_code_passes(case: str, body: str, module: str):
    check = validate_triton_source(src(body, module))
    assert check.ok, (case, [v.message() for v in check.violations])
    assert "_copy" in check.jit_kernels


def test_matmul_operator_is_refused_even_in_dead_jit_code():
    dead = "@triton.jit\ndef k2(a, b):\n    if False:\n        c = a @ b\n"
    assert Rule.MATMUL_OPERATOR in rules_of(src(module=dead))


def test_two_allocators_with_one_name_are_ambiguous():
    module = ("def _alloc(size, alignment, stream):\n    return torch.empty(size, device='cuda', dtype=torch.int8)\n"
              "def _alloc(size, alignment, stream):\n    return torch.empty(size, device='cuda', dtype=torch.int8)\n")
    assert Rule.ALLOCATOR in rules_of(src("triton.set_allocator(_alloc)", module))


def test_violations_are_in_source_order_with_lines():
    check = validate_triton_source(src("z = x @ x\nimport os"))
    lines = [v.line for v in check.violations]
    assert lines == sorted(lines) and all(n > 0 for n in lines)


def test_deeply_nested_source_is_refused_not_crashing():
    check = validate_triton_source("x = " + "(" * 5000 + ")" * 5000)
    assert Rule.SYNTAX in check.rules


def test_the_dsl_namespaces_expose_no_module_outside_the_deny_list():
    """`<DSL path>.<name>` is allowed for public names: none of them may be a module (or reach one) unless
    rules.TRITON_DSL_MODULES names it. Checked against the installed triton."""
    pytest.importorskip("triton")
    import importlib
    import types

    from ptxcore.triton.rules import TRITON_API, TRITON_DSL_MODULES, TRITON_DSL_PATHS

    leaks = []
    for path in TRITON_DSL_PATHS:
        namespace = importlib.import_module(path)
        for name in (n for n in dir(namespace) if not n.startswith("_")):
            value = getattr(namespace, name)
            if isinstance(value, types.ModuleType):
                if name not in TRITON_DSL_MODULES:
                    leaks.append(f"{path}.{name}")
                continue  # a denied module: nothing behind it is reachable
            for attr in (a for a in dir(value) if not a.startswith("_")):
                inner = getattr(value, attr, None)
                if isinstance(inner, types.ModuleType) and attr not in TRITON_DSL_MODULES:
                    leaks.append(f"{path}.{name}.{attr}")
    for api in TRITON_API:
        module, _, name = api.rpartition(".")
        value = getattr(importlib.import_module(module), name)
        leaks += [f"{api}.{a}" for a in dir(value) if not a.startswith("_")
                  and isinstance(getattr(value, a, None), types.ModuleType)]
    assert leaks == []


def test_the_jit_attribute_list_names_triton_language_members_only(tmp_path):
    """Every attribute allowed in @triton.jit code is a member of a triton.language tensor, descriptor, dtype or
    constexpr, and none reaches into a jit function (its capture scope, source, cache). Checked against the
    installed triton."""
    pytest.importorskip("triton")
    import importlib.util

    import triton.language as tl
    from triton.language import core

    from ptxcore.triton.rules import JIT_ATTRIBUTES

    block = tl.block_type(tl.float32, [16])
    values = [tl.tensor(None, block), tl.float32, tl.int32, tl.pointer_type(tl.float32), block, tl.constexpr(1),
              core.tensor_descriptor(None, [tl.constexpr(16)], [tl.constexpr(1)], block)]
    members = set().union(*(set(dir(v)) | set(vars(v)) for v in values))
    assert sorted(JIT_ATTRIBUTES - members) == []
    module = tmp_path / "jitmod.py"
    module.write_text("import triton\n\n@triton.jit\ndef k(p):\n    pass\n")
    spec = importlib.util.spec_from_file_location("ptxbench_jit_attr_probe", module)
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    assert sorted(a for a in JIT_ATTRIBUTES if hasattr(loaded.k, a)) == []
