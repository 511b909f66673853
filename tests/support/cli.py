"""`batchd ARGS` run by its own entry point (`app.cli.main`) in the test's process: no interpreter
start per call, the same parsing, database work and output as the installed command."""

from __future__ import annotations

import io
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path
from types import SimpleNamespace

from app.cli import main


def batchd(data_dir: Path, database_url: str | None, *args: str, check: bool = True) -> SimpleNamespace:
    """Its exit status (`returncode`) and what it printed (`stdout`, `stderr`), run on the
    database of `data_dir` / `database_url` as `--data-dir` / `--database-url` give it."""
    argv = [*args, "--data-dir", str(data_dir)] + (["--database-url", database_url] if database_url else [])
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exit_:  # argparse's refusals
            code = exit_.code if isinstance(exit_.code, int) else 1
    if check:
        assert code == 0, err.getvalue()
    return SimpleNamespace(returncode=code, stdout=out.getvalue(), stderr=err.getvalue())


def on(server, *args: str, check: bool = True) -> SimpleNamespace:
    """`batchd ARGS` on a server's (or an app's) database."""
    return batchd(server.data_dir, server.database_url, *args, check=check)
