"""Runtime settings: CLI flags override `BATCHD_*` environment variables, which override defaults."""

from __future__ import annotations

import os
import socket
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

MB = 1024 * 1024


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="BATCHD_", extra="ignore")

    host: str = "127.0.0.1"
    port: int = 8000
    data_dir: Path = Path("./data")
    # Empty means SQLite at <data_dir>/batchd.db.
    database_url: str = ""
    # Where file bytes live: a directory, or s3://bucket/prefix (AWS credentials and region from
    # the standard environment variables and chain). Empty means <data_dir>/blobs.
    storage_url: str = ""
    # Comma-separated `key` or `key=project`; empty (and no keys in the database) = open mode.
    api_keys: str = ""
    # For S3-compatible servers other than AWS (SeaweedFS, MinIO, ...).
    s3_endpoint_url: str = ""
    # Blobs without a live file row are removed once older than this (in-flight uploads of other
    # replicas commit their blob a moment before their row).
    orphan_blob_min_age: float = Field(default=3600.0, ge=0)
    # Keyed-hash secret for stored API keys; empty means <data_dir>/secret.key (created once).
    secret_key: str = ""

    max_file_bytes: int = Field(default=512 * MB, ge=1)
    max_batch_file_bytes: int = Field(default=200 * MB, ge=1)
    # How long a SQLite writer waits for the lock before the request becomes a 503.
    sqlite_busy_timeout_ms: int = Field(default=15_000, ge=0)
    # How often expired files are swept (seconds).
    sweep_interval: float = Field(default=60.0, gt=0)
    # A deleted file's record (kept so its id still works as a list cursor) lives this long.
    tombstone_grace_seconds: float = Field(default=7 * 24 * 3600, ge=0)
    log_level: str = "info"
    # Uploads API: total bytes of one upload, bytes of one part, and how long an upload takes parts.
    max_upload_bytes: int = Field(default=8 * 1024 * MB, ge=1)
    max_upload_part_bytes: int = Field(default=64 * MB, ge=1)
    upload_ttl_seconds: int = Field(default=3600, ge=1)
    # A batch whose run failed (engine died, disk full, database down) waits this long to retry.
    retry_backoff_seconds: float = Field(default=30.0, ge=0)

    # Per-project limits (0 = none): bytes of live files, and batches not yet finished.
    project_max_bytes: int = Field(default=0, ge=0)
    project_max_active_batches: int = Field(default=0, ge=0)
    # Prompt tokens a project may have enqueued per model (batches validating, in progress or
    # finalizing), as OpenAI's batch limit; 0 = none. `batchd projects set --max-enqueued-tokens`
    # overrides it per project.
    project_max_enqueued_tokens: int = Field(default=0, ge=0)
    # JSON (non-multipart) request bodies above this are refused with 413 before they are read.
    max_json_body_bytes: int = Field(default=1 * MB, ge=1)

    # Batches: accepted `completion_window` values (OpenAI accepts only 24h).
    completion_windows: str = "24h,1h"
    max_batch_lines: int = Field(default=50_000, ge=1)
    # Anthropic Message Batches: requests in one batch, and bytes of its create request.
    max_message_batch_requests: int = Field(default=100_000, ge=1)
    max_message_batch_bytes: int = Field(default=256 * MB, ge=1)
    # At most this many validation errors are reported for one batch.
    max_validation_errors: int = Field(default=100, ge=1)
    # One-replica steps (validate, finalize) running at once in this replica.
    max_concurrent_batches: int = Field(default=4, ge=1)
    # Shards this replica runs at once (across batches; at most two of one batch).
    max_running_shards: int = Field(default=8, ge=1)
    # This replica's name in leases, shard records, logs and /health; default host name + pid.
    replica_id: str = Field(default_factory=lambda: f"{socket.gethostname()}-{os.getpid()}")
    # A worker that stops renewing its lease for this long loses the batch to another worker.
    lease_seconds: float = Field(default=15.0, gt=0)
    # Validation cuts a batch into shards of this many requests; any replica runs any shard.
    shard_lines: int = Field(default=1_000, ge=1)
    # Served models: `--model` specs (repeatable) and an optional per-model options file.
    models: list[str] = Field(default_factory=list)
    model_config_file: Path | None = None
    # Serve no models at all (Files API only; batches fail validation with model_not_found).
    no_models: bool = False
    # Serve HTTP only: no engines, no worker. Replicas without it, on the same database and
    # storage, run the batches this one accepts (keeps API latency off the engines' CPUs).
    api_only: bool = False

    # GET /metrics needs `Authorization: Bearer <this>` when set; open when empty.
    metrics_token: str = ""
    # Webhooks: hosts (comma-separated) that may resolve to loopback/private addresses.
    webhook_allow_hosts: str = ""
    # Retry n waits base * 2^(n-1) seconds (capped at the max delay) until the horizon has passed
    # since the event; an endpoint whose deliveries all failed for `disable_after` is disabled.
    webhook_retry_base_seconds: float = Field(default=5.0, gt=0)
    webhook_retry_max_delay_seconds: float = Field(default=4 * 3600.0, gt=0)
    webhook_retry_horizon_seconds: float = Field(default=72 * 3600.0, gt=0)
    webhook_disable_after_seconds: float = Field(default=72 * 3600.0, gt=0)
    webhook_timeout_seconds: float = Field(default=10.0, gt=0)
    webhook_poll_seconds: float = Field(default=1.0, gt=0)

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

    def webhook_allowed_hosts(self) -> set[str]:
        return {h.strip().lower() for h in self.webhook_allow_hosts.split(",") if h.strip()}

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


DEFAULT_PROJECT = "default"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_window(window: str) -> int:
    """'24h' -> 86400. Accepts a positive integer followed by s, m, h or d."""
    window = window.strip()
    number, unit = window[:-1], window[-1:]
    if unit not in _UNITS or not number.isdigit() or int(number) <= 0:
        raise ValueError(f"invalid completion window {window!r}")
    return int(number) * _UNITS[unit]
