"""Per-project retention, in process on each backend (SQLite + local blobs, Postgres + S3): an
admin key sets a project's `retention_days` through the Administration API; one sweep then
deletes the project's files made before it (uploads, a finished batch's input, output and error
files: rows, blobs, GET → 404, quota freed) and that batch's results, writes each deletion to the
audit log, and leaves newer files, a running batch's input and other projects' files alone."""

from __future__ import annotations

import time

from sqlalchemy import select, update

from app.api.runtime import Runtime
from app.background.retention import DAY_SECONDS, sweep_retention
from app.core.chunk_format import pack_line_nos
from app.db.models import Batch, File
from app.db.repositories.chunks import ChunkRepository
from app.db.repositories.files import FileRepository
from app.domains.files.service import commit_new_file
from app.domains.limits.quotas_repository import QuotaRepository
from tests.support.app_server import AppServer

ADMIN = "admin-retention"
OTHER = "key-other"
JSONL = b'{"custom_id": "a", "method": "POST", "url": "/v1/chat/completions", "body": {"model": "m"}}\n'


def _app(tmp_path, database_factory, storage_factory) -> AppServer:
    # API only: no worker, so a batch stays `validating`, as a running one does.
    env = {
        "BATCHD_API_KEYS": f"{OTHER}=proj-other",
        "BATCHD_ADMIN_KEYS": ADMIN,
        "BATCHD_API_ONLY": "true",
        "BATCHD_SWEEP_INTERVAL": "3600",
    }
    return AppServer(tmp_path, database_factory(), env, storage_factory())


def _ok(response) -> dict:
    assert response.status_code == 200, response.text
    return response.json()


def _upload(app: AppServer, key: str, name: str, purpose: str = "user_data", data: bytes = b"bytes") -> str:
    created = app.http.post(
        "/v1/files", headers=app.as_key(key), files={"file": (name, data)}, data={"purpose": purpose}
    )
    return _ok(created)["id"]


def _batch(app: AppServer, key: str, input_file_id: str) -> str:
    body = {"input_file_id": input_file_id, "endpoint": "/v1/chat/completions", "completion_window": "24h"}
    return _ok(app.http.post("/v1/batches", headers=app.as_key(key), json=body))["id"]


async def _finish_with_outputs(runtime: Runtime, project: str, batch_id: str, ended_at: int) -> list[str]:
    """Make the batch completed with an output file, an error file and a results chunk, as the
    worker's finalize leaves it (the server runs no engine)."""
    store, ids = runtime.store, []
    async with runtime.db.write() as session:
        for kind in ("output", "error"):
            writer = store.new_writer(project, f"file-{kind}-{batch_id}")
            writer.write(b'{"custom_id": "a"}\n')
            file = await commit_new_file(
                session,
                store,
                writer,
                file_id=f"file-{kind}-{batch_id}",
                project=project,
                filename=f"{batch_id}_{kind}.jsonl",
                purpose="batch_output",
                expires_after=None,
            )
            ids.append((await FileRepository(session).add(file)).id)
        chunk = store.new_writer(project, f"chunk-{batch_id}")
        chunk.write(b'{"custom_id": "a"}\n')
        await store.commit(chunk, project, f"chunk-{batch_id}")
        await ChunkRepository(session).add(batch_id, 0, f"chunk-{batch_id}", pack_line_nos([0]), 1)
        await session.execute(
            update(Batch)
            .where(Batch.id == batch_id)
            .values(status="completed", completed_at=ended_at, output_file_id=ids[0], error_file_id=ids[1])
        )
    return ids


async def _age(runtime: Runtime, file_ids: list[str], seconds: int) -> None:
    async with runtime.db.write() as session:
        await session.execute(update(File).where(File.id.in_(file_ids)).values(created_at=File.created_at - seconds))


async def _live_ids(runtime: Runtime, project: str) -> set[str]:
    async with runtime.db.read() as session:
        result = await session.execute(select(File.id).where(File.project == project, File.deleted_at.is_(None)))
        return set(result.scalars().all())


async def _stored_bytes(runtime: Runtime, project: str) -> int:
    async with runtime.db.read() as session:
        return await QuotaRepository(session).stored_bytes(project, int(time.time()))


async def _sweep(runtime: Runtime) -> int:
    """Once: what the sweeper does every BATCHD_SWEEP_INTERVAL."""
    return await sweep_retention(runtime.db, runtime.store, runtime.settings)


