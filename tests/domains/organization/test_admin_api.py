"""OpenAI's Administration API as a platform team uses it: the official client's
`client.admin.organization.*` methods against two replicas of batchd's app in process sharing
one database (SQLite and Postgres), the second an --api-only replica. Batches run on the fake
engine (tests/support/fake_engine.py), whose `fake:hold` lines keep a batch running until an
archive catches it."""

from __future__ import annotations

import time

import openai
import pytest

from harness import db
from harness.poll import wait_until
from tests.support.app_server import AppServer
from tests.support.batches import CHAT_MODEL, chat_line, create, wait_for
from tests.support.fake_engine import FakeEngines

ADMIN_KEY = "admin-bootstrap"
TEAM_KEY = "key-team"  # a config key of an existing project, not an admin
LINES = 40  # the first DONE_LINES of a batch complete, the rest hold: still running when the archive comes
DONE_LINES = 10

pytestmark = pytest.mark.parametrize("backend", ["sqlite", "postgres"], indirect=True, scope="session")


class Org:
    """Two replicas (`a` runs batches, `b` serves the API only) and admin clients of each."""

    def __init__(self, a: AppServer, b: AppServer) -> None:
        self.a, self.b = a, b
        self.admin = a.client("unused", admin_api_key=ADMIN_KEY).admin.organization
        self.admin_b = b.client("unused", admin_api_key=ADMIN_KEY).admin.organization

    def clients(self, key: str) -> list[openai.OpenAI]:
        return [s.client(key) for s in (self.a, self.b)]


@pytest.fixture(scope="module")
def org(backend, tmp_path_factory, database_factory):
    env = {
        "BATCHD_API_KEYS": f"{TEAM_KEY}=team-cli",
        "BATCHD_ADMIN_KEYS": ADMIN_KEY,
        "BATCHD_SECRET_KEY": "admin-api-test-secret",
    }
    data_dir, url = tmp_path_factory.mktemp("admin-api"), database_factory()
    with AppServer(data_dir, url, env=env, engines=FakeEngines(served=(CHAT_MODEL,))) as a:
        with AppServer(data_dir, url, env={**env, "BATCHD_API_ONLY": "true"}) as b:
            yield Org(a, b)


def _refused(client: openai.OpenAI) -> bool:
    try:
        client.files.list()
    except openai.AuthenticationError:
        return True
    return False


def _audit(org: Org, **filters) -> list:
    return list(org.admin.audit_logs.list(limit=100, **filters))


def test_a_project_created_by_api_gets_a_key_that_works_at_once_on_both_replicas(org):
    project = org.admin.projects.create(name="Team Red")
    assert project.object == "organization.project" and project.id.startswith("proj_")
    assert (project.name, project.status, project.archived_at) == ("Team Red", "active", None)
    assert org.admin_b.projects.retrieve(project.id) == project

    account = org.admin.projects.service_accounts.create(project.id, name="red-batch-runner")
    key = account.api_key
    assert account.object == "organization.project.service_account" and account.name == "red-batch-runner"
    assert key is not None and key.value.startswith("bd-") and key.object.endswith("service_account.api_key")
    on_a, on_b = org.clients(key.value)  # both replicas, with no wait
    assert on_a.files.list().data == on_b.files.list().data == []
    uploaded = on_a.files.create(file=("in.jsonl", b'{"a": 1}\n'), purpose="batch")
    assert on_b.files.retrieve(uploaded.id).id == uploaded.id

    renamed = org.admin_b.projects.update(project.id, name="Team Crimson")
    assert (renamed.id, renamed.name) == (project.id, "Team Crimson")
    assert org.admin.projects.retrieve(project.id).name == "Team Crimson"
    listed = {p.id: p for p in org.admin.projects.list(limit=100)}
    assert listed[project.id].name == "Team Crimson"


