"""The `batchd` command itself (its subcommands are tested where they act: tests/api, tests/e2e)."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BATCHD = Path(sys.executable).parent / "batchd"


def test_version_is_the_package_version():
    """`batchd --version` prints the installed package's version (pyproject.toml's), and needs no
    subcommand."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    result = subprocess.run([str(BATCHD), "--version"], capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout, result.stderr) == (0, f"batchd {version}\n", "")
