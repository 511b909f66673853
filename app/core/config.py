"""Runtime settings: CLI flags override `BATCHD_*` environment variables, which override defaults."""

from __future__ import annotations

import ipaddress
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Self

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from app.core.outbound import OutboundPolicy

MB = 1024 * 1024


class Settings(BaseSettings):
    """Every setting of `batchd serve`. Each field is read from `BATCHD_<NAME>`; its docstring is
    the meaning in the documentation's settings table (`scripts/settings_table.py` writes it)."""

    model_config = SettingsConfigDict(env_prefix="BATCHD_", extra="ignore", use_attribute_docstrings=True)

    host: str = "127.0.0.1"
    """Bind address."""
    port: int = 8000
    """Port."""
    data_dir: Path = Path("./data")
    """SQLite database, local blobs, the keys' secret and the built-in models."""
    database_url: str = ""
    """e.g. `postgresql+asyncpg://user@host:5432/db`; empty: SQLite at `<data-dir>/batchd.db`."""
    storage_url: str = ""
    """Where file bytes live: a directory, or `s3://bucket/prefix` (AWS credentials and region from
    the standard `AWS_*` variables and chain); empty: `<data-dir>/blobs`."""
    api_keys: str = ""
    """`key` or `key=project`, comma-separated; empty (and no stored keys): open mode."""
    admin_keys: str = ""
    """Admin keys (Usage and Administration APIs), comma-separated, each of project `default`; the
    bootstrap for more by API or `batchd keys create --admin`."""
    allow_open_mode: bool = False
    """Serve in open mode (no keys) on an address other than loopback; without it such a
    `batchd serve` exits (see [Security](security.md))."""
    auth_failure_burst: int = Field(default=100, ge=1)
    """Failed key checks one client address, and one key prefix, may make before further bad keys
    from it are answered 429 (a good key is always served)."""
    auth_failure_window_seconds: float = Field(default=60.0, gt=0)
    """Time in which an address's (a prefix's) allowance of failed key checks refills completely."""
    forwarded_allow_ips: str = ""
    """Proxies whose `X-Forwarded-For` / `X-Forwarded-Proto` name the client (uvicorn's
    `forwarded_allow_ips`): addresses and networks, comma-separated, or `*`; empty: uvicorn's
    default (`FORWARDED_ALLOW_IPS`, else `127.0.0.1,::1`)."""
    s3_endpoint_url: str = ""
    """An S3-compatible server other than AWS (SeaweedFS, MinIO, ...)."""
    s3_sse: Literal["", "AES256", "aws:kms"] = ""
    """Server-side encryption asked for on every object batchd writes to S3: `AES256` (keys the S3
    server manages) or `aws:kms` (a KMS key); empty: the bucket's default encryption."""
    s3_sse_kms_key_id: str = ""
    """The KMS key (id, ARN or alias) of `BATCHD_S3_SSE=aws:kms`; empty: the account's AWS-managed
    key for S3."""
    import_allowed_uris: str = ""
    """`s3://bucket/prefix/` URIs, comma-separated, under which any project may import a file by
    reference (`POST /v1/files` with `{"purpose", "url": "s3://..."}`, read with batchd's own S3
    credentials), and where a batch's results may be written (`output_uri`); a project's own
    prefixes are added with `batchd projects set NAME --allow-uri`; empty: none server-wide."""
    import_timeout_seconds: float = Field(default=1800.0, gt=0)
    """The longest one file import by reference may take, first byte to last, the URL's fetch or
    the S3 read alike: an import still going then fails with `import_timeout` and nothing of it is
    kept (a server trickling bytes cannot hold a request and its blob writer for hours)."""
    export_max_attempts: int = Field(default=5, ge=1)
    """Attempts at copying an ended batch's files to its `output_uri` or `output_urls` (results by
    reference) before its export is `failed` with the last attempt's error."""
    export_retry_base_seconds: float = Field(default=10.0, gt=0)
    """The wait before an export's second attempt; it doubles after each one (at most an hour)."""
    export_timeout_seconds: float = Field(default=3600.0, gt=0)
    """The longest one export attempt may take, every file of the batch, first byte to last; an
    attempt still going then fails (and is retried)."""
    export_poll_seconds: float = Field(default=2.0, gt=0)
    """How often each server looks for ended batches whose files are due to be exported."""
    max_write_seconds: float = Field(default=6 * 3600.0, gt=0)
    """The longest one write into an S3 store may take (a file or part upload, a batch's results); a
    write still going then fails. The sweep aborts an S3 multipart upload no writer of its
    replica owns once this old (a live upload is never aborted under its writer)."""
    orphan_blob_min_age: float = Field(default=3600.0, ge=0)
    """Blobs with no live file row are removed once this old, in seconds (other replicas' in-flight
    uploads commit their blob a moment before their row)."""
    secret_key: str = ""
    """Secret for hashing stored API keys (one for all replicas); empty: `<data-dir>/secret.key`,
    created once."""
    cache_salt_secret: str = ""
    """Secret the projects' prompt-cache salts (`cache_salt`) derive from (one for all replicas);
    empty: derived from the key-hashing secret. A change only stops the engines reusing prefixes
    cached before it (see [Security](security.md))."""

    max_file_bytes: int = Field(default=512 * MB, ge=1)
    """Per-file upload limit."""
    max_batch_file_bytes: int = Field(default=200 * MB, ge=1)
    """Upload limit for `purpose=batch` files."""
    sqlite_busy_timeout_ms: int = Field(default=15_000, ge=0)
    """How long a SQLite writer waits for the lock before the request answers 503."""
    database_pool_size: int = Field(default=20, ge=1)
    """Postgres connections a replica holds at most (of which up to 5 stay open when idle); every
    replica's count together must fit the server's `max_connections` (or PgBouncer's pool: session
    mode only, see [Storage](storage.md))."""
    readiness_db_grace_seconds: float = Field(default=30.0, ge=0)
    """How long `/health` stays 200 while the database does not answer (it says so in its body);
    503 after. 0: 503 at once. Liveness (`/health/live`) never reads the database."""
    sweep_interval: float = Field(default=60.0, gt=0)
    """Seconds between sweeps of expired files and uploads."""
    idempotency_key_hours: float = Field(default=24.0, gt=0)
    """A POST's `Idempotency-Key` is remembered this long (per API key): a repeat within it gets
    the first response."""
    project_max_idempotency_bytes: int = Field(default=8 * MB, ge=0)
    """Bytes of create responses a project's Idempotency-Key records may keep (counted in its
    storage, BATCHD_PROJECT_MAX_BYTES); past it, or with 0, a repeat is answered from the created
    object as a retrieve shows it."""
    tombstone_grace_seconds: float = Field(default=7 * 24 * 3600, ge=0)
    """A deleted file's or batch's record (its id still works as an `after` cursor) is kept this long."""
    log_level: str = "info"
    """Log level of batchd and uvicorn (`debug`, `info`, `warning`, `error`)."""
    max_upload_bytes: int = Field(default=8 * 1024 * MB, ge=1)
    """Total bytes of one upload (Uploads API)."""
    max_upload_part_bytes: int = Field(default=64 * MB, ge=1)
    """Bytes of one upload part."""
    upload_ttl_seconds: int = Field(default=3600, ge=1)
    """An upload takes parts this long, then expires."""
    retry_backoff_seconds: float = Field(default=30.0, ge=0)
    """A batch whose work failed (engine died, disk full, database down) is retried after this."""
    max_step_failures: int = Field(default=5, ge=1)
    """A batch whose work failed this many times in a row (on one replica; not counting an engine
    or the database being unreachable) ends `failed` with code `processing_failed`, not retried."""

    project_max_bytes: int = Field(default=100 * 1024 * MB, ge=0)
    """Bytes of live files (outputs included) a project may store (0: no limit); an upload past it
    is 429 `insufficient_quota`. `batchd projects set --max-bytes` sets it per project."""
    project_max_active_batches: int = Field(default=1000, ge=0)
    """Unfinished batches per project, background responses and waiting flex requests included
    (0: no limit); one more is 429 `rate_limit_exceeded`. `batchd projects set
    --max-active-batches` sets it per project."""
    project_max_enqueued_tokens: int = Field(default=0, ge=0)
    """Prompt tokens a project may have enqueued per model (batches validating, in progress or
    finalizing), as OpenAI's batch limit (0: no limit); a batch past it fails
    `token_limit_exceeded`. `batchd projects set --max-enqueued-tokens` sets it per project."""
    estimate_max_concurrent_per_project: int = Field(default=2, ge=0)
    """`POST /v1/batches/estimate` calls one project may have in progress on a server (0: no cap);
    one more is answered 429 with Retry-After."""
    estimate_max_concurrent: int = Field(default=4, ge=0)
    """`POST /v1/batches/estimate` calls in progress on a server, all projects (0: no cap)."""
    message_batch_create_max_concurrent_per_project: int = Field(default=2, ge=0)
    """Message Batch creates (`POST /v1/messages/batches`) one project may have in progress on a
    server (0: no cap); one more is answered 429 `rate_limit_error` with Retry-After."""
    message_batch_create_max_concurrent: int = Field(default=4, ge=0)
    """Message Batch creates in progress on a server, all projects (0: no cap)."""
    flex_max_waiting_per_project: int = Field(default=64, ge=0)
    """Flex requests (`service_tier: "flex"`) of one project waiting on a server (0: no cap); one
    more is answered 429 with Retry-After."""
    flex_max_waiting: int = Field(default=256, ge=0)
    """Flex requests waiting on a server, all projects (0: no cap)."""
    background_response_create_max_concurrent_per_project: int = Field(default=32, ge=0)
    """Background response creates (`POST /v1/responses`, `background: true`) of one project in
    progress on a server (0: no cap); one more is answered 429 with Retry-After."""
    background_response_create_max_concurrent: int = Field(default=128, ge=0)
    """Background response creates in progress on a server, all projects (0: no cap)."""
    max_json_body_bytes: int = Field(default=1 * MB, ge=1)
    """JSON request bodies (not uploads) above this are refused with 413 before they are read."""

    completion_windows: str = "24h,1h"
    """Accepted `completion_window` values, comma-separated (OpenAI accepts only `24h`)."""
    max_batch_lines: int = Field(default=50_000, ge=1)
    """Lines per batch (`too_many_tasks` above)."""
    max_message_batch_requests: int = Field(default=100_000, ge=1)
    """Requests in one Anthropic Message Batch."""
    max_message_batch_bytes: int = Field(default=256 * MB, ge=1)
    """Body of an Anthropic Message Batch create request."""
    background_response_deadline_seconds: int = Field(default=60, ge=1)
    """Scheduling deadline of a background response (`POST /v1/responses`, `background: true`):
    the scheduler runs it ahead of batches due later and, once at risk of missing it, ahead of
    fair share. Passing it ends nothing. See [Background responses](responses.md)."""
    background_response_expiry_seconds: int = Field(default=86_400, ge=1)
    """Hard expiry of a background response: one not finished this long after it was created is
    stopped and ends `failed` (`batch_expired`)."""
    background_response_retention_seconds: int = Field(default=2_592_000, ge=1)
    """An ended background response is deleted (with its request and result files) this long
    after it ended, as `DELETE /v1/responses/{id}` deletes it."""
    flex_wait_seconds: float = Field(default=30.0, gt=0)
    """How long a flex request (`service_tier: "flex"`) may wait for its line to start; one
    that has not started by then is cancelled and answered `429 resource_unavailable` with a
    Retry-After. See [Flex processing](flex.md)."""
    max_validation_errors: int = Field(default=100, ge=1)
    """At most this many validation errors are reported for one batch."""
    max_concurrent_batches: int = Field(default=4, ge=1)
    """Validations and finalizes one server runs at once; up to twice as many for projects that
    have none running."""
    max_running_shards: int = Field(default=8, ge=1)
    """Shards of one model a server runs freely (at most two of one batch); past it a project with
    fewer than two there still starts one, up to twice the engine's window (at most 64), and past
    that by taking a turn (see [Sharing between teams](sharing.md))."""
    at_risk_max_share: float = Field(default=0.5, gt=0, le=1)
    """Share of a model's slots one project's lines may hold ahead of fair share (at risk, a small
    batch on credit)."""
    at_risk_unknown_rate_wait: float = Field(default=0.25, ge=0, le=1)
    """Share of its window a batch waits before it counts as at risk when its model has no rate to
    project it at (it never served here); 0: at risk at once, as soon as it stalls."""
    upstream_window_surplus: float = Field(default=1.0, ge=0)
    """Lines kept in flight to an upstream fleet beyond its slots, as a share of them (they wait in
    batchd, so a freed slot is refilled at once; 0: exactly the fleet's slots)."""
    allow_tenant_priority: bool = False
    """Let a line's own `priority` reach the engine as it is (else batchd's replaces it, or it is
    clamped to 100 or more, behind online traffic)."""
    replica_id: str = Field(
        default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}",
        json_schema_extra={"shown_default": "host name + pid"},
    )
    """This server's name in leases, shard records, logs and `/health`."""
    lease_seconds: float = Field(default=15.0, gt=0)
    """A crashed server's shards and batches are taken over after this (a worker that stops
    renewing its lease for this long loses it)."""
    shard_lines: int = Field(default=1_000, ge=1)
    """Validation cuts a batch into shards of this many lines; any replica runs any shard."""
    models: list[str] = Field(default_factory=list)
    """Models to serve, as `--model` takes them (a JSON list in the environment); empty: the
    built-in `batchd-tiny-chat` and `all-MiniLM-L6-v2`."""
    loras: list[str] = Field(default_factory=list)
    """LoRA adapters to serve, as `--lora NAME=PATH[@BASE]` takes them (a JSON list in the
    environment); `batchd-tiny-lora` names the built-in adapter of `batchd-tiny-chat`."""
    model_config_file: Path | None = None
    """A YAML/JSON file of per-model engine options and upstream fleets."""
    max_resident_engines: int | None = Field(default=None, ge=1)
    """At most this many in-process engines loaded at once; the other models load when their lines
    are due, in place of the least needed idle engine (see [Models](models.md#engines-on-demand));
    unset: every model's engine stays loaded."""
    min_residency_seconds: float = Field(default=30.0, ge=0)
    """With `BATCHD_MAX_RESIDENT_ENGINES`: a busy engine keeps its place at least this long (longer
    for more queued lines) before another model with no earlier deadline takes its turn."""
    engine_drain_grace_seconds: float = Field(default=10.0, ge=0)
    """With `BATCHD_MAX_RESIDENT_ENGINES`: a loaded engine with no lines gives way to a waiting
    model once it has had none for this long while the other's lines waited (a gap between shards,
    or its own batch still validating, is not a drain)."""
    min_load_interval_seconds: float = Field(default=60.0, ge=0)
    """With `BATCHD_MAX_RESIDENT_ENGINES`: a model loaded on demand less than this long ago does not
    take a busy engine's place again (it waits for an idle one), so swaps per model are bounded."""
    engine_memory_budget: int | Literal["auto"] | None = None
    """Memory the loaded in-process engines may take together (`8GiB`, `500MB`, bytes), or `auto`:
    the device's free memory at start (the GPU's; on CPU the host's available memory). A model
    whose engine fits beside those loaded is loaded while they finish their lines; the others
    wait for engines to be unloaded (see [Models](models.md#memory-budget)); unset: only
    `BATCHD_MAX_RESIDENT_ENGINES` limits."""
    engine_max_restarts: int = Field(default=3, ge=0)
    """An in-process engine whose core process dies is restarted quickly up to this many times within
    `BATCHD_ENGINE_RESTART_WINDOW_SECONDS`; after that it backs off (`/health` says until when) but is
    always restarted again."""
    engine_restart_window_seconds: float = Field(default=600.0, gt=0)
    """The window in which an engine's restarts are counted."""
    engine_restart_backoff_seconds: float = Field(default=1.0, ge=0)
    """Wait before an engine's first restart in the window; each further one waits twice as long
    (at most 60 s within `BATCHD_ENGINE_MAX_RESTARTS`)."""
    engine_restart_max_backoff_seconds: float = Field(default=300.0, ge=0)
    """The longest wait before restarting an engine that died more often than
    `BATCHD_ENGINE_MAX_RESTARTS` within the window (the waits keep doubling up to it)."""
    no_models: bool = False
    """Serve no models at all (the Files API only; batches fail validation with `model_not_found`)."""
    api_only: bool = False
    """Serve HTTP only: no engines, no worker; replicas without it, on the same database and
    storage, run the batches this one accepts."""

    trace_line_sample: float = Field(default=0.01, ge=0, le=1)
    """Share of lines with a span of their own, whose `traceparent` goes upstream (traces are on
    when `OTEL_EXPORTER_OTLP_ENDPOINT` or another `OTEL_*` exporter is set)."""

    metrics_token: str = ""
    """Bearer token `GET /metrics` requires; empty: open."""
    metrics_cache_seconds: float = Field(default=15.0, ge=0)
    """`GET /metrics` counts batches by status at most once in this many seconds, however often it
    is scraped (0: at every scrape)."""
    outbound_allow: str = ""
    """Destinations the server may fetch although they are not public (comma-separated host names,
    addresses, CIDRs): internal webhook receivers or audio hosts. See [Security](security.md)."""
    webhook_allow_hosts: str = ""
    """Older name of `BATCHD_OUTBOUND_ALLOW`: its entries are added to that list."""
    webhook_retry_base_seconds: float = Field(default=5.0, gt=0)
    """First webhook retry delay; doubles per attempt."""
    webhook_retry_max_delay_seconds: float = Field(default=4 * 3600.0, gt=0)
    """Longest wait between webhook attempts."""
    webhook_retry_horizon_seconds: float = Field(default=72 * 3600.0, gt=0)
    """Webhook deliveries give up this long after the event."""
    webhook_disable_after_seconds: float = Field(default=72 * 3600.0, gt=0)
    """An endpoint whose deliveries all failed for this long is disabled."""
    webhook_timeout_seconds: float = Field(default=10.0, gt=0)
    """Deadline of one webhook attempt, connect to last byte (a receiver still answering then is cut off)."""
    webhook_poll_seconds: float = Field(default=1.0, gt=0)
    """How often each server looks for due webhook deliveries."""

    @field_validator("engine_memory_budget", mode="before")
    @classmethod
    def _memory_budget_in_bytes(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip()
            return value.lower() if value.lower() == "auto" else (parse_byte_size(value) if value else None)
        if isinstance(value, int) and not isinstance(value, bool) and value <= 0:
            raise ValueError("expected a positive size in bytes, or auto")
        return value

    @model_validator(mode="after")
    def _kms_key_needs_kms(self) -> Self:
        if self.s3_sse_kms_key_id and self.s3_sse != "aws:kms":
            raise ValueError("BATCHD_S3_SSE_KMS_KEY_ID is only used with BATCHD_S3_SSE=aws:kms")
        return self

    @model_validator(mode="after")
    def _forwarded_allow_ips_are_addresses(self) -> Self:
        # uvicorn takes a malformed entry for a literal host name that no peer ever matches.
        for item in self.parsed_forwarded_allow_ips() or []:
            if item != "*":
                try:
                    ipaddress.ip_network(item, strict=False)
                except ValueError:
                    raise ValueError(
                        f"BATCHD_FORWARDED_ALLOW_IPS: {item!r} is not an IP address, a network (10.0.0.0/8) or '*'"
                    ) from None
        return self

    def parsed_forwarded_allow_ips(self) -> list[str] | None:
        """The trusted proxies as uvicorn takes them; None: uvicorn's own default."""
        items = [item.strip() for item in self.forwarded_allow_ips.split(",") if item.strip()]
        return ["*"] if "*" in items else items or None  # uvicorn trusts all only for a lone "*"

    def s3_encryption(self) -> dict[str, str]:
        """The server-side encryption parameters of every S3 write (none when not asked for)."""
        params: dict[str, str] = {"ServerSideEncryption": self.s3_sse} if self.s3_sse else {}
        if self.s3_sse_kms_key_id:
            params["SSEKMSKeyId"] = self.s3_sse_kms_key_id
        return params

    def window_seconds(self) -> dict[str, int]:
        return {w: parse_window(w) for w in self.completion_windows.split(",") if w.strip()}

    def resolved_database_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'batchd.db').resolve()}"

    @property
    def is_sqlite(self) -> bool:
        return self.resolved_database_url().startswith("sqlite")

    @property
    def blob_dir(self) -> Path:
        """Where the local store keeps blobs: the storage URL if it is a path, else the data dir's."""
        if self.storage_url and "://" not in self.storage_url:
            return Path(self.storage_url)
        return self.data_dir / "blobs"

    def parsed_import_allowed_uris(self) -> list[str]:
        return [uri.strip() for uri in self.import_allowed_uris.split(",") if uri.strip()]

    def outbound_policy(self) -> OutboundPolicy:
        return OutboundPolicy.parse(self.outbound_allow, self.webhook_allow_hosts)

    def parsed_api_keys(self) -> dict[str, str]:
        """Config keys as {key: project}; a bare key belongs to project `default`."""
        keys: dict[str, str] = {}
        for item in self.api_keys.split(","):
            item = item.strip()
            if not item:
                continue
            key, _, project = item.partition("=")
            keys[key.strip()] = project.strip() or DEFAULT_PROJECT
        return keys

    def parsed_admin_keys(self) -> list[str]:
        return [key.strip() for key in self.admin_keys.split(",") if key.strip()]


