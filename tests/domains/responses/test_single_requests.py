"""`GET /v1/queue/requests` (batchd's own: the dashboard's Requests page) through the official
`openai` client's `get`, on the app in process with the fake engine (tests/support/fake_engine.py):
the project's background responses and flex requests, newest first, with lane, status, latency
and tokens; paginated as every list is; another project's are not there."""

from __future__ import annotations

import openai
import pytest

from harness.poll import wait_until
from tests.support.batches import CHAT_MODEL

HI = [{"role": "user", "content": "hi"}]
ENDED = ("completed", "failed", "cancelled", "incomplete")


def _page(client: openai.OpenAI, **params) -> dict:
    return client.get("/queue/requests", cast_to=dict, options={"params": params})


def _listed(client: openai.OpenAI) -> dict[str, dict]:
    return {item["id"]: item for item in _page(client, limit=100)["data"]}


def _ended(client: openai.OpenAI, response_id: str) -> None:
    wait_until(
        lambda: client.responses.retrieve(response_id).status in ENDED,
        timeout=30,
        what=f"response {response_id} to end",
        interval=0.1,
    )


def test_background_and_flex_requests_are_listed_newest_first_with_lane_status_and_tokens(fake_server):
    client, engines = fake_server.client("key-a"), fake_server.engines
    done = client.responses.create(model=CHAT_MODEL, input="hello there", background=True)
    refused = client.responses.create(model=CHAT_MODEL, input="fake:fail", background=True)
    for response_id in (done.id, refused.id):
        _ended(client, response_id)
    client.chat.completions.create(model=CHAT_MODEL, messages=HI, service_tier="flex")
    stalled = client.responses.create(model=CHAT_MODEL, input="fake:stall", background=True)
    running = wait_until(
        lambda: (item := _listed(client).get(stalled.id)) and item["status"] == "in_progress" and item,
        what="the stalled response listed in_progress",
        interval=0.1,
    )
    assert (running["lane"], running["ended_at"], running["seconds"]) == ("response", None, None)
    client.responses.cancel(stalled.id)
    wait_until(lambda: _listed(client)[stalled.id]["ended_at"] is not None, what="the cancelled response to end")

    items = _page(client, limit=100)["data"]
    assert [i["lane"] for i in items] == ["response", "flex", "response", "response"]
    cancelled, flex, failed, completed = items
    assert [i["id"] for i in (cancelled, failed, completed)] == [stalled.id, refused.id, done.id]
    assert flex["id"].startswith("flex_") and flex["endpoint"] == "/v1/chat/completions"
    assert [i["status"] for i in items] == ["cancelled", "completed", "failed", "completed"]
    assert {i["object"] for i in items} == {"queue.request"} and {i["model"] for i in items} == {CHAT_MODEL}
    for item in items:
        assert item["ended_at"] >= item["created_at"] and item["seconds"] == item["ended_at"] - item["created_at"]
    for item in (flex, completed):  # the fake engine answers two tokens
        usage = item["usage"]
        assert usage["output_tokens"] == 2 and usage["input_tokens"] > 0
        assert usage["total_tokens"] == usage["input_tokens"] + 2
    retrieved = client.responses.retrieve(done.id).usage
    assert (completed["usage"]["input_tokens"], completed["usage"]["output_tokens"]) == (
        retrieved.input_tokens,
        retrieved.output_tokens,
    )
    assert engines.in_flight == 0
    # Still not a batch: /v1/batches leaves single requests out.
    assert not {i["id"] for i in items} & {b.id for b in client.batches.list(limit=100)}


def test_pages_follow_the_cursor_and_another_project_sees_only_its_own(fake_server):
    a, b = fake_server.client("key-a"), fake_server.client("key-b")
    mine = [a.responses.create(model=CHAT_MODEL, input=f"page {n}", background=True).id for n in range(3)]
    theirs = b.responses.create(model=CHAT_MODEL, input="theirs", background=True).id
    for response_id in mine:
        _ended(a, response_id)
    _ended(b, theirs)

    first = _page(a, limit=2)
    assert [i["id"] for i in first["data"]] == mine[::-1][:2] and first["has_more"] is True
    assert (first["object"], first["first_id"], first["last_id"]) == ("list", mine[2], mine[1])
    rest, seen = first, [i["id"] for i in first["data"]]
    while rest["has_more"]:
        rest = _page(a, limit=2, after=rest["last_id"])
        assert rest["data"], "never an empty page with has_more"
        seen += [i["id"] for i in rest["data"]]
    assert seen[:3] == mine[::-1] and len(seen) == len(set(seen)) and theirs not in seen

    assert [i["id"] for i in _page(b, limit=100)["data"]] == [theirs]
    # Another project's id is no cursor here: OpenAI's 404 envelope, naming `after`.
    with pytest.raises(openai.NotFoundError) as caught:
        _page(b, after=mine[0])
    error = caught.value.response.json()["error"]
    assert (error["type"], error["param"]) == ("invalid_request_error", "after")
    assert error["message"] == f"No such single request: {mine[0]}"


def test_a_deleted_background_response_leaves_the_list(fake_server):
    client = fake_server.client("key-a")
    created = client.responses.create(model=CHAT_MODEL, input="to delete", background=True)
    _ended(client, created.id)
    assert created.id in _listed(client)
    client.responses.delete(created.id)
    assert created.id not in _listed(client)


@pytest.mark.parametrize("limit", [0, 101])
def test_a_limit_out_of_bounds_is_a_400(fake_client, limit):
    with pytest.raises(openai.BadRequestError) as caught:
        _page(fake_client, limit=limit)
    assert caught.value.response.json()["error"]["param"] == "limit"


def test_an_incomplete_response_is_listed_incomplete_as_its_retrieve_says(fake_client):
    created = fake_client.responses.create(model=CHAT_MODEL, input="fake:incomplete", background=True)
    _ended(fake_client, created.id)
    assert fake_client.responses.retrieve(created.id).status == "incomplete"
    assert _listed(fake_client)[created.id]["status"] == "incomplete"