def test_keys_and_service_accounts_list_retrieve_and_revoke(org):
    project = org.admin.projects.create(name="Team Keys")
    accounts = [org.admin.projects.service_accounts.create(project.id, name=f"runner-{n}") for n in range(3)]
    listed = list(org.admin.projects.service_accounts.list(project.id, limit=2))  # pages on its own
    assert [a.id for a in listed] == [a.id for a in accounts]
    assert org.admin_b.projects.service_accounts.retrieve(accounts[0].id, project_id=project.id).name == "runner-0"

    keys = list(org.admin.projects.api_keys.list(project.id, limit=2))
    assert [k.id for k in keys] == [a.api_key.id for a in accounts if a.api_key]
    key = org.admin.projects.api_keys.retrieve(keys[1].id, project_id=project.id)
    assert key.owner.type == "service_account" and key.owner.service_account is not None
    assert key.owner.service_account.id == accounts[1].id and key.owner_project_access == "active"
    assert key.redacted_value.startswith(accounts[1].api_key.value[:8]) and "***" in key.redacted_value

    # Deleting the service account, or its key, revokes the key on both replicas at once.
    deleted = org.admin.projects.service_accounts.delete(accounts[0].id, project_id=project.id)
    assert (deleted.id, deleted.deleted) == (accounts[0].id, True)
    removed = org.admin_b.projects.api_keys.delete(keys[1].id, project_id=project.id)
    assert (removed.id, removed.deleted, removed.object) == (keys[1].id, True, "organization.project.api_key.deleted")
    for account in accounts[:2]:
        assert all(_refused(c) for c in org.clients(account.api_key.value))
    assert not any(_refused(c) for c in org.clients(accounts[2].api_key.value))
    assert [a.id for a in org.admin.projects.service_accounts.list(project.id)] == [accounts[2].id]
    with pytest.raises(openai.NotFoundError):
        org.admin.projects.api_keys.retrieve(keys[1].id, project_id=project.id)
    other = org.admin.projects.create(name="Someone else")
    with pytest.raises(openai.NotFoundError):  # a key is found only under its own project
        org.admin.projects.api_keys.retrieve(keys[0].id, project_id=other.id)


def test_admin_api_keys_create_list_retrieve_delete(org):
    created = org.admin.admin_api_keys.create(name="platform-ci")
    assert created.object == "organization.admin_api_key" and created.value.startswith("bd-")
    ci = org.b.client("unused", admin_api_key=created.value).admin.organization
    assert ci.admin_api_keys.retrieve(created.id).name == "platform-ci"  # works at once, on the other replica
    second = ci.admin_api_keys.create(name="platform-ops")
    assert [k.id for k in org.admin.admin_api_keys.list(limit=1)][-2:] == [created.id, second.id]
    assert [k.id for k in org.admin.admin_api_keys.list(order="desc")][:2] == [second.id, created.id]
    deleted = org.admin.admin_api_keys.delete(created.id)
    assert (deleted.id, deleted.deleted) == (created.id, True)
    with pytest.raises(openai.AuthenticationError):
        ci.projects.list()
    with pytest.raises(openai.NotFoundError):
        org.admin.admin_api_keys.retrieve(created.id)


def test_archiving_refuses_keys_within_a_second_and_cancels_running_batches(org):
    project = org.admin.projects.create(name="Team Archive")
    key = org.admin.projects.service_accounts.create(project.id, name="runner").api_key
    assert key is not None
    client = org.a.client(key.value)
    queued = create(client, [_held_after_the_first(f"q-{n}", n) for n in range(LINES)])
    running = create(client, [_held_after_the_first(f"r-{n}", n) for n in range(LINES)])
    wait_until(
        lambda: (
            client.batches.retrieve(running.id).request_counts.completed > 0
            or client.batches.retrieve(queued.id).request_counts.completed > 0
        ),
        60,
        "a batch running",
    )

    archived = org.admin_b.projects.archive(project.id)
    assert (archived.status, archived.id) == ("archived", project.id) and archived.archived_at
    started = time.monotonic()
    wait_until(lambda: all(_refused(c) for c in org.clients(key.value)), 1.0, "the key refused on both replicas")
    assert time.monotonic() - started <= 1.0

    rows = wait_until(
        lambda: (
            (
                r := db.execute(
                    org.a,
                    "SELECT id, status, output_file_id, completed FROM batches WHERE id IN (:q, :r)",
                    q=queued.id,
                    r=running.id,
                )
            )
            and all(row[1] == "cancelled" for row in r)
            and r
        ),
        60,
        "both batches cancelled",
    )
    # The lines already run are kept, and an admin key still reads the archived project's files.
    output_ids = [row[2] for row in rows if row[2]]
    assert output_ids, rows
    admin_files = org.b.client(ADMIN_KEY)
    text = admin_files.files.content(output_ids[0]).text
    assert text.count("\n") == sum(row[3] for row in rows if row[2] == output_ids[0]) > 0
    assert admin_files.files.retrieve(queued.input_file_id).id == queued.input_file_id

    assert [p.id for p in org.admin.projects.list(limit=100) if p.id == project.id] == []
    listed = {p.id: p for p in org.admin.projects.list(include_archived=True, limit=100)}
    assert listed[project.id].status == "archived"
    assert org.admin.projects.archive(project.id).archived_at == archived.archived_at  # once
    with pytest.raises(openai.BadRequestError):
        org.admin.projects.update(project.id, name="Too late")
    with pytest.raises(openai.BadRequestError):
        org.admin.projects.service_accounts.create(project.id, name="revived")
    keys = list(org.admin.projects.api_keys.list(project.id))
    assert [k.owner_project_access for k in keys] == ["inactive"]


