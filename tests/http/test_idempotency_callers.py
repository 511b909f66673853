"""`Idempotency-Key` cannot hurt another caller (#54), through the official client on batchd's app
in process, on SQLite and Postgres: a record is the API key's that made it (another key's repeat
runs as new, authorization and all); a secret is never kept (a repeat gets the object as a
retrieve shows it); kept responses count in the project's storage and are capped per project;
a waiting repeat only reads; the lease survives database errors, and a holder that lost it
commits nothing."""

from __future__ import annotations

import asyncio
import threading
import time

import openai
import pytest
import sqlalchemy as sa
from sqlalchemy import event
from sqlalchemy.exc import OperationalError

from app.db.engine import Database
from app.db.repositories.idempotency_keys import IdempotencyKeyRepository
from app.domains.batches.service import BatchService
from app.http import idempotency_store as idempotency
from app.http.idempotency_store import IdempotentRequests
from harness.poll import wait_until
from tests.support import db
from tests.support.app_server import AppServer
from tests.support.batches import chat_line, jsonl

ADMIN = "admin-root"
PLAIN = "plain-key"  # a bare BATCHD_API_KEYS entry: project `default`, as the admin key's
QUOTA, CAPPED, LEASE = "key-quota", "key-capped", "key-lease"
MAX_BYTES, MAX_KEPT = 20_000, 1500
LINES = jsonl([chat_line("a")])

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True, scope="session")


def _key(name: str) -> dict[str, str]:
    return {"Idempotency-Key": name}


@pytest.fixture(scope="module")
def app(backend, tmp_path_factory, database_factory):
    env = {
        "BATCHD_API_KEYS": f"{PLAIN},{QUOTA}=proj-quota,{CAPPED}=proj-capped,{LEASE}=proj-lease",
        "BATCHD_ADMIN_KEYS": ADMIN,
        "BATCHD_SECRET_KEY": "idempotency-callers-test-secret",
        "BATCHD_OUTBOUND_ALLOW": "127.0.0.1",
        "BATCHD_PROJECT_MAX_BYTES": str(MAX_BYTES),
        "BATCHD_PROJECT_MAX_IDEMPOTENCY_BYTES": str(MAX_KEPT),
        "BATCHD_SWEEP_INTERVAL": "3600",  # no sweep's DELETE among the statements counted
    }
    with AppServer(tmp_path_factory.mktemp("idem-callers"), database_factory(), env=env) as server:
        yield server


def _admin(app: AppServer, key: str = ADMIN):
    return app.client("unused", admin_api_key=key).admin.organization


def _dump(app: AppServer) -> dict[str, str]:
    """Every column of every row of every table, as text, by table."""

    async def run() -> dict[str, str]:
        database = Database(db.database_url(app))
        try:
            async with database.read() as session:
                connection = await session.connection()
                tables = await connection.run_sync(lambda sync: sa.inspect(sync).get_table_names())
                return {
                    table: "\n".join(
                        repr(tuple(row))
                        for row in (await connection.execute(sa.text(f'SELECT * FROM "{table}"'))).all()
                    )
                    for table in tables
                }
        finally:
            await database.dispose()

    return asyncio.run(run())


