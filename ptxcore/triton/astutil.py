"""AST helpers of the Triton validator (pure functions over `ast` nodes)."""

from __future__ import annotations

import ast

from .rules import TRITON_API, TRITON_DSL_MODULES, TRITON_DSL_PATHS, TYPING_ALLOWED


def dotted(node: ast.AST) -> tuple[str, ...] | None:
    """`a.b.c` -> ("a", "b", "c"); None unless the chain is rooted at a plain name."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    parts.append(node.id)
    return tuple(reversed(parts))


def is_dunder(name: str) -> bool:
    return len(name) > 4 and name.startswith("__") and name.endswith("__")


def is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare) or len(node.test.ops) != 1:
        return False
    sides = [node.test.left, *node.test.comparators]
    names = [s for s in sides if isinstance(s, ast.Name) and s.id == "__name__"]
    mains = [s for s in sides if isinstance(s, ast.Constant) and s.value == "__main__"]
    return isinstance(node.test.ops[0], ast.Eq) and len(names) == 1 and len(mains) == 1


_CONTAINER_VALUES = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _is_container_display(value: ast.AST | None) -> bool:
    if isinstance(value, _CONTAINER_VALUES):
        return True
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("dict", "list")
            and not value.args and not value.keywords)


def container_names(nodes: list[ast.AST]) -> set[str]:
    """Names bound only by `name = {...}` / `[...]` / `dict()` assignments (any other binding disqualifies)."""
    good: set[str] = set()
    own: set[int] = set()
    for node in nodes:
        if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                and _is_container_display(node.value)):
            good.add(node.targets[0].id)
            own.add(id(node.targets[0]))
    bad = {n.id for n in nodes if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load) and id(n) not in own}
    bad |= {n.arg for n in nodes if isinstance(n, ast.arg)}
    return good - bad


def triton_allowed(full: str, as_import: bool = False) -> bool:
    """A chain rooted at triton: the host API (and attributes of it), or `<DSL path>.<public name>...` with no
    module on the way. A DSL path itself (a module object) only as what an import binds."""
    parts = full.split(".")
    if any(p.startswith("_") for p in parts):
        return False
    for api in TRITON_API:
        if full == api or full.startswith(api + "."):
            return not any(p in TRITON_DSL_MODULES for p in parts[api.count(".") + 1:])
    prefix = _dsl_prefix(full)
    if prefix is None:
        return False
    if full == prefix:
        return as_import
    return not any(p in TRITON_DSL_MODULES for p in parts[prefix.count(".") + 1:])


def _dsl_prefix(full: str) -> str | None:
    """The longest DSL path that `full` is or starts with."""
    hits = [p for p in TRITON_DSL_PATHS if full == p or full.startswith(p + ".")]
    return max(hits, key=len) if hits else None


def stdlib_allowed(full: str) -> bool:
    """math: its functions and constants; typing: annotation names; __future__: features."""
    parts = full.split(".")
    if len(parts) != 2 or parts[1].startswith("_"):
        return len(parts) == 1
    return parts[0] != "typing" or parts[1] in TYPING_ALLOWED


def top_owner(node: ast.AST | None, parents: dict[ast.AST, ast.AST], tree: ast.Module) -> str:
    """The name of the module-level statement that holds `node` ("" when it has none)."""
    while node is not None and parents.get(node) is not tree:
        node = parents.get(node)
    return getattr(node, "name", "") if node is not None else ""


def reachable_from_run(top: dict[str, ast.AST]) -> set[str]:
    """Module-level definitions reachable from `run` by the names their bodies mention."""
    seen: set[str] = set()
    todo = ["run"]
    while todo:
        name = todo.pop()
        if name in seen or name not in top:
            continue
        seen.add(name)
        todo.extend(n.id for n in ast.walk(top[name]) if isinstance(n, ast.Name) and n.id in top)
    return seen
