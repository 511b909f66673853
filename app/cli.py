"""The `batchd` command: serve, run-batch, db upgrade | current | check | downgrade, keys create | list | revoke, projects set | list."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import ValidationError

from app.core import tracing
from app.core.config import DEFAULT_PROJECT, Settings
from app.core.private_files import private_dir
from app.core.version import VERSION
from app.runbatch.engine_flags import add_engine_flags

if TYPE_CHECKING:
    from app.db.migrate import RevisionState

# How long an idle client connection stays open. uvicorn's 5 s is shorter than a load balancer's
# idle timeout (60 s on AWS's), so it would reuse a connection this server just closed (a 502);
# and a request sent as the 5 s ran out met a closed socket ("Server disconnected").
KEEP_ALIVE_SECONDS = 75


def _settings(args: argparse.Namespace) -> Settings:
    overrides = {
        name: value
        for name in (
            "host",
            "port",
            "data_dir",
            "database_url",
            "storage_url",
            "models",
            "loras",
            "model_config_file",
            "max_resident_engines",
        )
        if (value := getattr(args, name, None)) is not None
    }
    for flag in ("no_models", "api_only", "allow_open_mode"):
        if getattr(args, flag, False):
            overrides[flag] = True
    try:
        return Settings(**overrides)
    except ValidationError as error:
        raise SystemExit(_settings_problems(error)) from None


def _settings_problems(error: ValidationError) -> str:
    """One line a refused setting, named as its variable: `batchd: BATCHD_S3_SSE: Input should be ...`."""
    lines = []
    for problem in error.errors():
        message = problem["msg"].removeprefix("Value error, ")
        where = "".join(f"BATCHD_{str(part).upper()}: " for part in problem["loc"][:1])
        lines.append(f"batchd: {where}{message}")
    return "\n".join(lines)


def _add_storage_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data-dir", type=Path, help="SQLite file and blobs (env BATCHD_DATA_DIR)")
    parser.add_argument(
        "--database-url",
        help="e.g. postgresql+asyncpg://user@host/db (env BATCHD_DATABASE_URL; default SQLite)",
    )


def _serve(args: argparse.Namespace) -> int:
    import uvicorn

    from app.api.runtime import runtime_if_started
    from app.http.app import create_app
    from app.worker.runner import Worker

    settings = _settings(args)
    refusal = _open_mode_refusal(settings)
    if refusal is not None:
        print(refusal, file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level.upper(),
        format=f"%(asctime)s %(levelname)s [{settings.replica_id}] %(name)s: %(message)s",
    )
    if tracing.configure(settings.replica_id, settings.trace_line_sample):
        logging.getLogger("batchd").info("exporting traces (OTEL_* environment variables)")
    app = create_app(settings)

    class DrainingServer(uvicorn.Server):
        """On SIGTERM/SIGINT the worker drains at once (stops claiming, checkpoints, releases its
        leases), while uvicorn finishes the open requests."""

        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            runtime = runtime_if_started(app)
            if runtime is not None and isinstance(runtime.worker, Worker):
                runtime.loop.call_soon_threadsafe(runtime.worker.drain)

    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        timeout_graceful_shutdown=30,
        timeout_keep_alive=KEEP_ALIVE_SECONDS,
    )
    # Once its graceful shutdown is over, uvicorn raises the SIGTERM it caught again, to die by
    # it; a stop that was asked for and went cleanly is a success to service managers: exit 0.
    signal.signal(signal.SIGTERM, _exit_0)
    DrainingServer(config).run()
    return 0


def _open_mode_refusal(settings: Settings) -> str | None:
    """Why this server must not start: open mode (no key anywhere) on an address other than
    loopback, unless allowed. Decided before binding; the database is read only then."""
    from app.services.organization.auth import any_key_stored
    from app.services.organization.open_mode import REFUSED_BIND, is_loopback

    if settings.allow_open_mode or is_loopback(settings.host):
        return None
    if settings.parsed_api_keys() or settings.parsed_admin_keys():
        return None
    if asyncio.run(_with_database(settings, any_key_stored)):
        return None
    return REFUSED_BIND.format(host=settings.host)


def _exit_0(_sig, _frame) -> None:
    raise SystemExit(0)


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


def _keys_create(args: argparse.Namespace) -> int:
    from app.services.organization.auth import create_stored_key

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


async def _with_database(settings: Settings, work):
    """Run `work(db)` against the settings' database, migrated to the latest revision first."""
    from app.db.engine import Database
    from app.db.migrate import upgrade

    private_dir(settings.data_dir)
    url = settings.resolved_database_url()
    await upgrade(url)
    db = Database(url)
    try:
        return await work(db)
    finally:
        await db.dispose()


