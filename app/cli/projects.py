"""`batchd projects set | list | limit | archive`: each project's share, limits, windows and retention."""

from __future__ import annotations

import argparse
import asyncio
import sys

from app.cli.common import _add_storage_flags, _settings, _with_database


def _projects_set(args: argparse.Namespace) -> int:
    from app.domains.organization.projects import set_project

    given = (
        args.weight,
        args.max_enqueued_tokens,
        args.completion_windows,
        args.retention_days,
        args.max_bytes,
        args.max_active_batches,
        args.allow_uri,
    )
    if all(value is None for value in given):
        print(
            "nothing to set: give --weight, --max-enqueued-tokens, --max-bytes, --max-active-batches, "
            "--completion-windows, --retention-days and/or --allow-uri",
            file=sys.stderr,
        )
        return 2
    windows = args.completion_windows
    import_uris = None if args.allow_uri is None else [uri for uri in args.allow_uri if uri != "none"]
    if windows is not None and windows != "default":
        windows = windows.split(",")
    try:
        project = asyncio.run(
            _with_database(
                _settings(args),
                lambda db: set_project(
                    db,
                    args.name,
                    args.weight,
                    args.max_enqueued_tokens,
                    windows,
                    args.retention_days,
                    max_bytes=args.max_bytes,
                    max_active_batches=args.max_active_batches,
                    allowed_import_uris=import_uris,
                ),
            )
        )
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    print(project.line())
    return 0


def _projects_list(args: argparse.Namespace) -> int:
    from app.domains.organization.projects import list_projects

    for project in asyncio.run(_with_database(_settings(args), list_projects)):
        print(project.line())
    return 0


async def _as_operator(db, work):
    """Run `work(session, caller)` in one unit of work as the operator (the CLI: an admin with no
    key, so audit entries name no actor), through the Administration API's own services."""
    from app.core.config import DEFAULT_PROJECT
    from app.domains.organization.auth import Caller

    async with db.write() as session:
        return await work(session, Caller(DEFAULT_PROJECT, is_admin=True))


def _projects_limit(args: argparse.Namespace) -> int:
    from app.core.errors import ApiError
    from app.domains.limits.rate_limits import ID_PREFIX, RateLimits
    from app.domains.organization.schemas import RateLimitUpdateParams

    given = {
        name: None if value == "none" else value
        for name, value in (
            ("batch_1_day_max_input_tokens", args.batch_1_day_max_input_tokens),
            ("max_requests_per_1_day", args.max_requests_per_1_day),
        )
        if value is not None
    }
    if not given:
        print("nothing to set: give --batch-1-day-max-input-tokens and/or --max-requests-per-1-day", file=sys.stderr)
        return 2

    async def work(session, caller):
        params = RateLimitUpdateParams.model_validate(given)
        return await RateLimits(session, caller).update(args.name, ID_PREFIX + args.model, params)

    try:
        limit = asyncio.run(_with_database(_settings(args), lambda db: _as_operator(db, work)))
    except ApiError as error:
        print(error.message, file=sys.stderr)
        return 2
    print(
        f"{args.name}\t{limit.model}\tinput tokens a day {limit.batch_1_day_max_input_tokens}"
        f"\trequests a day {limit.max_requests_per_1_day}"
    )
    return 0


def _projects_archive(args: argparse.Namespace) -> int:
    from app.core.errors import ApiError
    from app.domains.organization.org_projects import OrganizationProjects

    async def work(session, caller):
        return await OrganizationProjects(session, caller).archive(args.name)

    try:
        _, cancelled = asyncio.run(_with_database(_settings(args), lambda db: _as_operator(db, work)))
    except ApiError as error:
        print(error.message, file=sys.stderr)
        return 1
    print(f"project {args.name} archived; {cancelled} batches cancelled", file=sys.stderr)
    return 0


def _daily_limit(value: str) -> int | str:
    """A whole number, or `none` for no limit."""
    if value == "none":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'none', got {value!r}") from None