def _held_after_the_first(custom_id: str, n: int) -> dict:
    return chat_line(custom_id, "Hello" if n < DONE_LINES else "fake:hold")


def _team(org: Org, name: str) -> tuple[str, openai.OpenAI]:
    project = org.admin.projects.create(name=name)
    key = org.admin.projects.service_accounts.create(project.id, name="runner").api_key
    assert key is not None
    return project.id, org.a.client(key.value)


def test_a_daily_limit_set_by_api_refuses_the_next_batch(org):
    project_id, client = _team(org, "Team Limited")
    limits = list(org.admin.projects.rate_limits.list_rate_limits(project_id))
    assert [(r.id, r.model, r.object) for r in limits] == [(f"rl-{CHAT_MODEL}", CHAT_MODEL, "project.rate_limit")]
    assert (limits[0].batch_1_day_max_input_tokens, limits[0].max_requests_per_1_day) == (None, None)
    assert (limits[0].model_extra or {}).get("weight") == 1

    updated = org.admin_b.projects.rate_limits.update_rate_limit(
        f"rl-{CHAT_MODEL}",
        project_id=project_id,
        batch_1_day_max_input_tokens=100,
        extra_body={"weight": 3, "max_enqueued_tokens": 10_000},
    )
    assert updated.batch_1_day_max_input_tokens == 100 and updated.max_requests_per_1_day is None
    assert (updated.model_extra or {}).get("weight") == 3
    assert (updated.model_extra or {}).get("max_enqueued_tokens") == 10_000
    # Each line is about 3 prompt tokens (a token per 4 bytes): 10 fit, then 100 more do not.
    small = wait_for(client, create(client, [chat_line(f"s-{n}") for n in range(10)]).id)
    assert small.status == "completed", small.errors
    big = wait_for(client, create(client, [chat_line(f"b-{n}") for n in range(100)]).id)
    assert big.status == "failed" and big.errors and big.errors.data
    assert big.errors.data[0].code == "token_limit_exceeded", big.errors

    org.admin.projects.rate_limits.update_rate_limit(
        f"rl-{CHAT_MODEL}", project_id=project_id, batch_1_day_max_input_tokens=None, max_requests_per_1_day=15
    )
    over = wait_for(client, create(client, [chat_line(f"o-{n}") for n in range(6)]).id)
    assert over.status == "failed" and over.errors and over.errors.data
    assert over.errors.data[0].code == "request_limit_exceeded", over.errors
    fits = wait_for(client, create(client, [chat_line(f"f-{n}") for n in range(5)]).id)
    assert fits.status == "completed", fits.errors
    with pytest.raises(openai.BadRequestError) as refused:
        org.admin.projects.rate_limits.update_rate_limit(
            f"rl-{CHAT_MODEL}", project_id=project_id, max_requests_per_1_minute=10
        )
    assert refused.value.body["param"] == "max_requests_per_1_minute"
    events = _audit(org, event_types=["rate_limit.updated"], project_ids=[project_id])
    assert [e.rate_limit_updated.id for e in events] == [f"rl-{CHAT_MODEL}"] * 2


