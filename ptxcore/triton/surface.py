"""What a Triton candidate module may name: the allow-lists of names, attributes of values and import-time code
(pure functions over `ast`; the checker that applies them per node is `ptxcore.triton.validate`).

A deny-list of reflection tricks keeps losing (`type(A).mm`, `jit_fn.get_capture_scope()["__builtins__"]`,
`'{0.__class__}'.format(x)`): here everything is refused unless it is on a list. A name is one the file binds,
an import, or an allowed builtin; no other builtin name may appear at all (used or rebound), so Python's
fall-back to builtins can reach nothing else. An attribute of anything but an imported module must be on the
host or the jit list of rules.py. At import, only imports, decorated function definitions and constant
bindings run, and their expressions call only IMPORT_TIME_CALLS.
"""

from __future__ import annotations

import ast
import builtins
import re
from collections.abc import Callable, Iterator

from .astutil import is_dunder, is_main_guard
from .rules import (
    ALLOWED_BUILTINS,
    FORBIDDEN_BUILTINS,
    HOST_ATTRIBUTES,
    IMPORT_TIME_CALLS,
    JIT_ATTRIBUTES,
    TENSOR_METHODS,
    TRITON_DECORATORS,
    Rule,
)

BUILTIN_NAMES = frozenset(dir(builtins))
_DUNDER_TEXT = re.compile(r"__\w+__")
Finding = tuple[Rule, ast.AST, str]
Resolve = Callable[[ast.AST], "str | None"]


def name_rule(name: str) -> tuple[Rule, str] | None:
    """Why `name` may not appear in a candidate at all (used or bound), or None."""
    if name in FORBIDDEN_BUILTINS:
        return FORBIDDEN_BUILTINS[name], f"`{name}`"
    if is_dunder(name):
        return Rule.REFLECTION, f"`{name}`"
    if name in BUILTIN_NAMES and name not in ALLOWED_BUILTINS:
        return Rule.NAME_NOT_ALLOWED, f"`{name}` (a builtin outside the allowed set)"
    return None


def value_attribute_rule(attr: str, in_jit: bool) -> tuple[Rule, str] | None:
    """Why `.attr` may not be asked of a value (anything but an imported module), or None."""
    if attr in (JIT_ATTRIBUTES if in_jit else HOST_ATTRIBUTES):
        return None
    if not in_jit and (attr in TENSOR_METHODS or attr.rstrip("_") in TENSOR_METHODS):
        return Rule.TENSOR_METHOD, f"`.{attr}`"
    return Rule.ATTRIBUTE_NOT_ALLOWED, f"`.{attr}`"


def bound_names(nodes: list[ast.AST]) -> set[str]:
    """Every name the checked nodes bind anywhere (assignments, parameters, definitions, imports, handlers)."""
    names: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            names.add(node.id)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".", 1)[0])
        elif isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name:
            names.add(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            names.add(node.rest)
    return names


def docstrings(tree: ast.Module) -> set[int]:
    """ids of the string constants that are docstrings (a module's or a function's first statement)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def dunder_text(value: object) -> bool:
    """A string constant naming a dunder (`'__builtins__'`, `'{0.__class__}'`): reflection by string."""
    return isinstance(value, str | bytes) and value not in ("__main__", b"__main__") and bool(
        _DUNDER_TEXT.search(value if isinstance(value, str) else value.decode("latin-1")))


def _import_time_calls(expr: ast.AST, resolve: Resolve) -> Iterator[Finding]:
    """Calls in an expression evaluated at import that are not IMPORT_TIME_CALLS (lambda bodies do not run)."""
    todo = [expr]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.Lambda):
            todo.extend(d for d in (*node.args.defaults, *node.args.kw_defaults) if d is not None)
            continue
        if isinstance(node, ast.Call):
            name = resolve(node.func) or (node.func.id if isinstance(node.func, ast.Name)
                                          and node.func.id in ALLOWED_BUILTINS else None)
            if name not in IMPORT_TIME_CALLS:
                yield Rule.IMPORT_TIME, node, f"`{ast.unparse(node.func)}(...)` called at import"
        todo.extend(ast.iter_child_nodes(node))


def _definition(node: ast.FunctionDef, resolve: Resolve) -> Iterator[Finding]:
    """A module-level def: decorators from TRITON_DECORATORS; decorators, defaults and annotations run at import."""
    for deco in node.decorator_list:
        target = deco.func if isinstance(deco, ast.Call) else deco
        if resolve(target) not in TRITON_DECORATORS:
            yield Rule.IMPORT_TIME, deco, f"decorator `@{ast.unparse(target)}`"
        elif isinstance(deco, ast.Call):
            for arg in (*deco.args, *(k.value for k in deco.keywords)):
                yield from _import_time_calls(arg, resolve)
    args = node.args
    evaluated = [*args.defaults, *(d for d in args.kw_defaults if d is not None), node.returns,
                 *(a.annotation for a in (*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg)
                   if a is not None)]
    for expr in evaluated:
        if expr is not None:
            yield from _import_time_calls(expr, resolve)


def import_time(body: list[ast.stmt], resolve: Resolve) -> Iterator[Finding]:
    """What the module's top level may be: imports, function definitions, constant bindings, docstrings, the
    main guard (its body never runs; its else branch is top level too)."""
    for stmt in body:
        if isinstance(stmt, ast.Import | ast.ImportFrom | ast.Pass | ast.ClassDef):
            continue  # imports and classes have rules of their own
        if isinstance(stmt, ast.FunctionDef):
            yield from _definition(stmt, resolve)
        elif isinstance(stmt, ast.Assign | ast.AnnAssign) and stmt.value is not None:
            yield from _import_time_calls(stmt.value, resolve)
            if isinstance(stmt, ast.AnnAssign):
                yield from _import_time_calls(stmt.annotation, resolve)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue
        elif is_main_guard(stmt):
            yield from import_time(stmt.orelse, resolve)
        else:
            yield Rule.IMPORT_TIME, stmt, f"`{type(stmt).__name__.lower()}` statement at module level"
