"""The `batchd` command: serve, run-batch, db upgrade | current | check | downgrade, keys create | list | revoke, projects set | list; and a client of any OpenAI-compatible server: batches, files."""

from __future__ import annotations

import argparse

from app.cli import client_batches, client_files, db, keys, projects, run_batch, serve
from app.cli.common import _settings
from app.cli.run_batch import _run_batch
from app.cli.serve import KEEP_ALIVE_SECONDS, _open_mode_refusal
from app.core.version import VERSION

# Named here as before the package split (tests and scripts import them from app.cli).
__all__ = ["KEEP_ALIVE_SECONDS", "_open_mode_refusal", "_settings", "build_parser", "main"]


class _Parser(argparse.ArgumentParser):
    """Refusals in one line (a script's log or a CI step shows the reason, not the usage)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="batchd", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)
    for group in (serve, run_batch, db, keys, projects, client_batches, client_files):
        group.add_parser(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        hint = "see `batchd run-batch --help`; other vLLM engine options go as --engine-arg KEY=VALUE"
        parser.error(f"unrecognized arguments: {' '.join(unknown)}" + (f" ({hint})" if args.func is _run_batch else ""))
    return args.func(args)