def test_model_permissions_decide_which_models_a_project_batches_may_name(org):
    project_id, client = _team(org, "Team Restricted")
    everything = org.admin.projects.model_permissions.retrieve(project_id)
    assert (everything.object, everything.mode, everything.api_model_ids) == (
        "project.model_permissions",
        "deny_list",
        [],
    )

    denied = org.admin_b.projects.model_permissions.update(project_id, mode="deny_list", model_ids=[CHAT_MODEL])
    assert (denied.mode, denied.api_model_ids) == ("deny_list", [CHAT_MODEL])
    refused = wait_for(client, create(client, [chat_line(f"d-{n}") for n in range(3)]).id)
    assert refused.status == "failed" and refused.errors and refused.errors.data
    error = refused.errors.data[0]
    assert (error.code, error.param, error.line) == ("model_not_found", "body.model", 1)
    assert error.message == f"The model `{CHAT_MODEL}` does not exist or you do not have access to it."

    org.admin.projects.model_permissions.update(project_id, mode="allow_list", model_ids=[CHAT_MODEL, CHAT_MODEL])
    assert org.admin.projects.model_permissions.retrieve(project_id).api_model_ids == [CHAT_MODEL]
    allowed = wait_for(client, create(client, [chat_line(f"a-{n}") for n in range(3)]).id)
    assert allowed.status == "completed", allowed.errors

    org.admin.projects.model_permissions.update(project_id, mode="allow_list", model_ids=["another-model"])
    assert wait_for(client, create(client, [chat_line("x")]).id).status == "failed"
    deleted = org.admin.projects.model_permissions.delete(project_id)
    assert (deleted.object, deleted.deleted) == ("project.model_permissions.deleted", True)
    assert wait_for(client, create(client, [chat_line("y")]).id).status == "completed"
    events = _audit(org, event_types=["project.updated"], project_ids=[project_id])
    assert [
        (e.project_updated.changes_requested.model_extra or {}).get("model_permissions") for e in reversed(events)
    ] == [
        {"mode": "deny_list", "model_ids": [CHAT_MODEL]},
        {"mode": "allow_list", "model_ids": [CHAT_MODEL]},
        {"mode": "allow_list", "model_ids": ["another-model"]},
        None,
    ]


def _messages(params_by_id: dict[str, dict]) -> list[dict]:
    return [
        {"custom_id": custom_id, "params": {"max_tokens": 8, "messages": [{"role": "user", "content": "hi"}], **params}}
        for custom_id, params in params_by_id.items()
    ]


def test_a_message_batch_request_naming_a_model_the_project_may_not_use_errors_alone(org):
    project_id, client = _team(org, "Team Messages")
    messages = org.a.anthropic(client.api_key).messages.batches
    requests = _messages({"served": {"model": CHAT_MODEL}, "unknown": {"model": "no-such-model"}})

    def results() -> dict:
        batch = messages.create(requests=requests)
        wait_until(lambda: messages.retrieve(batch.id).processing_status == "ended", 60, "the message batch to end")
        return {r.custom_id: r.result for r in messages.results(batch.id)}

    org.admin.projects.model_permissions.update(project_id, mode="deny_list", model_ids=[CHAT_MODEL])
    refused = results()
    denied = refused["served"]
    assert denied.type == "errored" and denied.error.error.type == "not_found_error"
    assert denied.error.error.message == f"The model `{CHAT_MODEL}` does not exist or you do not have access to it."
    assert refused["unknown"].type == "errored" and "no-such-model" in refused["unknown"].error.error.message

    # The same requests once the project may use the model: that one runs, alone.
    org.admin.projects.model_permissions.update(project_id, mode="allow_list", model_ids=[CHAT_MODEL])
    allowed = results()
    assert allowed["served"].type == "succeeded" and allowed["unknown"].type == "errored"


