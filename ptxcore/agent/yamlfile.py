"""Load a YAML file into a pydantic model; errors name the file, the line and the bad key."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ptxcore.schema.files import InputFileError, read_text

M = TypeVar("M", bound=BaseModel)

MAX_YAML_BYTES = 1 << 20
"""Largest YAML file read (campaign files are a few kB)."""
MAX_YAML_NODES = 100_000
"""Most nodes a document may have with its aliases expanded (an alias bomb has billions)."""


class YamlModelError(ValueError):
    """A YAML file that does not parse or does not validate; the message is one line."""


def _node_at(root: yaml.Node | None, loc: tuple[Any, ...]) -> tuple[yaml.Node | None, bool]:
    """The deepest node along `loc`, and whether `loc`'s last key was found as a mapping key."""
    node = root
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            match = next((kv for kv in node.value if kv[0].value == str(part)), None)
            if match is None:
                return node, False
            node = match[1]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return node, False
    return node, True


def _key_node(root: yaml.Node | None, loc: tuple[Any, ...]) -> yaml.Node | None:
    """For an unknown or wrong key, the key node itself (its line is the most useful)."""
    parent, _ = _node_at(root, loc[:-1])
    if isinstance(parent, yaml.MappingNode) and loc:
        for key, _value in parent.value:
            if key.value == str(loc[-1]):
                return key
    return None


def _clean_loc(loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """Drop pydantic's union-branch and validator tags (e.g. `literal['a']`, `function-after[...]`)."""
    return tuple(p for p in loc if not (isinstance(p, str) and ("[" in p or p.startswith("function-"))))


def _located(root: yaml.Node | None, err: dict[str, Any]) -> tuple[int, tuple[Any, ...], str]:
    loc = _clean_loc(tuple(err["loc"]))
    node = _key_node(root, loc) if err["type"] == "extra_forbidden" else None
    if node is None:
        node, _ = _node_at(root, loc)
    line = node.start_mark.line + 1 if node is not None else 0
    msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"].removeprefix("Value error, ")
    return line, loc, msg


def describe_errors(where: str, root: yaml.Node | None, errors: list[dict[str, Any]]) -> str:
    """The first problem in file order (for a union, the branch that got deepest), as one line."""
    located = [_located(root, e) for e in errors]
    deepest = [x for x in located
               if not any(len(y[1]) > len(x[1]) and y[1][: len(x[1])] == x[1] for y in located)]
    line, loc, msg = min(deepest, key=lambda x: x[0])
    key = ".".join(str(p) for p in loc) or "(top level)"
    where_line = f"{where}:{line}" if line else where
    more = f" (and {len(deepest) - 1} more)" if len(deepest) > 1 else ""
    return f"{where_line}: {key}: {msg}{more}"


def expanded_size(root: yaml.Node | None, limit: int = MAX_YAML_NODES) -> int:
    """Nodes of the document once aliases are expanded (counted per distinct node, so linear, not exponential);
    stops counting past `limit`."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        if id(node) in sizes:
            return sizes[id(node)]
        sizes[id(node)] = limit + 1  # a node reached again while being counted: recursive alias
        if isinstance(node, yaml.MappingNode):
            total = 1 + sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total = 1 + sum(size(v) for v in node.value)
        else:
            total = 1
        sizes[id(node)] = min(total, limit + 1)
        return sizes[id(node)]

    return 0 if root is None else size(root)


def locate(where: str, text: str | None, key: str) -> str:
    """`where:line` of a dotted key (`models.0.model`) in the YAML text, else `where`."""
    if not text:
        return where
    try:
        node, found = _node_at(yaml.compose(text), tuple(int(p) if p.isdigit() else p for p in key.split(".")))
    except (yaml.YAMLError, RecursionError):
        return where
    return f"{where}:{node.start_mark.line + 1}" if found and node is not None else where


def _long_number(root: yaml.Node | None) -> str:
    """`:line` of the first scalar too long to convert to a number (Python's 4300-digit limit), else ''."""
    stack, seen = ([root] if root is not None else []), set()
    while stack:
        node = stack.pop()
        if id(node) in seen:  # an alias: each node is looked at once (an alias bomb stays linear)
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            stack.extend(v for kv in reversed(node.value) for v in reversed(kv))
        elif isinstance(node, yaml.SequenceNode):
            stack.extend(reversed(node.value))
        elif isinstance(node, yaml.ScalarNode) and node.tag.endswith(":int") and len(node.value) > 4000:
            return f":{node.start_mark.line + 1}"
    return ""


def _load(text: str, where: str) -> tuple[yaml.Node | None, object]:
    """The document's node tree and its data; every YAML failure is a one-line YamlModelError."""
    root = None
    try:
        root = yaml.compose(text)
        if expanded_size(root) > MAX_YAML_NODES:
            raise YamlModelError(f"{where}: more than {MAX_YAML_NODES} values once YAML aliases are expanded")
        return root, yaml.safe_load(text)
    except YamlModelError:
        raise
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f":{mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise YamlModelError(f"{where}{line}: invalid YAML: {problem}") from exc
    except RecursionError as exc:
        raise YamlModelError(f"{where}: nested too deeply") from exc
    except ValueError as exc:  # a number of more than 4300 digits (int() refuses to convert it)
        raise YamlModelError(f"{where}{_long_number(root)}: invalid YAML: a number too long to convert "
                             f"({str(exc).split(':')[0]})") from exc


def parse_yaml_model(text: str, model: type[M], where: str = "<yaml>") -> M:
    """Validate YAML text against `model`; the first error becomes a one-line YamlModelError."""
    if len(text) > MAX_YAML_BYTES:
        raise YamlModelError(f"{where}: larger than {MAX_YAML_BYTES} bytes")
    root, data = _load(text, where)
    if data is None:
        raise YamlModelError(f"{where}: empty file")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise YamlModelError(describe_errors(where, root, exc.errors())) from exc
    except RecursionError as exc:
        raise YamlModelError(f"{where}: nested too deeply") from exc


def read_yaml_text(path: Path | str) -> str:
    """A YAML file's text; too large (checked before reading), not a regular file, not UTF-8, or unreadable: a
    one-line YamlModelError naming it."""
    try:
        return read_text(path, MAX_YAML_BYTES)
    except InputFileError as exc:
        raise YamlModelError(str(exc)) from None


def load_yaml_model(path: Path | str, model: type[M]) -> M:
    path = Path(path)
    return parse_yaml_model(read_yaml_text(path), model, where=str(path))
