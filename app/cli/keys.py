"""`batchd keys create | list | revoke`: the API keys stored in the database."""

from __future__ import annotations

import argparse
import asyncio
import sys

from app.cli.common import _add_storage_flags, _settings, _with_database
from app.core.config import DEFAULT_PROJECT


def _keys_create(args: argparse.Namespace) -> int:
    from app.domains.organization.auth import create_stored_key

    if args.project is None and not args.admin:
        print("batchd keys create: error: --project is required (or --admin)", file=sys.stderr)
        return 2
    project = args.project or DEFAULT_PROJECT
    settings = _settings(args)
    key = asyncio.run(_with_database(settings, lambda db: create_stored_key(settings, db, project, args.admin)))
    print(key)
    kind = "admin API key" if args.admin else "API key"
    print(f"({kind} for project '{project}'; it is shown only once)", file=sys.stderr)
    return 0


def _keys_list(args: argparse.Namespace) -> int:
    from app.domains.organization.auth import list_stored_keys

    for key in asyncio.run(_with_database(_settings(args), list_stored_keys)):
        print(key.line())
    return 0


def _keys_revoke(args: argparse.Namespace) -> int:
    from app.domains.organization.auth import revoke_stored_key

    if not asyncio.run(_with_database(_settings(args), lambda db: revoke_stored_key(db, args.key_id))):
        print(f"no stored key with id {args.key_id} (see `batchd keys list`)", file=sys.stderr)
        return 1
    print(f"key {args.key_id} revoked", file=sys.stderr)
    return 0


def add_parser(commands) -> None:
    keys = commands.add_parser("keys", help="API keys")
    keys_commands = keys.add_subparsers(dest="keys_command", required=True)
    keys_create = keys_commands.add_parser("create", help="create a key for a project")
    keys_create.add_argument("--project", help="the key's project (required unless --admin)")
    keys_create.add_argument(
        "--admin",
        action="store_true",
        help="an admin key (project 'default'): the Usage and Administration APIs, every project",
    )
    _add_storage_flags(keys_create)
    keys_create.set_defaults(func=_keys_create)
    keys_list = keys_commands.add_parser(
        "list", help="stored keys, one a line: id, project, created (UTC), active or revoked"
    )
    _add_storage_flags(keys_list)
    keys_list.set_defaults(func=_keys_list)
    keys_revoke = keys_commands.add_parser("revoke", help="revoke a stored key by its id")
    keys_revoke.add_argument("key_id", type=int, metavar="KEY_ID")
    _add_storage_flags(keys_revoke)
    keys_revoke.set_defaults(func=_keys_revoke)