def test_every_change_appears_once_in_the_audit_log(org):
    since = int(time.time())
    project = org.admin.projects.create(name="Audited")
    org.admin.projects.update(project.id, name="Audited twice")
    account = org.admin.projects.service_accounts.create(project.id, name="auditor")
    assert account.api_key is not None
    org.admin.projects.api_keys.delete(account.api_key.id, project_id=project.id)
    extra = org.admin.projects.service_accounts.create(project.id, name="auditor-2")
    org.admin.projects.service_accounts.delete(extra.id, project_id=project.id)
    admin_key = org.admin.admin_api_keys.create(name="audited-admin")
    org.admin.admin_api_keys.delete(admin_key.id)
    org.admin_b.projects.archive(project.id)

    mine = [e for e in _audit(org, effective_at={"gte": since}) if e.project and e.project.id == project.id]
    assert [(e.type, getattr(e, e.type.replace(".", "_")).id) for e in reversed(mine)] == [
        ("project.created", project.id),
        ("project.updated", project.id),
        ("service_account.created", account.id),
        ("api_key.created", account.api_key.id),
        ("api_key.deleted", account.api_key.id),
        ("service_account.created", extra.id),
        ("api_key.created", extra.api_key.id if extra.api_key else None),
        ("service_account.deleted", extra.id),
        ("project.archived", project.id),
    ]
    assert mine[-1].project_created is not None and mine[-1].project_created.data.title == "Audited"
    assert mine[-2].project_updated.changes_requested.title == "Audited twice"
    assert all(e.actor and e.actor.type == "api_key" and e.actor.api_key.id.startswith("key_cfg_") for e in mine)
    admin_events = _audit(org, resource_ids=[admin_key.id])
    assert [e.type for e in admin_events] == ["api_key.deleted", "api_key.created"]

    # Filters and cursors: by type, by project, by time; pages of two, forwards and back.
    archived = _audit(org, event_types=["project.archived"], project_ids=[project.id])
    assert [e.id for e in archived] == [mine[0].id]
    assert _audit(org, effective_at={"lt": since}, project_ids=[project.id]) == []
    assert _audit(org, actor_emails=["someone@example.com"]) == []
    paged = list(org.admin.audit_logs.list(project_ids=[project.id], limit=2))
    assert [e.id for e in paged] == [e.id for e in mine]
    newer = org.admin.audit_logs.list(project_ids=[project.id], limit=2, before=mine[4].id)
    assert [e.id for e in newer.data] == [mine[2].id, mine[3].id]


ADMIN_ROUTES = [
    ("POST", "/organization/projects", {"name": "x"}),
    ("GET", "/organization/projects", None),
    ("GET", "/organization/projects/proj_x", None),
    ("POST", "/organization/projects/proj_x", {"name": "y"}),
    ("POST", "/organization/projects/proj_x/archive", None),
    ("POST", "/organization/projects/proj_x/service_accounts", {"name": "z"}),
    ("GET", "/organization/projects/proj_x/service_accounts", None),
    ("GET", "/organization/projects/proj_x/service_accounts/svc_acct_1", None),
    ("DELETE", "/organization/projects/proj_x/service_accounts/svc_acct_1", None),
    ("GET", "/organization/projects/proj_x/api_keys", None),
    ("GET", "/organization/projects/proj_x/api_keys/key_1", None),
    ("DELETE", "/organization/projects/proj_x/api_keys/key_1", None),
    ("POST", "/organization/admin_api_keys", {"name": "k"}),
    ("GET", "/organization/admin_api_keys", None),
    ("GET", "/organization/admin_api_keys/key_1", None),
    ("DELETE", "/organization/admin_api_keys/key_1", None),
    ("GET", "/organization/audit_logs", None),
    ("GET", "/organization/projects/proj_x/rate_limits", None),
    ("POST", "/organization/projects/proj_x/rate_limits/rl-m", {"max_requests_per_1_day": 1}),
    ("GET", "/organization/projects/proj_x/model_permissions", None),
    ("POST", "/organization/projects/proj_x/model_permissions", {"mode": "allow_list", "model_ids": []}),
    ("DELETE", "/organization/projects/proj_x/model_permissions", None),
]


def test_non_admin_keys_get_403_on_every_admin_route(org):
    project = org.admin.projects.create(name="Not admins")
    key = org.admin.projects.service_accounts.create(project.id, name="member").api_key
    assert key is not None
    for token in (TEAM_KEY, key.value):
        for method, path, body in ADMIN_ROUTES:
            response = org.b.http.request(
                method, org.b.base_url + path, json=body, headers={"Authorization": f"Bearer {token}"}
            )
            assert response.status_code == 403, (method, path, response.text)
            assert response.json()["error"]["code"] == "insufficient_permissions"
    with pytest.raises(openai.PermissionDeniedError):
        org.a.client("unused", admin_api_key=TEAM_KEY).admin.organization.projects.list()


