"""No status is spelled as a raw string outside app/core/statuses.py: code names them by their
enum member, so a renamed or removed status breaks at import (and mypy), not silently at run time.

The scan reads every string constant of app/ (not docstrings) and flags those that equal a value
of one of statuses.py's enums, or an f-string spelling a webhook event (`f"batch.{x}"`). Two uses
of such a word are not statuses and are skipped: a fault point's name (`fault_point("finalizing",
...)`, a test hook) and an attribute name given to getattr/hasattr/setattr."""

from __future__ import annotations

import enum

from app.core import statuses
from tests.support.literal_scan import APP, matching_literals

STATUSES_MODULE = APP / "core" / "statuses.py"
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
    assert matching_literals(source, values) == [
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
        hits = matching_literals(path.read_text(), values)
        seen[name] = {literal for literal, _ in hits}
        known = KNOWN_EXCEPTIONS.get(name, set())
        unexpected += [f"  {name}:{line}: {literal}" for literal, line in hits if literal not in known]
    stale = {name: known - seen.get(name, set()) for name, known in KNOWN_EXCEPTIONS.items()}
    stale = {name: literals for name, literals in stale.items() if literals}
    listing = "\n".join(unexpected)
    assert not unexpected, f"raw status strings (use the enum in app/core/statuses.py):\n{listing}"
    assert not stale, f"known exceptions no longer present (remove them from KNOWN_EXCEPTIONS): {stale}"
