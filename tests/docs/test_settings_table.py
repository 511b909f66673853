"""The settings table of docs/configuration.md is exactly the settings the code reads.

Two sources are compared with the page: the generator (scripts/settings_table.py: every
`Settings` field and `ENVIRONMENT_SETTINGS` entry, with its default and meaning), and a scan of
app/ for every `BATCHD_*` variable the code names as a whole string constant (what it passes to
`os.environ`), so a variable read outside `Settings` and missing from the catalogue fails too."""

from __future__ import annotations

import ast
import importlib.util
import re
from collections import Counter
from pathlib import Path

from app.core.config import ENVIRONMENT_SETTINGS, Settings

ROOT = Path(__file__).resolve().parents[2]
VARIABLE = re.compile(r"BATCHD_[A-Z0-9_]+")
ROW_VARIABLE = re.compile(r"^\| `(BATCHD_[A-Z0-9_]+)`")
# Read by the code, never by a user's server: the tests' fault injection (app/core/faults.py).
TEST_ONLY = {"BATCHD_TEST_FAULT"}


def _generator():
    spec = importlib.util.spec_from_file_location("settings_table", ROOT / "scripts" / "settings_table.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _page_variables() -> list[str]:
    table = _generator().page_table((ROOT / "docs" / "configuration.md").read_text())
    return [match.group(1) for line in table.splitlines() if (match := ROW_VARIABLE.match(line))]


def _variables_named_in_app() -> set[str]:
    """Whole-string `BATCHD_*` constants outside the catalogue itself (app/core/config.py)."""
    names = set()
    for path in (ROOT / "app").rglob("*.py"):
        if path == ROOT / "app" / "core" / "config.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and VARIABLE.fullmatch(node.value):
                names.add(node.value)
    return names


def test_the_page_holds_the_generated_table() -> None:
    generator = _generator()
    page = generator.page_table((ROOT / "docs" / "configuration.md").read_text())
    assert page == generator.table(), "run: python scripts/settings_table.py"


def test_every_variable_the_code_reads_is_in_the_table_once_and_nothing_else() -> None:
    listed = _page_variables()
    assert [name for name, count in Counter(listed).items() if count > 1] == []
    from_settings = {f"BATCHD_{name.upper()}" for name in Settings.model_fields}
    read_by_code = from_settings | (_variables_named_in_app() - TEST_ONLY)
    assert set(listed) == read_by_code
    assert {setting.name for setting in ENVIRONMENT_SETTINGS} == read_by_code - from_settings


def test_every_setting_has_a_meaning() -> None:
    assert [name for name, field in Settings.model_fields.items() if not field.description] == []
