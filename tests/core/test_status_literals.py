"""No status is spelled as a raw string outside app/core/statuses.py: code names them by their
enum member, so a renamed or removed status breaks at import (and mypy), not silently at run time.

The scan reads every string constant of app/ (not docstrings) and flags those that equal a value
of one of statuses.py's enums, or an f-string spelling a webhook event (`f"batch.{x}"`). Two uses
of such a word are not statuses and are skipped: a fault point's name (`fault_point("finalizing",
...)`, a test hook) and an attribute name given to getattr/hasattr/setattr."""

from __future__ import annotations

import ast
import enum
from pathlib import Path

from app.core import statuses

APP = Path(__file__).resolve().parents[2] / "app"
STATUSES_MODULE = APP / "core" / "statuses.py"
# Calls whose string arguments are names, not statuses: {function: positions of those arguments}.
NAME_ARGUMENTS = {"fault_point": (0,), "getattr": (1,), "hasattr": (1,), "setattr": (1,)}
# Files other work of issue #34 is rewriting: the literals still there, by file, until that work
# names the members. Remove an entry once it is gone; the test fails on a stale entry.
KNOWN_EXCEPTIONS: dict[str, set[str]] = {}


def status_values() -> set[str]:
    """Every value of every StrEnum in app/core/statuses.py."""
    return {
        member.value
        for enum_class in vars(statuses).values()
        if isinstance(enum_class, type) and issubclass(enum_class, enum.StrEnum) and enum_class is not enum.StrEnum
        for member in enum_class
    }


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


def status_literals(source: str, values: set[str]) -> list[tuple[str, int]]:
    """(literal, line) of every raw status string in one module's source."""
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


def test_the_scan_finds_what_it_looks_for():
    """The scanner itself can fail: it finds each kind of literal, and skips names and docstrings."""
    values = status_values()
    source = '''
"""A docstring that says in_progress."""
def f(batch, ending, state):
    """ready or not"""
    if batch.status == "in_progress" or state in ("starting", "dead"):
        send(f"batch.{ending}", "batch.completed")
    fault_point("finalizing", here)
    return getattr(state, "ready", False), "a sentence about completed work", "done"
'''
    assert status_literals(source, values) == [
        ("in_progress", 5),
        ("starting", 5),
        ("dead", 5),
        ("f'batch.{ending}'", 6),
        ("batch.completed", 6),
        ("done", 8),
    ]


def test_no_status_literal_outside_statuses_module():
    values = status_values()
    assert {"in_progress", "running", "ready", "batch.expired"} <= values
    unexpected, seen = [], {}
    for path in sorted(APP.rglob("*.py")):
        if path == STATUSES_MODULE:
            continue
        name = str(path.relative_to(APP.parent))
        hits = status_literals(path.read_text(), values)
        seen[name] = {literal for literal, _ in hits}
        known = KNOWN_EXCEPTIONS.get(name, set())
        unexpected += [f"  {name}:{line}: {literal}" for literal, line in hits if literal not in known]
    stale = {name: known - seen.get(name, set()) for name, known in KNOWN_EXCEPTIONS.items()}
    stale = {name: literals for name, literals in stale.items() if literals}
    listing = "\n".join(unexpected)
    assert not unexpected, f"raw status strings (use the enum in app/core/statuses.py):\n{listing}"
    assert not stale, f"known exceptions no longer present (remove them from KNOWN_EXCEPTIONS): {stale}"
