"""SASS stage: disassemble built objects and give the static target-family verdict."""

from .parse import SassInstruction, parse_sass
from .tools import ToolNotFoundError, find_tool
from .verdict import SassDumpError, classify, dump_sass, inspect_binary

__all__ = [
    "SassInstruction", "parse_sass", "ToolNotFoundError", "find_tool", "SassDumpError",
    "classify", "dump_sass", "inspect_binary",
]
