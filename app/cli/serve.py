"""`batchd serve`: the HTTP server and its worker, refused in open mode off loopback unless allowed."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import sys
from pathlib import Path

from app.cli.common import _add_storage_flags, _settings, _with_database
from app.core import tracing
from app.core.config import Settings

# How long an idle client connection stays open. uvicorn's 5 s is shorter than a load balancer's
# idle timeout (60 s on AWS's), so it would reuse a connection this server just closed (a 502);
# and a request sent as the 5 s ran out met a closed socket ("Server disconnected").
KEEP_ALIVE_SECONDS = 75
# The exit status of a server whose engines could not start: a supervisor (systemd, Kubernetes,
# compose's restart policy) restarts it; `--no-models` serves the API alone.
ENGINES_FAILED_EXIT = 3


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
        # The client address (failed-auth throttle, logs) is the X-Forwarded-For of these proxies.
        proxy_headers=True,
        forwarded_allow_ips=settings.parsed_forwarded_allow_ips(),
    )
    # Once its graceful shutdown is over, uvicorn raises the SIGTERM it caught again, to die by
    # it; a stop that was asked for and went cleanly is a success to service managers: exit 0.
    signal.signal(signal.SIGTERM, _exit_0)
    server = DrainingServer(config)
    failures: list[str] = []

    def engines_failed(cause: str) -> None:
        failures.append(cause)
        print(
            f"batchd: the model engines could not start: {cause}\n"
            f"batchd: exiting with status {ENGINES_FAILED_EXIT} "
            "(the log above has the traceback; --no-models serves the API alone)",
            file=sys.stderr,
            flush=True,
        )
        server.should_exit = True

    app.state.on_engines_failed = engines_failed
    server.run()
    return ENGINES_FAILED_EXIT if failures else 0


def _open_mode_refusal(settings: Settings) -> str | None:
    """Why this server must not start: open mode (no key anywhere) on an address other than
    loopback, unless allowed. Decided before binding; the database is read only then."""
    from app.domains.organization.auth import any_key_stored
    from app.domains.organization.open_mode import REFUSED_BIND, is_loopback

    if settings.allow_open_mode or is_loopback(settings.host):
        return None
    if settings.parsed_api_keys() or settings.parsed_admin_keys():
        return None
    if asyncio.run(_with_database(settings, any_key_stored, migrate=True)):
        return None
    return REFUSED_BIND.format(host=settings.host)


def _exit_0(_sig, _frame) -> None:
    raise SystemExit(0)


def add_parser(commands) -> None:
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
        "--engine-memory-budget",
        metavar="SIZE",
        help="load in-process engines while their memory needs fit in SIZE (8GiB, 500MB, bytes) or, with "
        "auto, the device's free memory; the others load when their lines are due, the next while the "
        "current one finishes if both fit (env BATCHD_ENGINE_MEMORY_BUDGET; default: no budget)",
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
        "--forwarded-allow-ips",
        metavar="IPS",
        help="proxies (addresses, networks, or *) whose X-Forwarded-For names the client "
        "(env BATCHD_FORWARDED_ALLOW_IPS; default 127.0.0.1,::1); see docs/security.md",
    )
    serve.add_argument(
        "--allow-open-mode",
        action="store_true",
        help="serve with no API keys configured on an address other than loopback "
        "(env BATCHD_ALLOW_OPEN_MODE; see docs/security.md)",
    )
    serve.set_defaults(func=_serve)
