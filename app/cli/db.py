"""`batchd db upgrade | current | check | downgrade`: the database's migrations."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from app.cli.common import _add_storage_flags, _settings
from app.core.private_files import private_dir

if TYPE_CHECKING:
    from app.db.migrate import RevisionState


def _storage_command(commands, name: str, func, help: str) -> argparse.ArgumentParser:
    """A subcommand acting on the database the storage flags (or their environment) name."""
    parser = commands.add_parser(name, help=help)
    _add_storage_flags(parser)
    parser.set_defaults(func=func)
    return parser


def _db_upgrade(args: argparse.Namespace) -> int:
    from app.db.migrate import upgrade_sync

    settings = _settings(args)
    private_dir(settings.data_dir)
    upgrade_sync(settings.resolved_database_url())
    print("database is at the latest revision")
    return 0


def _db_current(args: argparse.Namespace) -> int:
    state = _revision_state(args)
    if state is None:
        return 1
    print(state.describe())
    return 0


def _db_check(args: argparse.Namespace) -> int:
    """Exit 0 only at head: a readiness gate or CI step before starting (or after migrating)."""
    state = _revision_state(args)
    if state is None:
        return 1
    if state.at_head:
        print(f"database is at head ({state.head})")
        return 0
    print(f"database is not at head: {state.describe()}", file=sys.stderr)
    return 1


def _revision_state(args: argparse.Namespace) -> RevisionState | None:
    """The database's RevisionState, or None after one line saying why it could not be read."""
    from sqlalchemy.exc import SQLAlchemyError

    from app.db.migrate import revision_state

    try:
        return revision_state(_settings(args).resolved_database_url())
    except (OSError, SQLAlchemyError) as error:
        reason = getattr(error, "orig", None) or error
        print(f"batchd db {args.db_command}: error: cannot read the database's revision: {reason}", file=sys.stderr)
        return None


def _db_downgrade(args: argparse.Namespace) -> int:
    from alembic.util.exc import CommandError

    from app.db.migrate import downgrade_sync, revision_state

    url = _settings(args).resolved_database_url()
    print(
        f"warning: downgrading to {args.revision} drops what later migrations added (tables, columns and "
        "their data); stop every replica newer than that revision first",
        file=sys.stderr,
    )
    try:
        downgrade_sync(url, args.revision)
    except CommandError as error:
        print(f"batchd db downgrade: error: {error}", file=sys.stderr)
        return 2
    print(f"database is now at {revision_state(url).describe()}")
    return 0


def add_parser(commands) -> None:
    db = commands.add_parser("db", help="database maintenance")
    db_commands = db.add_subparsers(dest="db_command", required=True)
    _storage_command(db_commands, "upgrade", _db_upgrade, "apply migrations")
    _storage_command(db_commands, "current", _db_current, "print the database's revision and whether it is head")
    _storage_command(
        db_commands, "check", _db_check, "exit 0 if the database is at head, else 1 with one line saying why"
    )
    db_downgrade = _storage_command(
        db_commands, "downgrade", _db_downgrade, "revert migrations down to REVISION (drops what later ones added)"
    )
    db_downgrade.add_argument("revision", metavar="REVISION", help="a revision id (see `db current`), -1, or base")
