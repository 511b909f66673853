"""The front door, in process: the key is checked before a body is read, JSON routes take JSON
only (415), open mode answers this machine only (421/403) and mints no key, failed key checks
are throttled per address and key prefix (429), a good key never. On SQLite and Postgres: the
key checks read the database."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from starlette.testclient import TestClient

from app.api.runtime import runtime_of
from app.core.config import Settings
from app.domains.organization.auth import any_key_stored
from app.http.app import create_app

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True)

LOCAL = "http://127.0.0.1:8000"
PEER = ("127.0.0.1", 50000)
KEYS = {"api_keys": "key-a=proj-a", "admin_keys": "key-admin"}
# A route of each kind that takes a JSON body (the Administration API's too).
JSON_ROUTES = [
    "/v1/batches",
    "/v1/messages/batches",
    "/v1/webhook_endpoints",
    "/v1/organization/admin_api_keys",
    "/v1/uploads",
]
MULTIPART = {"content-type": "multipart/form-data; boundary=xyz"}


@pytest.fixture
def make_app(tmp_path, database_factory) -> Iterator:
    """Returns a function starting the app (lifespan included) with these settings, and a client
    of it from 127.0.0.1."""
    clients: list[TestClient] = []

    def make(peer: tuple[str, int] = PEER, **settings) -> TestClient:
        data_dir = tmp_path / f"data-{len(clients)}"
        app = create_app(Settings(data_dir=data_dir, database_url=database_factory() or "", no_models=True, **settings))
        client = TestClient(app, base_url=LOCAL, client=peer, raise_server_exceptions=False)
        clients.append(client.__enter__())
        return client

    yield make
    for client in clients:
        client.__exit__(None, None, None)


class CountingBody:
    """A request body that counts the chunks the server pulled."""

    def __init__(self, chunks: int = 64, size: int = 64 * 1024) -> None:
        self.pulled = 0
        self.chunks, self.size = chunks, size

    def __iter__(self) -> Iterator[bytes]:
        for _ in range(self.chunks):
            self.pulled += 1
            yield b"x" * self.size


def _bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


def test_a_keyless_body_is_refused_before_any_of_it_is_read(make_app):
    app = make_app(**KEYS)
    for path in JSON_ROUTES:
        for headers in (MULTIPART, {"content-type": "application/json"}, {}):
            body = CountingBody()
            response = app.post(path, content=body, headers=headers)
            assert response.status_code == 401, (path, headers, response.text)
            assert body.pulled == 0, (path, headers)
            assert response.headers["connection"] == "close"
    wrong = CountingBody()
    assert app.post("/v1/batches", content=wrong, headers={**MULTIPART, **_bearer("nope")}).status_code == 401
    assert wrong.pulled == 0


def test_json_routes_answer_415_to_other_bodies_before_reading_them(make_app):
    app = make_app(**KEYS)
    for path in JSON_ROUTES:
        for content_type in ("multipart/form-data; boundary=xyz", "text/plain", "application/x-www-form-urlencoded"):
            body = CountingBody()
            response = app.post(path, content=body, headers={"content-type": content_type, **_bearer("key-admin")})
            assert response.status_code == 415, (path, content_type, response.text)
            assert body.pulled == 0
            if path.startswith("/v1/messages"):
                assert response.json()["error"] == {"type": "invalid_request_error", "message": _message(response)}
            else:
                assert response.json()["error"]["code"] == "unsupported_media_type"
    # Anthropic's clients send their key as x-api-key.
    messages = app.post(
        "/v1/messages/batches", content=b"x", headers={"content-type": "text/plain", "x-api-key": "key-a"}
    )
    assert messages.status_code == 415 and messages.json()["type"] == "error"
    # JSON still reaches the route, a body-less POST of any type too, and uploads take multipart.
    assert app.post("/v1/batches", json={}, headers=_bearer("key-a")).status_code == 400
    assert app.post("/v1/batches/batch_x/cancel", headers={**MULTIPART, **_bearer("key-a")}).status_code == 404
    uploaded = app.post(
        "/v1/files", files={"file": ("a.jsonl", b"{}\n")}, data={"purpose": "batch"}, headers=_bearer("key-a")
    )
    assert uploaded.status_code == 200, uploaded.text


def _message(response) -> str:
    return response.json()["error"]["message"]


def test_the_json_cap_holds_on_json_routes_and_other_bodies_are_415(make_app):
    app = make_app(**KEYS, max_json_body_bytes=1000)
    typed = {"content-type": "application/json", **_bearer("key-a")}
    too_large = app.post("/v1/batches", content=b"{" + b" " * 2000 + b"}", headers=typed)
    assert too_large.status_code == 413 and too_large.json()["error"]["code"] == "request_too_large"
    # Multipart used to skip the cap on every route; on a JSON route it is now refused unread.
    body = CountingBody()
    assert app.post("/v1/batches", content=body, headers={**MULTIPART, **_bearer("key-a")}).status_code == 415
    assert body.pulled == 0
    untyped = app.post("/v1/batches", content=b"{}", headers=_bearer("key-a"))
    assert untyped.status_code == 415 and "'none'" in untyped.json()["error"]["message"]


def test_open_mode_answers_loopback_names_and_its_own_origin_only(make_app):
    app = make_app()
    for host in ("127.0.0.1:8000", "localhost", "localhost:9", "[::1]:8000", "127.0.0.1"):
        assert app.get("/v1/batches", headers={"host": host}).status_code == 200, host
    for host in ("evil.example", "evil.example:8000", "10.0.0.5:8000", "localhost.evil.example"):
        refused = app.get("/v1/batches", headers={"host": host})
        assert refused.status_code == 421, host
        assert refused.json()["error"]["code"] == "open_mode_host"
    assert app.get("/ui/", headers={"host": "evil.example"}).status_code == 421
    for origin in ("http://evil.example", "null", "http://127.0.0.1:9999", "http://localhost:8000"):
        body = CountingBody()
        refused = app.post(
            "/v1/messages/batches", content=body, headers={"origin": origin, "content-type": "text/plain"}
        )
        assert refused.status_code == 403, origin
        assert refused.json()["type"] == "error" and body.pulled == 0
    # The dashboard's own origin: the same host and port the request names.
    own = app.post("/v1/batches", json={}, headers={"origin": LOCAL})
    assert own.status_code == 400, own.text
    assert app.get("/ui/", headers={"origin": LOCAL}).status_code == 200
    # Probes are never refused.
    assert app.get("/health", headers={"host": "10.0.0.5"}).status_code == 200


def test_open_mode_mints_no_key(make_app, backend):
    app = make_app()
    admin = app.post("/v1/organization/admin_api_keys", json={"name": "mine"})
    assert admin.status_code == 403 and admin.json()["error"]["code"] == "open_mode"
    assert "batchd keys create --admin" in admin.json()["error"]["message"]
    project = app.post("/v1/organization/projects", json={"name": "team"})
    assert project.status_code == 200, project.text
    account = app.post(f"/v1/organization/projects/{project.json()['id']}/service_accounts", json={"name": "bot"})
    assert account.status_code == 403 and account.json()["error"]["code"] == "open_mode"
    assert app.portal.call(any_key_stored, runtime_of(app.app).db) is False
    assert app.get("/v1/batches").status_code == 200  # still the operator's


def test_failed_key_checks_are_throttled_per_address_and_prefix_and_a_good_key_never(make_app):
    app = make_app(**KEYS, auth_failure_burst=3, auth_failure_window_seconds=60)
    for _ in range(3):
        assert app.get("/v1/batches").status_code == 401  # no key is no failed check
    for _ in range(3):
        assert app.get("/v1/batches", headers=_bearer("wrong")).status_code == 401
    throttled = app.get("/v1/batches", headers=_bearer("wrong"))
    assert throttled.status_code == 429
    assert throttled.json()["error"]["code"] == "rate_limit_exceeded"
    assert "invalid API key" in throttled.json()["error"]["message"]
    assert 1 <= int(throttled.headers["retry-after"]) <= 20
    # Another bad key from the spent address: refused 429 too, its body unread.
    body = CountingBody()
    other_bad = app.post("/v1/batches", content=body, headers={**MULTIPART, **_bearer("key-b-made-up")})
    assert other_bad.status_code == 429 and body.pulled == 0
    # A good key is checked first and served, whatever its address has done (Anthropic's too).
    assert app.get("/v1/batches", headers=_bearer("key-a")).status_code == 200
    anthropic = app.get("/v1/messages/batches", headers={"x-api-key": "key-a"})
    assert anthropic.status_code == 200, anthropic.text
    bad_anthropic = app.get("/v1/messages/batches", headers={"x-api-key": "key-b-made-up"})
    assert bad_anthropic.status_code == 429 and bad_anthropic.json()["error"]["type"] == "rate_limit_error"
    other = TestClient(app.app, base_url=LOCAL, client=("127.0.0.2", 1))
    other.portal = app.portal  # the running app's event loop (its database pools live there)
    assert other.get("/v1/batches", headers=_bearer("key-a")).status_code == 200
    # From a fresh address: the spent prefix ("wrong") is still refused, another bad key is not.
    assert other.get("/v1/batches", headers=_bearer("wrong")).status_code == 429
    assert other.get("/v1/batches", headers=_bearer("key-b-made-up")).status_code == 401


def test_liveness_needs_neither_engines_nor_database(make_app):
    app = make_app(**KEYS, readiness_db_grace_seconds=0)
    runtime = runtime_of(app.app)
    assert app.get("/health").status_code == 200

    async def unreachable() -> None:
        raise ConnectionRefusedError("database down")

    runtime.db.ping = unreachable  # type: ignore[method-assign]
    down = app.get("/health")
    assert (down.status_code, down.json()["status"]) == (503, "database unavailable")
    runtime.ready = False  # engines loading
    assert app.get("/health").status_code == 503
    assert app.get("/health/live").json() == {"status": "ok"}


def test_readiness_holds_through_a_database_blip_shorter_than_its_grace(make_app):
    """A database that stops answering keeps /health 200 (saying so) within the grace, 503 past
    it; it answering again clears the clock. Two apps: a grace no test outlasts, and none."""

    async def unreachable() -> None:
        raise ConnectionRefusedError("database down")

    patient, impatient = make_app(**KEYS), make_app(**KEYS, readiness_db_grace_seconds=0)
    assert runtime_of(patient.app).settings.readiness_db_grace_seconds == 30  # the default
    runtime_of(patient.app).settings.readiness_db_grace_seconds = 3600
    for app in (patient, impatient):
        runtime = runtime_of(app.app)
        answering = runtime.db.ping
        runtime.db.ping = unreachable  # type: ignore[method-assign]
        for headers in ({}, _bearer("key-admin")):
            blip = app.get("/health", headers=headers)
            assert blip.json()["database"].startswith("not answering for "), blip.json()
            assert blip.json()["database"].endswith(
                f"(readiness grace {runtime.settings.readiness_db_grace_seconds:g} s)"
            )
            if app is patient:
                assert (blip.status_code, blip.json()["status"]) == (200, "ok")
            else:
                assert (blip.status_code, blip.json()["status"]) == (503, "database unavailable")
        assert app.get("/health/live").json() == {"status": "ok"}
        runtime.db.ping = answering  # type: ignore[method-assign]
        back = app.get("/health")
        assert (back.status_code, back.json()) == (200, {"status": "ok", "replica": runtime.settings.replica_id})
        assert runtime.database_down_since is None


class FleetStates:
    """Engines whose upstream URLs /health may list."""

    ready = True

    def status(self) -> dict:
        return {"chat": {"http://10.1.2.3:8000/v1": {"state": "up"}}}

    async def shutdown(self) -> None:
        pass


def test_health_details_are_for_admins_only(make_app):
    keyed = make_app(**KEYS)
    runtime_of(keyed.app).engines = FleetStates()  # type: ignore[assignment]
    for headers in ({}, _bearer("key-a"), _bearer("wrong"), {"x-api-key": "key-admin"}):
        body = keyed.get("/health", headers=headers).json()
        assert set(body) == {"status", "replica"}, headers
    admin = keyed.get("/health", headers=_bearer("key-admin")).json()
    assert admin["upstreams"] == FleetStates().status()

    open_mode = make_app()
    runtime_of(open_mode.app).engines = FleetStates()  # type: ignore[assignment]
    assert "upstreams" in open_mode.get("/health").json()
    assert set(open_mode.get("/health", headers={"host": "evil.example"}).json()) == {"status", "replica"}
