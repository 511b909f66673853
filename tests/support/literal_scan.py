"""The scan behind the literal checks (tests/core): every string constant of a module that is not
a docstring nor a name argument, and equals one of the given values."""

from __future__ import annotations

import ast
from pathlib import Path

APP = Path(__file__).resolve().parents[2] / "app"
# Calls whose string arguments are names, not values: {function: positions of those arguments}.
NAME_ARGUMENTS = {"fault_point": (0,), "getattr": (1,), "hasattr": (1,), "setattr": (1,)}


def _docstrings(tree: ast.AST) -> set[int]:
    owners = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    return {
        id(node.body[0].value)
        for node in ast.walk(tree)
        if isinstance(node, owners)
        and node.body
        and isinstance(node.body[0], ast.Expr)
        and isinstance(node.body[0].value, ast.Constant)
    }


def _name_arguments(tree: ast.AST) -> set[int]:
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", None)
            for position in NAME_ARGUMENTS.get(name or "", ()):
                if position < len(node.args):
                    skipped.add(id(node.args[position]))
    return skipped


def matching_literals(source: str, values: set[str]) -> list[tuple[str, int]]:
    """(literal, line) of every string constant of one module that equals one of `values`."""
    tree = ast.parse(source)
    skipped = _docstrings(tree) | _name_arguments(tree)
    event_prefixes = {value.split(".", 1)[0] + "." for value in values if "." in value}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skipped:
            if node.value in values:
                found.append((node.value, node.lineno))
        elif isinstance(node, ast.JoinedStr) and node.values:
            head = node.values[0]
            if isinstance(head, ast.Constant) and head.value in event_prefixes:
                found.append((ast.unparse(node), node.lineno))
                skipped.update(id(part) for part in node.values)
    return sorted(found, key=lambda hit: hit[1])