BAD_INPUT = [
    ("POST", "/organization/projects", {}),
    ("POST", "/organization/projects", {"name": ""}),
    ("POST", "/organization/projects", {"name": 7}),
    ("POST", "/organization/projects", "not an object"),
    ("POST", "/organization/projects", {"name": "x" * 300}),
    ("GET", "/organization/projects?limit=0", None),
    ("GET", "/organization/projects?limit=abc", None),
    ("GET", "/organization/projects?include_archived=maybe", None),
    ("GET", "/organization/projects/" + "p" * 300, None),
    ("GET", "/organization/projects/proj_nope", None),
    ("POST", "/organization/projects/proj_nope", {"name": "y"}),
    ("POST", "/organization/projects/proj_nope/archive", None),
    ("POST", "/organization/projects/proj_nope/service_accounts", {"name": "z"}),
    ("GET", "/organization/projects/proj_nope/service_accounts", None),
    ("GET", "/organization/projects/proj_nope/service_accounts/svc_acct_99999999999999999999", None),
    ("DELETE", "/organization/projects/proj_nope/service_accounts/svc_acct_x", None),
    ("GET", "/organization/projects/proj_nope/api_keys?after=garbage", None),
    ("GET", "/organization/projects/proj_nope/api_keys/key_-1", None),
    ("DELETE", "/organization/projects/proj_nope/api_keys/key_1", None),
    ("POST", "/organization/admin_api_keys", {"name": None}),
    ("GET", "/organization/admin_api_keys?order=sideways", None),
    ("GET", "/organization/admin_api_keys?after=key_", None),
    ("GET", "/organization/admin_api_keys/key_99999999999", None),
    ("GET", "/organization/admin_api_keys/%00", None),
    ("DELETE", "/organization/admin_api_keys/nope", None),
    ("GET", "/organization/audit_logs?limit=101", None),
    ("GET", "/organization/audit_logs?after=audit_log-x", None),
    ("GET", "/organization/audit_logs?before=nope", None),
    ("GET", "/organization/audit_logs?effective_at[gte]=-1", None),
    ("GET", "/organization/audit_logs?effective_at[lt]=soon", None),
    ("GET", "/organization/projects/proj_nope/rate_limits", None),
    ("GET", "/organization/projects/proj_nope/rate_limits?limit=-3", None),
    ("POST", "/organization/projects/proj_nope/rate_limits/rl-m", {"max_requests_per_1_day": 1}),
    ("POST", "/organization/projects/proj_nope/rate_limits/rl-m", {"max_requests_per_1_day": -1}),
    ("POST", "/organization/projects/proj_nope/rate_limits/rl-m", {"weight": 0}),
    ("POST", "/organization/projects/proj_nope/rate_limits/rl-m", {"batch_1_day_max_input_tokens": "lots"}),
    ("GET", "/organization/projects/proj_nope/model_permissions", None),
    ("POST", "/organization/projects/proj_nope/model_permissions", {"mode": "allow_list", "model_ids": []}),
    ("POST", "/organization/projects/proj_nope/model_permissions", {"mode": "sometimes", "model_ids": []}),
    ("POST", "/organization/projects/proj_nope/model_permissions", {"mode": "allow_list"}),
    ("POST", "/organization/projects/proj_nope/model_permissions", {"mode": "allow_list", "model_ids": [""]}),
    ("DELETE", "/organization/projects/proj_nope/model_permissions", None),
    # Postgres stores no NUL: refused before the database sees it.
    ("POST", "/organization/projects", {"name": "a\u0000b"}),
    ("GET", "/organization/projects/proj%00", None),
    ("GET", "/organization/projects?after=%00", None),
    ("GET", "/organization/audit_logs?project_ids=%00", None),
    ("POST", "/organization/projects/proj_nope/rate_limits/rl-%00", {"max_requests_per_1_day": 1}),
    ("POST", "/organization/projects/proj_nope/model_permissions", {"mode": "allow_list", "model_ids": ["\u0000"]}),
]


def test_bad_input_to_every_admin_route_gets_an_openai_error(org):
    for method, path, body in BAD_INPUT:
        response = org.a.http.request(
            method, org.a.base_url + path, json=body, headers={"Authorization": f"Bearer {ADMIN_KEY}"}
        )
        assert response.status_code in (400, 404), (method, path, response.status_code, response.text)
        error = response.json()["error"]
        assert set(error) == {"message", "type", "param", "code"} and error["type"] == "invalid_request_error"
    # Project create with the project-service-account shape the client sends for real residency
    # options: accepted (one host has one residency).
    assert org.admin.projects.create(name="Residency", geography="EU").name == "Residency"