DEFAULT_PROJECT = "default"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_window(window: str) -> int:
    """'24h' -> 86400. Accepts a positive integer followed by s, m, h or d."""
    window = window.strip()
    number, unit = window[:-1], window[-1:]
    if unit not in _UNITS or not number.isdigit() or int(number) <= 0:
        raise ValueError(f"invalid completion window {window!r}")
    return int(number) * _UNITS[unit]


_BYTE_UNITS = {
    "": 1,
    "b": 1,
    "kb": 1000,
    "mb": 1000**2,
    "gb": 1000**3,
    "tb": 1000**4,
    "kib": 1 << 10,
    "mib": 1 << 20,
    "gib": 1 << 30,
    "tib": 1 << 40,
}
_BYTE_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*([a-z]*)")


def parse_byte_size(size: str) -> int:
    """'8GiB' -> 8589934592, '500MB' -> 500000000, '1024' -> 1024: a positive number of bytes,
    in bytes or with a unit (KiB/MiB/GiB/TiB: powers of 1024; kB/MB/GB/TB: of 1000)."""
    match = _BYTE_SIZE.fullmatch(size.strip().lower())
    if match is None or match.group(2) not in _BYTE_UNITS or float(match.group(1)) <= 0:
        raise ValueError(f"invalid size {size!r}: expected e.g. 8GiB, 500MB or a number of bytes")
    return int(float(match.group(1)) * _BYTE_UNITS[match.group(2)])