def _keys_list(args: argparse.Namespace) -> int:
    from app.services.organization.auth import list_stored_keys

    for key in asyncio.run(_with_database(_settings(args), list_stored_keys)):
        print(key.line())
    return 0


def _keys_revoke(args: argparse.Namespace) -> int:
    from app.services.organization.auth import revoke_stored_key

    if not asyncio.run(_with_database(_settings(args), lambda db: revoke_stored_key(db, args.key_id))):
        print(f"no stored key with id {args.key_id} (see `batchd keys list`)", file=sys.stderr)
        return 1
    print(f"key {args.key_id} revoked", file=sys.stderr)
    return 0


def _projects_set(args: argparse.Namespace) -> int:
    from app.services.organization.projects import set_project

    given = (args.weight, args.max_enqueued_tokens, args.completion_windows, args.retention_days)
    if all(value is None for value in given):
        print(
            "nothing to set: give --weight, --max-enqueued-tokens, --completion-windows and/or --retention-days",
            file=sys.stderr,
        )
        return 2
    windows = args.completion_windows
    if windows is not None and windows != "default":
        windows = windows.split(",")
    try:
        project = asyncio.run(
            _with_database(
                _settings(args),
                lambda db: set_project(
                    db, args.name, args.weight, args.max_enqueued_tokens, windows, args.retention_days
                ),
            )
        )
    except ValueError as error:
        print(error, file=sys.stderr)
        return 2
    print(project.line())
    return 0


def _projects_list(args: argparse.Namespace) -> int:
    from app.services.organization.projects import list_projects

    for project in asyncio.run(_with_database(_settings(args), list_projects)):
        print(project.line())
    return 0


async def _as_operator(db, work):
    """Run `work(session, caller)` in one unit of work as the operator (the CLI: an admin with no
    key, so audit entries name no actor), through the Administration API's own services."""
    from app.core.config import DEFAULT_PROJECT
    from app.services.organization.auth import Caller

    async with db.write() as session:
        return await work(session, Caller(DEFAULT_PROJECT, is_admin=True))


def _projects_limit(args: argparse.Namespace) -> int:
    from app.core.errors import ApiError
    from app.schemas.admin import RateLimitUpdateParams
    from app.services.limits.rate_limits import ID_PREFIX, RateLimits

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
    from app.services.organization.org_projects import OrganizationProjects

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


def _run_batch(args: argparse.Namespace) -> int:
    from app.runbatch.engine_flags import engine_options
    from app.runbatch.options import RunBatchOptions, RunBatchRefused
    from app.runbatch.runner import main as run_batch_main
    from app.runbatch.sinks import reserve_stdout

    if args.output == "-" or args.error_file == "-":
        reserve_stdout()  # before vLLM starts logging or spawning

    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    options = RunBatchOptions(
        input=args.input,
        output=args.output,
        model=args.model,
        served_model_name=args.served_model_name[0] if args.served_model_name else None,
        error_file=args.error_file,
        output_tmp_dir=args.output_tmp_dir,
        resume=args.resume,
        retry_failed=args.retry_failed,
        config=args.model_config_file,
        data_dir=args.data_dir or Settings().data_dir,
        engine_options=engine_options(args),
    )
    try:
        progress = asyncio.run(run_batch_main(options))
    except RunBatchRefused as error:
        print(f"batchd run-batch: error: {error}", file=sys.stderr)
        return 2
    print(progress.summary(), file=sys.stderr)
    return 0