def _token_limit(value: str) -> int | str:
    """A whole number of tokens, or `default` for the server-wide BATCHD_PROJECT_MAX_ENQUEUED_TOKENS."""
    if value == "default":
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number or 'default', got {value!r}") from None


def _quota(value: str) -> int | str:
    """A whole number, `none` for no limit, or `default` for the server-wide setting."""
    if value in ("none", "default"):
        return value
    try:
        return int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, 'none' or 'default', got {value!r}") from None


def add_parser(commands) -> None:
    projects = commands.add_parser(
        "projects", help="per-project fair-share weight, token limit, completion windows and retention"
    )
    projects_commands = projects.add_subparsers(dest="projects_command", required=True)
    _add_set_parser(projects_commands)
    projects_list = projects_commands.add_parser(
        "list", help="configured projects: name, weight, token limit, completion windows, retention days"
    )
    _add_storage_flags(projects_list)
    projects_list.set_defaults(func=_projects_list)
    projects_limit = projects_commands.add_parser(
        "limit", help="a project's daily limits for one model (as the Administration API's rate_limits)"
    )
    projects_limit.add_argument("name", metavar="NAME", help="the project's id")
    projects_limit.add_argument("--model", required=True, help="the served model the limits are for")
    for flag in ("--batch-1-day-max-input-tokens", "--max-requests-per-1-day"):
        projects_limit.add_argument(flag, type=_daily_limit, metavar="N|none")
    _add_storage_flags(projects_limit)
    projects_limit.set_defaults(func=_projects_limit)
    projects_archive = projects_commands.add_parser(
        "archive", help="archive a project: its keys stop working, its running batches are cancelled"
    )
    projects_archive.add_argument("name", metavar="NAME", help="the project's id")
    _add_storage_flags(projects_archive)
    projects_archive.set_defaults(func=_projects_archive)


def _add_set_parser(projects_commands) -> None:
    projects_set = projects_commands.add_parser(
        "set", help="change a project's settings (replicas apply them within seconds)"
    )
    projects_set.add_argument("name", metavar="NAME", help="the project, as its API keys name it")
    projects_set.add_argument(
        "--weight", type=int, help="share of each model's lines relative to other busy projects (default 1)"
    )
    projects_set.add_argument(
        "--max-enqueued-tokens",
        type=_token_limit,
        metavar="N|default",
        help="prompt tokens this project may have enqueued per model; 'default' uses BATCHD_PROJECT_MAX_ENQUEUED_TOKENS",
    )
    projects_set.add_argument(
        "--max-bytes",
        type=_quota,
        metavar="N|none|default",
        help="bytes of live files this project may store; 'none' for no limit, 'default' for BATCHD_PROJECT_MAX_BYTES",
    )
    projects_set.add_argument(
        "--max-active-batches",
        type=_quota,
        metavar="N|none|default",
        help="unfinished batches this project may have; 'none' for no limit, 'default' for "
        "BATCHD_PROJECT_MAX_ACTIVE_BATCHES",
    )
    projects_set.add_argument(
        "--completion-windows",
        metavar="W[,W...]|default",
        help="completion windows this project's batches may use, e.g. 24h; 'default' allows BATCHD_COMPLETION_WINDOWS",
    )
    projects_set.add_argument(
        "--retention-days",
        type=_daily_limit,
        metavar="N|none",
        help="delete this project's files and batch outputs N days after they were made (the sweeper, "
        "audited); 'none' keeps them until they expire",
    )
    projects_set.add_argument(
        "--allow-uri",
        action="append",
        metavar="s3://BUCKET/PREFIX/|none",
        help="an S3 prefix this project may import files from (POST /v1/files with {purpose, url}), read with "
        "the server's credentials; repeat for more; replaces the project's list, 'none' clears it "
        "(BATCHD_IMPORT_ALLOWED_URIS applies to every project besides)",
    )
    _add_storage_flags(projects_set)
    projects_set.set_defaults(func=_projects_set)
