"""Static validator for a Triton candidate's `kernel.py`: pure `ast`, no import of triton or torch.

    check = validate_triton_source(source)
    if not check.ok: -> REJECTED with check.first.message() (COMPILE_ERROR for a syntax error)
    check.jit_kernels -> names of the @triton.jit functions (the kernel symbols Triton emits)

How it reasons: every dotted reference rooted at an imported name is resolved through the import aliases
(`tl.dot` -> `triton.language.dot`) and checked against the allow-lists of `rules.py`; an imported module may
appear only as the root of such a chain (never as a value: `t = torch` is refused) and no imported name may be
rebound. The rest is allow-listed too (`surface.py`): names the file binds, imports and a few builtins;
listed attributes of values (host or jit list); no classes; a top level of imports, definitions and constants.
Reflection (dunder attributes, names and strings, frame attributes), code execution and attribute writes are
refused anywhere. The body of a module-level `if __name__ == "__main__":` is not checked: the loader imports
kernel.py under a private module name, so it never runs (its `else` branch is checked).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field

from .astutil import (
    container_names,
    dotted,
    is_dunder,
    is_main_guard,
    reachable_from_run,
    stdlib_allowed,
    top_owner,
    triton_allowed,
)
from .rules import (
    ALLOWED_BUILTINS,
    ALLOWED_IMPORTS,
    CUTLASS_MODULES,
    FORBIDDEN_MODULES,
    FRAME_ATTRIBUTES,
    MAX_SOURCE_CHARS,
    TORCH_ALLOCATOR_CALL,
    TORCH_CUDA_ALLOWED,
    TORCH_CUDA_GRAPH,
    TORCH_METADATA,
    TORCH_SIDE_STREAM,
    TRITON_JIT,
    TRITON_SET_ALLOCATOR,
    Rule,
    TritonViolation,
)
from .surface import bound_names, docstrings, dunder_text, import_time, name_rule, value_attribute_rule

_FUNCS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)
_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef, ast.Module)
_ALWAYS_MODULES = ("torch", "triton")


@dataclass(frozen=True)
class TritonCheck:
    """What the validator found in one kernel.py."""

    violations: tuple[TritonViolation, ...] = ()
    """Every broken rule, in source order."""
    jit_kernels: tuple[str, ...] = ()
    """Names of the @triton.jit functions, sorted (Triton names each compiled kernel after its function)."""

    @property
    def ok(self) -> bool:
        return not self.violations

    @property
    def first(self) -> TritonViolation | None:
        return self.violations[0] if self.violations else None

    @property
    def rules(self) -> set[Rule]:
        return {v.rule for v in self.violations}

    @property
    def is_syntax_error(self) -> bool:
        return bool(self.violations) and self.violations[0].rule in (Rule.SYNTAX, Rule.TOO_LARGE)


def validate_triton_source(source: str) -> TritonCheck:
    """Check a kernel.py against every rule (see rules.py)."""
    if len(source) > MAX_SOURCE_CHARS:
        return TritonCheck((TritonViolation(Rule.TOO_LARGE, 0, f"{len(source)} characters > {MAX_SOURCE_CHARS}"),))
    try:
        tree = ast.parse(source, filename="kernel.py")
    except SyntaxError as exc:
        return TritonCheck((TritonViolation(Rule.SYNTAX, exc.lineno or 0, f"SyntaxError: {exc.msg}"),))
    except (RecursionError, MemoryError, ValueError) as exc:
        return TritonCheck((TritonViolation(Rule.SYNTAX, 0, f"unparsable source ({type(exc).__name__})"),))
    try:
        return _Checker(tree).run()
    except RecursionError:
        return TritonCheck((TritonViolation(Rule.SYNTAX, 0, "source too deeply nested"),))


@dataclass
class _Checker:
    tree: ast.Module
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)
    modules: set[str] = field(default_factory=set)
    found: list[TritonViolation] = field(default_factory=list)
    allocators: set[ast.AST] = field(default_factory=set)
    jit_defs: dict[str, ast.AST] = field(default_factory=dict)
    has_triton: bool = False
    containers: set[str] = field(default_factory=set)
    bound: set[str] = field(default_factory=set)
    docs: set[int] = field(default_factory=set)

    def run(self) -> TritonCheck:
        nodes = list(self._nodes())
        for parent in nodes:
            for child in ast.iter_child_nodes(parent):
                self.parents[child] = parent
        for name in _ALWAYS_MODULES:
            self.aliases[name] = name
        for node in nodes:
            if isinstance(node, ast.Import | ast.ImportFrom):
                self._import(node)
        self._find_jit(nodes)
        self._find_allocators(nodes)
        self.containers = container_names(nodes)
        self.bound, self.docs = bound_names(nodes), docstrings(self.tree)
        for node in nodes:
            self._visit(node)
        for rule, node, detail in import_time(self.tree.body, self.resolve):
            self._add(rule, node, detail)
        self._structure(nodes)
        found = sorted(set(self.found), key=lambda v: (v.line, v.column, v.rule.value, v.detail))
        return TritonCheck(tuple(found), tuple(sorted(self.jit_defs)))

    def _nodes(self) -> Iterator[ast.AST]:
        """Every node, except the body and test of a module-level `if __name__ == "__main__":` (never run on
        import; the test is the one place `__name__` may appear)."""
        skip = {id(n) for stmt in self.tree.body if is_main_guard(stmt) for n in (*stmt.body, stmt.test)}
        todo: list[ast.AST] = [self.tree]
        while todo:
            node = todo.pop()
            yield node
            todo.extend(c for c in ast.iter_child_nodes(node) if id(c) not in skip)

    def _add(self, rule: Rule, node: ast.AST | None, detail: str) -> None:
        self.found.append(TritonViolation(rule, getattr(node, "lineno", 0) or 0, detail,
                                          getattr(node, "col_offset", 0) or 0))

    # imports ----------------------------------------------------------------------------------------------
    def _module_rule(self, module: str, node: ast.AST) -> bool:
        """Refuse CUTLASS and the named modules; True when refused."""
        top = module.split(".", 1)[0]
        if any(module == m or module.startswith(m + ".") for m in CUTLASS_MODULES):
            self._add(Rule.CUTLASS_IMPORT, node, f"import of {module}")
        elif top == "importlib":
            self._add(Rule.DYNAMIC_IMPORT, node, f"import of {module}")
        elif top in FORBIDDEN_MODULES:
            self._add(Rule.FORBIDDEN_MODULE, node, f"import of {module} ({FORBIDDEN_MODULES[top]})")
        else:
            return False
        return True

    def _import(self, node: ast.Import | ast.ImportFrom) -> None:
        if isinstance(node, ast.Import):
            for alias in node.names:
                self._import_one(alias, node)
            return
        module = node.module or ""
        if node.level or self._module_rule(module, node):
            if node.level:
                self._add(Rule.IMPORT_NOT_ALLOWED, node, "relative import")
            return
        if module.split(".", 1)[0] == "torch":
            self._add(Rule.FROM_TORCH, node, f"from {module} import ...")
            return
        if module not in ALLOWED_IMPORTS:
            rule = Rule.TRITON_INTERNALS if module.split(".", 1)[0] == "triton" else Rule.IMPORT_NOT_ALLOWED
            self._add(rule, node, f"import from {module}")
            return
        self.has_triton |= module.split(".", 1)[0] == "triton"
        for alias in node.names:
            full = f"{module}.{alias.name}"
            bound = alias.asname or alias.name
            if alias.name == "*":
                self._add(Rule.IMPORT_NOT_ALLOWED, node, f"from {module} import *")
            elif module.startswith("triton") and not triton_allowed(full, as_import=True):
                self._add(Rule.TRITON_INTERNALS, node, f"from {module} import {alias.name}")
            elif not module.startswith("triton") and not stdlib_allowed(full):
                self._add(Rule.REFLECTION, node, f"from {module} import {alias.name}")
            elif bound in _ALWAYS_MODULES and full != bound:
                self._add(Rule.MODULE_REBIND, node, f"{full} imported as {bound}")
            else:
                self.aliases[bound] = full
                if full in ALLOWED_IMPORTS:
                    self.modules.add(bound)

    def _import_one(self, alias: ast.alias, node: ast.Import) -> None:
        name, top = alias.name, alias.name.split(".", 1)[0]
        if self._module_rule(name, node):
            return
        if top == "torch" and alias.asname not in (None, "torch"):
            self._add(Rule.TORCH_ALIAS, node, f"import {name} as {alias.asname}")
        elif name not in ALLOWED_IMPORTS:
            self._add(Rule.TRITON_INTERNALS if top == "triton" else Rule.IMPORT_NOT_ALLOWED, node, f"import {name}")
        elif alias.asname in _ALWAYS_MODULES and alias.asname != name:
            self._add(Rule.MODULE_REBIND, node, f"{name} imported as {alias.asname}")
        else:
            bound = alias.asname or top
            self.aliases[bound] = name if alias.asname else top
            self.modules.add(bound)
            self.has_triton |= top == "triton"

    def resolve(self, node: ast.AST) -> str | None:
        parts = dotted(node)
        if parts is None or parts[0] not in self.aliases:
            return None
        return ".".join((self.aliases[parts[0]], *parts[1:]))

    # jit kernels and the descriptor allocator ------------------------------------------------------------
    def _find_jit(self, nodes: list[ast.AST]) -> None:
        for node in nodes:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                for deco in node.decorator_list:
                    target = deco.func if isinstance(deco, ast.Call) else deco
                    if self.resolve(target) == TRITON_JIT:
                        self.jit_defs[node.name] = node
            elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
                if self.resolve(node.value.func) == TRITON_JIT:
                    self._jit_by_call(node, nodes)

    def _jit_by_call(self, node: ast.Assign, nodes: list[ast.AST]) -> None:
        """`k = triton.jit(f)`: `k` is launchable, `f`'s body is device code."""
        for target in node.targets:
            if isinstance(target, ast.Name):
                self.jit_defs[target.id] = node
        wrapped = node.value.args[0] if node.value.args else None
        if isinstance(wrapped, ast.Name):
            for n in nodes:
                if isinstance(n, ast.FunctionDef) and n.name == wrapped.id:
                    self.jit_defs[n.name] = n

    def _scope(self, node: ast.AST, kinds: tuple = _SCOPES) -> ast.AST | None:
        node = self.parents.get(node)
        while node is not None and not isinstance(node, kinds):
            node = self.parents.get(node)
        return node

    def _in_jit(self, node: ast.AST) -> bool:
        scope = self._scope(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        while scope is not None:
            if any(scope is d for d in self.jit_defs.values()):
                return True
            scope = self._scope(scope, (ast.FunctionDef, ast.AsyncFunctionDef))
        return False

    def _find_allocators(self, nodes: list[ast.AST]) -> None:
        for node in nodes:
            if not isinstance(node, ast.Call) or self.resolve(node.func) != TRITON_SET_ALLOCATOR:
                continue
            args = list(node.args[:1]) + [k.value for k in node.keywords if k.arg == "allocator"]
            for arg in args:
                if isinstance(arg, ast.Lambda):
                    self.allocators.add(arg)
                elif isinstance(arg, ast.Name):
                    self._register_named_allocator(arg.id, node)

    def _register_named_allocator(self, name: str, call: ast.AST) -> None:
        """The def that `name` means at the call: innermost enclosing scope first, as Python resolves it."""
        scope = self._scope(call)
        while scope is not None:
            defs = [n for n in ast.walk(scope) if isinstance(n, ast.FunctionDef) and n.name == name
                    and self._scope(n) is scope]
            if len(defs) > 1:
                self._add(Rule.ALLOCATOR, call, f"allocator `{name}` is defined {len(defs)} times")
                return
            if defs:
                self.allocators.add(defs[0])
                return
            scope = self._scope(scope)

    # per-node rules -----------------------------------------------------------------------------------------
    def _visit(self, node: ast.AST) -> None:
        if isinstance(node, ast.Name):
            self._name(node)
        elif isinstance(node, ast.Attribute):
            self._attribute(node)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store | ast.Del):
            self._subscript_store(node)
        elif isinstance(node, ast.BinOp | ast.AugAssign) and isinstance(node.op, ast.MatMult):
            self._add(Rule.MATMUL_OPERATOR, node, "the `@` operator")
        elif isinstance(node, ast.Constant) and id(node) not in self.docs and dunder_text(node.value):
            self._add(Rule.REFLECTION, node, f"{node.value!r} (a dunder name in a string)")
        elif isinstance(node, ast.arg):
            self._binding(node.arg, node)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            self._binding(node.name, node)
            if isinstance(node, ast.ClassDef):
                self._add(Rule.CLASS_DEFINITION, node, f"class `{node.name}`")
        elif isinstance(node, ast.Global | ast.Nonlocal):
            for name in node.names:
                self._binding(name, node)
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            self._binding(node.name, node)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            self._binding(node.rest, node)

    def _binding(self, name: str, node: ast.AST) -> None:
        """An imported name (a module or not: `cdiv.x` would be judged as `triton.cdiv.x`) or a builtin outside
        the allowed set may not be rebound."""
        if name in self.modules or name in self.aliases:
            self._add(Rule.MODULE_REBIND, node, f"`{name}` rebound")
        elif name != "__all__" and (found := name_rule(name)) is not None:
            self._add(found[0], node, f"{found[1]} rebound")

    def _name(self, node: ast.Name) -> None:
        if not isinstance(node.ctx, ast.Load):
            self._binding(node.id, node)
            return
        if (found := name_rule(node.id)) is not None:
            self._add(found[0], node, found[1])
        elif node.id not in self.bound and node.id not in self.aliases and node.id not in ALLOWED_BUILTINS:
            self._add(Rule.NAME_NOT_ALLOWED, node, f"`{node.id}` is not defined in this file")
        parent = self.parents.get(node)
        if node.id in self.modules and not (isinstance(parent, ast.Attribute) and parent.value is node):
            self._add(Rule.MODULE_AS_VALUE, node, f"module `{node.id}` used as a value")

    def _attribute(self, node: ast.Attribute) -> None:
        reflective = is_dunder(node.attr) or node.attr in FRAME_ATTRIBUTES
        if reflective:
            self._add(Rule.REFLECTION, node, f"introspection attribute `.{node.attr}`")
        if isinstance(node.ctx, ast.Store | ast.Del):
            what = ast.unparse(node)
            self._add(Rule.MONKEY_PATCH, node, f"attribute {'delete' if isinstance(node.ctx, ast.Del) else 'write'} `{what}`")
        root = node.value
        while isinstance(root, ast.Attribute):
            root = root.value
        if not (isinstance(root, ast.Name) and root.id in self.aliases):  # a value: each attribute is listed
            if not reflective and (found := value_attribute_rule(node.attr, self._in_jit(node))) is not None:
                self._add(found[0], node, found[1])
            return
        parent = self.parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.value is node:
            return  # not the whole chain
        full = self.resolve(node)
        if full is not None:
            self._chain(full, node)

    def _chain(self, full: str, node: ast.AST) -> None:
        head = full.split(".", 1)[0]
        if head == "torch":
            self._torch_chain(full, node)
        elif head == "triton":
            if not triton_allowed(full):
                self._add(Rule.TRITON_INTERNALS, node, f"`{full}`")
        elif not stdlib_allowed(full):
            self._add(Rule.REFLECTION, node, f"`{full}` (only {head}'s plain names)")

    def _torch_chain(self, full: str, node: ast.AST) -> None:
        if full in TORCH_SIDE_STREAM:
            self._add(Rule.SIDE_STREAM, node, f"`{full}`")
        elif full in TORCH_CUDA_GRAPH or full.startswith("torch.cuda.graphs."):
            self._add(Rule.CUDA_GRAPH, node, f"`{full}`")
        elif full == TORCH_ALLOCATOR_CALL:
            if self._scope(node, _FUNCS) not in self.allocators:
                self._add(Rule.ALLOCATOR, node, "`torch.empty` outside the triton.set_allocator allocator")
        elif full not in TORCH_METADATA and full not in TORCH_CUDA_ALLOWED:
            self._add(Rule.TORCH_COMPUTE, node, f"`{full}`")

    def _subscript_store(self, node: ast.Subscript) -> None:
        """Item writes on the host go only into Python containers this file builds (a dict or list literal);
        anything else may be a tensor, and `t[...] = v` on a tensor is a torch copy kernel."""
        root = node.value
        while isinstance(root, ast.Attribute | ast.Subscript | ast.Call):
            root = root.func if isinstance(root, ast.Call) else root.value
        if isinstance(root, ast.Name) and root.id in self.aliases:
            self._add(Rule.MONKEY_PATCH, node, f"item write into module `{root.id}`")
        elif self._in_jit(node):
            return
        elif not (isinstance(root, ast.Name) and root.id in self.containers and node.value is root):
            self._add(Rule.TENSOR_ASSIGNMENT, node, f"`{ast.unparse(node)} = ...` on the host")

    # whole-file requirements ------------------------------------------------------------------------------
    def _structure(self, nodes: list[ast.AST]) -> None:
        top = {n.name: n for n in self.tree.body if isinstance(n, ast.FunctionDef | ast.ClassDef)}
        if not isinstance(top.get("run"), ast.FunctionDef):
            self._add(Rule.NO_RUN, None, "no module-level `def run(...)`")
        if not self.has_triton:
            self._add(Rule.NO_TRITON_IMPORT, None, "triton is not imported")
        if not self.jit_defs:
            self._add(Rule.NO_JIT, None, "no function decorated with @triton.jit")
            return
        if "run" in top and not self._launch_reachable(nodes, top):
            self._add(Rule.NO_LAUNCH, top["run"], "no `kernel[grid](...)` launch reachable from run")

    def _launch_reachable(self, nodes: list[ast.AST], top: dict[str, ast.AST]) -> bool:
        sites = [n for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Subscript)
                 and (dotted(n.func.value) or ("",))[-1] in self.jit_defs and not self._in_jit(n)]
        return bool({top_owner(s, self.parents, self.tree) for s in sites} & reachable_from_run(top))