class _Parser(argparse.ArgumentParser):
    """Refusals in one line (a script's log or a CI step shows the reason, not the usage)."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="batchd", description=__doc__)
    parser.add_argument("--version", action="version", version=f"%(prog)s {VERSION}")
    commands = parser.add_subparsers(dest="command", required=True)

    serve = commands.add_parser("serve", help="run the HTTP server")
    serve.add_argument("--host", help="bind address (env BATCHD_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (env BATCHD_PORT, default 8000)")
    _add_storage_flags(serve)
    serve.add_argument(
        "--storage-url",
        help="where file blobs live: a directory or s3://bucket/prefix "
        "(env BATCHD_STORAGE_URL; default <data-dir>/blobs; S3 endpoint for non-AWS "
        "servers in BATCHD_S3_ENDPOINT_URL)",
    )
    serve.add_argument(
        "--model",
        dest="models",
        action="append",
        metavar="SPEC",
        help="model to serve: a local path or hub id, or served-name=path (repeatable; "
        "default: the built-in batchd-tiny-chat and all-MiniLM-L6-v2)",
    )
    serve.add_argument(
        "--lora",
        dest="loras",
        action="append",
        metavar="NAME=PATH[@BASE]",
        help="LoRA adapter to serve as model NAME on its base's engine (repeatable; env BATCHD_LORAS; "
        "base: @BASE or the adapter_config.json's base_model_name_or_path; PATH batchd-tiny-lora: "
        "the built-in adapter of batchd-tiny-chat)",
    )
    serve.add_argument(
        "--max-resident-engines",
        type=int,
        metavar="N",
        help="load at most N in-process engines at once; the others load when their lines are due "
        "(env BATCHD_MAX_RESIDENT_ENGINES; default: no limit)",
    )
    serve.add_argument(
        "--config", dest="model_config_file", type=Path, help="YAML/JSON file of per-model engine options"
    )
    serve.add_argument("--no-models", action="store_true", help="serve the Files API only, no engines")
    serve.add_argument(
        "--api-only",
        action="store_true",
        help="serve HTTP only, no engines and no worker: replicas without this flag on the "
        "same database and storage run the batches",
    )
    serve.add_argument(
        "--allow-open-mode",
        action="store_true",
        help="serve with no API keys configured on an address other than loopback "
        "(env BATCHD_ALLOW_OPEN_MODE; see docs/security.md)",
    )
    serve.set_defaults(func=_serve)

    run_batch = commands.add_parser(
        "run-batch",
        help="run a batch file through a model, no server (drop-in for `vllm run-batch`)",
        description="Checks its options, input and output before it loads the model; a flag it does "
        "not know is refused (vLLM engine options beyond those listed go as --engine-arg KEY=VALUE).",
        allow_abbrev=False,
    )
    run_batch.add_argument(
        "-i",
        "--input-file",
        dest="input",
        required=True,
        help="input JSONL: a path, - for stdin, or an http(s) URL (presigned GET)",
    )
    run_batch.add_argument(
        "-o",
        "--output-file",
        dest="output",
        required=True,
        help="output JSONL: a path, - for stdout, or an http(s) URL (presigned PUT)",
    )
    run_batch.add_argument("--model", required=True, help="model path, hub id, or a built-in model name")
    run_batch.add_argument(
        "--served-model-name", nargs="+", help="the name lines use in body.model (first one is used)"
    )
    run_batch.add_argument("--error-file", help="write failed lines here (OpenAI style) instead of inline")
    run_batch.add_argument("--output-tmp-dir", help="where URL outputs are staged before upload")
    run_batch.add_argument(
        "--resume", action="store_true", help="skip lines an interrupted run with the same output already wrote"
    )
    run_batch.add_argument(
        "--retry-failed",
        metavar="PREVIOUS_OUTPUT",
        help="run only the lines that failed in an earlier run of the same input: its output (failed lines "
        "inline) or its --error-file, a path or an http(s) URL",
    )
    run_batch.add_argument(
        "--config", dest="model_config_file", type=Path, help="YAML/JSON model options file (as for `batchd serve`)"
    )
    run_batch.add_argument("--data-dir", type=Path, help="where built-in models are built (default ./data)")
    add_engine_flags(run_batch)
    run_batch.set_defaults(func=_run_batch)

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

    projects = commands.add_parser(
        "projects", help="per-project fair-share weight, token limit, completion windows and retention"
    )
    projects_commands = projects.add_subparsers(dest="projects_command", required=True)
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
    _add_storage_flags(projects_set)
    projects_set.set_defaults(func=_projects_set)
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
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if unknown:
        hint = "see `batchd run-batch --help`; other vLLM engine options go as --engine-arg KEY=VALUE"
        parser.error(f"unrecognized arguments: {' '.join(unknown)}" + (f" ({hint})" if args.func is _run_batch else ""))
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