def test_one_sweep_deletes_and_audits_what_the_retention_period_ran_out_on(tmp_path, database_factory, storage_factory):
    with _app(tmp_path, database_factory, storage_factory) as app:
        runtime = app.runtime
        admin = app.as_key(ADMIN)
        project = _ok(app.http.post("/v1/organization/projects", headers=admin, json={"name": "R"}))["id"]
        account = app.http.post(
            f"/v1/organization/projects/{project}/service_accounts", headers=admin, json={"name": "svc"}
        )
        key = _ok(account)["api_key"]["value"]
        updated = app.http.post(f"/v1/organization/projects/{project}", headers=admin, json={"retention_days": 1})
        assert _ok(updated)["retention_days"] == 1
        read = app.http.get(f"/v1/organization/projects/{project}", headers=admin)
        assert _ok(read)["retention_days"] == 1

        old_upload = _upload(app, key, "old.txt", data=b"old upload")
        new_upload = _upload(app, key, "new.txt", data=b"new upload")
        running_input = _upload(app, key, "running.jsonl", "batch", JSONL)
        finished_input = _upload(app, key, "finished.jsonl", "batch", JSONL)
        _batch(app, key, running_input)  # stays `validating`: running
        finished = _batch(app, key, finished_input)
        two_days_ago = int(time.time()) - 2 * DAY_SECONDS
        outputs = app.call(_finish_with_outputs, runtime, project, finished, two_days_ago)
        other_old = _upload(app, OTHER, "other.txt")
        app.call(_age, runtime, [old_upload, running_input, finished_input, *outputs, other_old], 2 * DAY_SECONDS)

        assert app.call(_sweep, runtime) == 5

        deleted = [old_upload, finished_input, *outputs]
        assert app.call(_live_ids, runtime, project) == {new_upload, running_input}
        for file_id in deleted:
            assert app.http.get(f"/v1/files/{file_id}", headers=app.as_key(key)).status_code == 404
            assert app.http.get(f"/v1/files/{file_id}/content", headers=admin).status_code == 404
            assert not app.call(runtime.store.exists, project, file_id)
        for file_id in (new_upload, running_input):
            assert app.http.get(f"/v1/files/{file_id}/content", headers=app.as_key(key)).status_code == 200
        assert app.http.get(f"/v1/files/{other_old}", headers=app.as_key(OTHER)).status_code == 200
        results = app.http.get(f"/v1/batches/{finished}/results", headers=app.as_key(key))
        assert results.status_code == 200 and results.content == b""
        assert not app.call(runtime.store.exists, project, f"chunk-{finished}")
        assert app.call(_stored_bytes, runtime, project) == len(b"new upload") + len(JSONL)

        logged = app.http.get(
            "/v1/organization/audit_logs", headers=admin, params={"event_types[]": "resource.deleted", "limit": 100}
        )
        entries = _ok(logged)["data"]
        assert sorted(entry["resource.deleted"]["id"] for entry in entries) == sorted([*deleted, finished])
        for entry in entries:
            assert entry["project"]["id"] == project and entry["actor"] is None
            assert entry["resource.deleted"]["data"]["reason"] == "retention"
            assert entry["resource.deleted"]["data"]["retention_days"] == 1

        # Nothing left to do: a second sweep deletes and logs nothing more.
        assert app.call(_sweep, runtime) == 0

        cleared = app.http.post(f"/v1/organization/projects/{project}", headers=admin, json={"retention_days": None})
        assert _ok(cleared)["retention_days"] is None
        changes = app.http.get(
            "/v1/organization/audit_logs", headers=admin, params={"event_types[]": "project.updated"}
        )
        requested = [entry["project.updated"]["changes_requested"] for entry in _ok(changes)["data"]]
        assert requested == [{"retention_days": None}, {"retention_days": 1}]


def test_retention_days_are_validated(tmp_path, database_factory, storage_factory):
    with _app(tmp_path, database_factory, storage_factory) as app:
        admin = app.as_key(ADMIN)
        project = _ok(app.http.post("/v1/organization/projects", headers=admin, json={"name": "V"}))["id"]
        for bad in (0, -1, 36_501, "soon", 1.5):
            refused = app.http.post(f"/v1/organization/projects/{project}", headers=admin, json={"retention_days": bad})
            assert refused.status_code == 400, (bad, refused.text)
            assert refused.json()["error"]["type"] == "invalid_request_error"
        kept = app.http.post(f"/v1/organization/projects/{project}", headers=admin, json={"name": "V2"})
        assert _ok(kept)["retention_days"] is None