def test_a_plain_key_repeating_an_admin_mint_gets_403_and_no_secret_is_ever_kept(app, request):
    name = request.node.name
    minted = _admin(app).admin_api_keys.with_raw_response.create(name="ops", extra_headers=_key(f"{name}-mint"))
    admin_key = minted.parse()
    keys = [admin_key.value]
    # The same request, same key, by a plain key of the same project: the admin check runs.
    with pytest.raises(openai.PermissionDeniedError) as refused:
        _admin(app, PLAIN).admin_api_keys.create(name="ops", extra_headers=_key(f"{name}-mint"))
    assert refused.value.body["code"] == "insufficient_permissions"
    assert admin_key.value not in refused.value.response.text
    # The admin's own repeat: the key as a retrieve shows it, never its value.
    again = _admin(app).admin_api_keys.with_raw_response.create(name="ops", extra_headers=_key(f"{name}-mint"))
    assert again.status_code == 200 and again.headers["idempotent-replayed"] == "true"
    retrieved = app.http.get(f"/v1/organization/admin_api_keys/{admin_key.id}", headers=app.as_key(ADMIN))
    assert again.http_response.json() == retrieved.json()
    assert (
        "value" not in again.http_response.json()
        and again.http_response.json()["redacted_value"]
        and admin_key.value not in again.text
    )
    assert [k.id for k in _admin(app).admin_api_keys.list(limit=100) if k.name == "ops"] == [admin_key.id]

    # The other responses that carry a secret: a service account's key, a webhook's signing secret.
    project = _admin(app).projects.create(name=name)
    account = _admin(app).projects.service_accounts.create(project.id, name="runner", extra_headers=_key(name))
    assert account.api_key is not None
    keys.append(account.api_key.value)
    repeat = _admin(app).projects.service_accounts.with_raw_response.create(
        project.id, name="runner", extra_headers=_key(name)
    )
    assert repeat.headers["idempotent-replayed"] == "true" and repeat.http_response.json()["id"] == account.id
    assert "api_key" not in repeat.http_response.json() and account.api_key.value not in repeat.text
    hooks = app.client(PLAIN).webhooks
    hook = hooks.create(
        url="http://127.0.0.1:9/hook", name="ops", event_types=["batch.completed"], extra_headers=_key(name)
    )
    rotated = hooks.rotate_secret(hook.id, extra_headers=_key(f"{name}-rotate"))
    signing = [hook.signing_secret, rotated.signing_secret]
    secrets = keys + signing
    for repeat in (
        hooks.with_raw_response.create(
            url="http://127.0.0.1:9/hook", name="ops", event_types=["batch.completed"], extra_headers=_key(name)
        ),
        hooks.with_raw_response.rotate_secret(hook.id, extra_headers=_key(f"{name}-rotate")),
    ):
        assert repeat.headers["idempotent-replayed"] == "true" and repeat.http_response.json()["id"] == hook.id
        assert "signing_secret" not in repeat.http_response.json() and not any(s in repeat.text for s in secrets)
    assert hooks.retrieve(hook.id).signing_secret_hint == rotated.signing_secret_hint  # rotated once

    dump = _dump(app)
    # Four records (the mint, the account, the endpoint, the rotation), each kept as a retrieve path.
    kept = "SELECT count(*) FROM idempotency_keys WHERE key LIKE :name AND body IS NULL AND retrieve_path IS NOT NULL"
    assert db.execute(app, kept, name=f"{name}%")[0][0] == 4
    # A key's value is stored nowhere (its hash only); a signing secret only where deliveries are
    # signed with it (its endpoint's row), in no Idempotency-Key record.
    assert [(table, s) for table, rows in dump.items() for s in keys if s in rows] == []
    assert {table for table, rows in dump.items() for s in signing if s in rows} == {"webhook_endpoints"}


def _kept_bytes(app: AppServer, project: str) -> int:
    return db.execute(app, "SELECT coalesce(sum(stored_bytes), 0) FROM idempotency_keys WHERE project = :p", p=project)[
        0
    ][0]


