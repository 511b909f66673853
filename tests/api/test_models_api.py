"""`GET /v1/models` and `GET /v1/models/{id}` through the official client, with batchd's engine
fields (engine state, lines in flight) that the dashboard's models page shows."""

from __future__ import annotations

import openai
import pytest

from harness.poll import wait_until
from tests.support.batches import CHAT_MODEL, EMBED_MODEL, cancel_in_cleanup, chat_line, create, wait_for


def test_models_carry_engine_state_and_load(model_client):
    models = {m.id: m for m in model_client.models.list()}
    assert set(models) == {CHAT_MODEL, EMBED_MODEL}
    for model in models.values():
        extra = model.model_dump()
        assert extra["engine_state"] == "ready"
        assert extra["lines_in_flight"] >= 0 and extra["lines_waiting"] >= 0 and extra["max_lines_in_flight"] >= 1
    one = model_client.models.retrieve(CHAT_MODEL)
    assert (one.id, one.object, one.owned_by) == (CHAT_MODEL, "model", "batchd")


def test_lines_in_flight_are_counted_while_a_batch_runs(model_client):
    batch = create(model_client, [chat_line(f"m-{i}", max_tokens=48) for i in range(400)])
    try:
        seen = wait_for(model_client, batch.id, until=lambda b: _in_flight(model_client) > 0, timeout=120)
        assert seen.status not in ("completed", "failed"), "the batch ended before any line was seen in flight"
    finally:
        cancel_in_cleanup(model_client, batch.id)
    wait_until(lambda: _in_flight(model_client) == 0, 10, "the slots released after the batch was cancelled")


def _in_flight(client) -> int:
    return client.models.retrieve(CHAT_MODEL).model_dump()["lines_in_flight"]


# Two tests, not one taking both clients: `client` runs on three backends, and a model server
# on the third (Postgres with local blobs) would boot engines for one assertion.
def test_unknown_model_is_404(model_client):
    _assert_unknown_model_is_404(model_client)


def test_unknown_model_is_404_without_models(client):
    _assert_unknown_model_is_404(client)


def _assert_unknown_model_is_404(client) -> None:
    with pytest.raises(openai.NotFoundError) as exc:
        client.models.retrieve("no-such-model")
    assert exc.value.body["code"] == "model_not_found"


def test_server_without_models_lists_none(client):
    assert client.models.list().data == []