@dataclass(frozen=True)
class EnvironmentSetting:
    """A `BATCHD_*` variable read with `os.environ` where no Settings is at hand (vLLM's engine
    processes, the audio fetcher); listed so the documentation's settings table holds it too."""

    name: str
    default: str
    meaning: str


ENVIRONMENT_SETTINGS = (
    EnvironmentSetting(
        "BATCHD_AUDIO_MAX_BYTES",
        "26214400 (25 MiB)",
        "Largest audio file an audio line's `file_url` may name (downloads stop there; see [Audio](audio.md)).",
    ),
    EnvironmentSetting(
        "BATCHD_AUDIO_FETCH_TIMEOUT_S",
        "30",
        "Deadline of one whole `file_url` download (connect to last byte), in seconds.",
    ),
    EnvironmentSetting(
        "BATCHD_AUDIO_MAX_IN_FLIGHT", "16", "Audio lines holding their audio in memory at once (per process)."
    ),
    EnvironmentSetting(
        "BATCHD_AUDIO_MAX_IN_FLIGHT_PER_PROJECT",
        "half of `BATCHD_AUDIO_MAX_IN_FLIGHT`",
        "Of those, the most one project's lines may hold (a project with slow audio hosts leaves the rest to others).",
    ),
    EnvironmentSetting(
        "BATCHD_ENGINE_MALLOC",
        "`auto`",
        "CPU engines preload the system's jemalloc (`libjemalloc2`): on glibc's malloc vLLM's worker "
        "grows with every line; `system` keeps glibc, or give a library path.",
    ),
    EnvironmentSetting(
        "BATCHD_ENGINE_CPU_AFFINITY",
        "`auto`",
        "On CPU, once the engines are up, pin the API and engine-core processes to the CPUs vLLM left "
        "beside its workers, so front-end work never takes a worker's CPU; `off` leaves them floating.",
    ),
    EnvironmentSetting(
        "BATCHD_ENGINE_NICENESS",
        "10 on CPU, 0 on GPU",
        "Niceness added to the vLLM engine processes, so API requests preempt inference (0-19; 0 turns it off).",
    ),
)