def test_kept_responses_count_in_the_project_storage(app, request):
    client = app.client(QUOTA)
    first = client.files.with_raw_response.create(
        file=("in.jsonl", b"x" * 1000), purpose="user_data", extra_headers=_key(request.node.name)
    )
    kept = len(first.content)
    assert _kept_bytes(app, "proj-quota") == kept > 0
    # Room for the file alone, not for the file and the kept response: refused.
    with pytest.raises(openai.RateLimitError) as refused:
        client.files.create(file=("big.bin", b"y" * (MAX_BYTES - 1000 - kept // 2)), purpose="user_data")
    assert refused.value.body["code"] == "insufficient_quota"
    assert client.files.create(file=("fits.bin", b"y" * (MAX_BYTES - 1000 - kept)), purpose="user_data")


def test_kept_responses_are_capped_per_project_and_repeats_past_the_cap_get_the_object(app, request):
    client = app.client(CAPPED)
    made = [
        client.files.create(file=("in.jsonl", LINES), purpose="batch", extra_headers=_key(f"{request.node.name}-{n}"))
        for n in range(10)
    ]
    assert 0 < _kept_bytes(app, "proj-capped") <= MAX_KEPT
    assert (
        db.execute(app, "SELECT count(*) FROM idempotency_keys WHERE project = 'proj-capped' AND body IS NULL")[0][0]
        > 0
    )
    for n, file in enumerate(made):  # each repeat still gets its own file, kept or retrieved
        again = client.files.with_raw_response.create(
            file=("in.jsonl", LINES), purpose="batch", extra_headers=_key(f"{request.node.name}-{n}")
        )
        assert again.headers["idempotent-replayed"] == "true" and again.parse().id == file.id
    assert len([f for f in client.files.list(limit=100).data if f.filename == "in.jsonl"]) == 10


class Statements:
    """The SQL statements the app sends about idempotency_keys, in order."""

    def __init__(self, app: AppServer) -> None:
        database = app.runtime.db
        self.engines = {database.write_engine.sync_engine, database.read_engine.sync_engine}
        self.seen: list[str] = []

    def _record(self, conn, cursor, statement, parameters, context, executemany) -> None:
        if "idempotency_keys" in statement:
            self.seen.append(statement.lstrip().split(None, 1)[0].upper())

    def __enter__(self) -> Statements:
        for engine in self.engines:
            event.listen(engine, "before_cursor_execute", self._record)
        return self

    def __exit__(self, *exc: object) -> None:
        for engine in self.engines:
            event.remove(engine, "before_cursor_execute", self._record)

    def writes(self) -> int:
        return sum(1 for s in self.seen if s in {"INSERT", "UPDATE", "DELETE"})


def test_a_waiting_repeat_reads_with_backoff_and_writes_nothing(app, request):
    client, key = app.client(LEASE), request.node.name
    first = client.files.create(file=("in.jsonl", LINES), purpose="batch", extra_headers=_key(key))
    # As if another replica still ran the first request: its lease is live for a minute.
    db.execute(
        app,
        "UPDATE idempotency_keys SET locked_until = :until, owner = 'elsewhere' WHERE key = :key",
        until=time.time() + 60,
        key=key,
    )
    answers: list[openai.types.FileObject] = []
    with Statements(app) as statements:
        repeat = threading.Thread(
            target=lambda: answers.append(
                client.files.create(file=("in.jsonl", LINES), purpose="batch", extra_headers=_key(key))
            )
        )
        started = time.monotonic()
        repeat.start()
        wait_until(lambda: statements.seen.count("SELECT") >= 5, what="the repeat's reads")
        waited = time.monotonic() - started
        writes = statements.writes()
        db.execute(app, "UPDATE idempotency_keys SET locked_until = NULL WHERE key = :key", key=key)
        repeat.join(timeout=30)
    # One attempt to hold the key (remove it if expired, insert, take over), then reads only.
    assert writes == 3, statements.seen
    assert waited >= idempotency.FIRST_POLL_SECONDS * (1 + 2 + 4 + 8)  # backoff: 4 waits double
    assert [a.id for a in answers] == [first.id]


@pytest.fixture
def short_lease(monkeypatch):
    """A lease of 6 s renewed every 2 s (errors retried after 0.05 s: a loaded host's stall of a
    few seconds, SQLite's write lock held by the worker beside it, must not lapse it; CI saw a
    2.4 s lease lapse), and the first batch create made slow until the test lets it go."""
    monkeypatch.setattr(idempotency, "LEASE_SECONDS", 6.0)
    monkeypatch.setattr(idempotency, "RENEW_RETRY_SECONDS", 0.05)
    go, started = threading.Event(), threading.Event()
    create = BatchService.create

    async def slow_create(self, *args, **kwargs):
        if not started.is_set():
            started.set()
            while not go.is_set():
                await asyncio.sleep(0.02)
        return await create(self, *args, **kwargs)

    monkeypatch.setattr(BatchService, "create", slow_create)
    yield started, go
    go.set()  # a failed test's slow request ends too


def _renew_failing(monkeypatch, failures: int | None) -> dict[str, int]:
    """The renewal's database write fails `failures` times (None: always), then works."""
    counts = {"failed": 0, "renewed": 0}
    renew = IdempotencyKeyRepository.renew

    async def flaky(self, *args, **kwargs):
        if failures is None or counts["failed"] < failures:
            counts["failed"] += 1
            raise OperationalError("UPDATE idempotency_keys", {}, Exception("the database restarts"))
        counts["renewed"] += 1
        return await renew(self, *args, **kwargs)

    monkeypatch.setattr(IdempotencyKeyRepository, "renew", flaky)
    return counts


def _lease_lapsed(app: AppServer, key: str) -> bool:
    (until,) = db.execute(app, "SELECT locked_until FROM idempotency_keys WHERE key = :key", key=key)[0]
    return until is not None and until < time.time()


def _create_batch(client: openai.OpenAI, file_id: str, key: str):
    return client.batches.create(
        input_file_id=file_id, endpoint="/v1/chat/completions", completion_window="24h", extra_headers=_key(key)
    )


def _batches_of(client: openai.OpenAI, file_id: str) -> list[str]:
    return [b.id for b in client.batches.list(limit=100).data if b.input_file_id == file_id]


def test_the_lease_survives_database_errors_and_a_repeat_waits(app, request, short_lease, monkeypatch):
    started, go = short_lease
    counts = _renew_failing(monkeypatch, failures=2)
    client, key = app.client(LEASE), request.node.name
    file = client.files.create(file=("in.jsonl", LINES), purpose="batch")
    results: dict[str, str] = {}
    first = threading.Thread(target=lambda: results.update(first=_create_batch(client, file.id, key).id))
    first.start()
    started.wait(10)
    second = threading.Thread(target=lambda: results.update(second=_create_batch(client, file.id, key).id))
    second.start()
    # Two failed renewals, then more than a lease's worth of good ones: the repeat still waits.
    wait_until(
        lambda: counts["renewed"] >= 4,
        timeout=60,
        what=lambda: f"renewals after the errors ({counts}; lease lapsed: {_lease_lapsed(app, key)})",
    )
    assert counts["failed"] == 2 and "second" not in results
    go.set()
    first.join(30)
    second.join(30)
    assert results["first"] == results["second"] and _batches_of(client, file.id) == [results["first"]]


def test_a_holder_that_lost_its_lease_commits_nothing(app, request, short_lease, monkeypatch):
    started, go = short_lease
    _renew_failing(monkeypatch, failures=None)  # the renewals never reach the database
    client, key = app.client(LEASE), request.node.name
    file = client.files.create(file=("in.jsonl", LINES), purpose="batch")
    errors: list[openai.APIStatusError] = []

    def first_create() -> None:
        try:
            _create_batch(client, file.id, key)
        except openai.APIStatusError as error:
            errors.append(error)

    first = threading.Thread(target=first_create)
    first.start()
    started.wait(10)
    wait_until(lambda: _lease_lapsed(app, key), what="the first request's lease to lapse")
    taken_over = _create_batch(client, file.id, key)  # the repeat holds the key now, and creates
    go.set()
    first.join(30)
    assert [e.status_code for e in errors] == [409] and errors[0].body["code"] == "idempotency_key_in_use"
    assert _batches_of(client, file.id) == [taken_over.id]
    assert _create_batch(client, file.id, key).id == taken_over.id


def test_a_create_committed_before_its_replica_stopped_is_never_run_again(app, request, monkeypatch):
    """The record is marked committed in the create's own transaction: a replica that stops before
    keeping the response leaves a record a repeat answers 409 for, never a second object."""
    monkeypatch.setattr(idempotency, "LEASE_SECONDS", 0.3)

    async def stopped(self, *args, **kwargs) -> None:
        return None  # the replica stopped: nothing kept, the lease left to lapse

    monkeypatch.setattr(IdempotentRequests, "finish", stopped)
    client, key = app.client(LEASE), request.node.name
    file = client.files.create(file=("in.jsonl", LINES), purpose="batch")
    made = _create_batch(client, file.id, key)
    monkeypatch.undo()
    wait_until(lambda: _lease_lapsed(app, key), what="the lease to lapse (nothing renews it now)")
    with pytest.raises(openai.ConflictError) as refused:
        _create_batch(client, file.id, key)
    assert refused.value.body["code"] == "idempotency_response_not_kept"
    assert _batches_of(client, file.id) == [made.id]
