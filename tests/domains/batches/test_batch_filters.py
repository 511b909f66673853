"""`GET /v1/batches` filters (batchd's, beside OpenAI's `after`/`limit`), as the official client
sends them (`extra_query`). Each test tags its batches with its own `metadata[suite]`, so the
other filters are checked ANDed with it on a shared server (batches there fail validation with
model_not_found, which still records their model)."""

from __future__ import annotations

import uuid

import openai
import pytest

from tests.support.batches import TERMINAL, chat_line, create, embedding_line, upload, wait_for


def _ids(client: openai.OpenAI, **query) -> list[str]:
    """Every id the filtered list yields, all pages (the client follows `after` itself)."""
    return [b.id for b in client.batches.list(limit=2, extra_query=query)]


@pytest.fixture
def suite() -> str:
    return uuid.uuid4().hex


@pytest.fixture
def three(client, suite):
    """A chat batch of model-x (team a), one of model-y (team b), an embeddings one of model-x
    (team a, and a key no JSON path could name unquoted): oldest first, all ended (failed)."""
    chat_x = create(client, [chat_line("1", model="model-x")], metadata={"suite": suite, "team": "a", "run": "1"})
    chat_y = create(client, [chat_line("1", model="model-y")], metadata={"suite": suite, "team": "b"})
    line = embedding_line("1") | {"body": {"model": "model-x", "input": "x"}}
    embed_x = create(client, [line], endpoint="/v1/embeddings", metadata={"suite": suite, "team": "a", 'od.d"k': "v"})
    return [wait_for(client, b.id, TERMINAL, timeout=30) for b in (chat_x, chat_y, embed_x)]


def test_status_filter_one_several_repeated_and_unknown(client, server, suite, three):
    ids = [b.id for b in reversed(three)]
    assert [b.status for b in three] == ["failed"] * 3
    assert _ids(client, status="failed", **{"metadata[suite]": suite}) == ids
    assert _ids(client, status="completed", **{"metadata[suite]": suite}) == []
    assert _ids(client, status="completed,failed", **{"metadata[suite]": suite}) == ids
    repeated = server.http.get(
        f"{server.base_url}/batches",
        headers={"Authorization": "Bearer key-a"},
        params=[("status", "completed"), ("status", "failed"), ("metadata[suite]", suite)],
    )
    assert [b["id"] for b in repeated.json()["data"]] == ids
    assert _ids(client, status="in_progress", **{"metadata[suite]": suite}) == []
    with pytest.raises(openai.BadRequestError) as info:
        client.batches.list(extra_query={"status": "failed,done"})
    assert (info.value.code, info.value.param) == ("invalid_value", "status")
    assert info.value.body["message"].startswith("Invalid value for 'status': 'done'. Supported values are:")


def test_metadata_filters_are_exact_and_anded(client, suite, three):
    chat_x, chat_y, embed_x = three
    assert _ids(client, **{"metadata[suite]": suite, "metadata[team]": "a"}) == [embed_x.id, chat_x.id]
    assert _ids(client, **{"metadata[suite]": suite, "metadata[team]": "a", "metadata[run]": "1"}) == [chat_x.id]
    assert _ids(client, **{"metadata[suite]": suite, 'metadata[od.d"k]': "v"}) == [embed_x.id]
    assert _ids(client, **{"metadata[suite]": suite, "metadata[team]": "A"}) == []
    assert _ids(client, **{"metadata[suite]": suite[:-1]}) == []
    # The client's nested form: `extra_query={"metadata": {...}}` sends metadata[team]=b.
    assert [b.id for b in client.batches.list(extra_query={"metadata": {"suite": suite, "team": "b"}})] == [chat_y.id]
    with pytest.raises(openai.BadRequestError) as info:
        client.batches.list(extra_query={"metadata": "team"})
    assert info.value.param == "metadata"


def test_endpoint_model_and_time_filters(client, suite, three):
    chat_x, chat_y, embed_x = three
    assert [b.model for b in three] == ["model-x", "model-y", "model-x"]
    tag = {"metadata[suite]": suite}
    assert _ids(client, endpoint="/v1/embeddings", **tag) == [embed_x.id]
    assert _ids(client, endpoint="/chat/completions", **tag) == [chat_y.id, chat_x.id]  # Azure's spelling
    assert _ids(client, model="model-x", **tag) == [embed_x.id, chat_x.id]
    assert _ids(client, model="model-y", endpoint="/v1/embeddings", **tag) == []
    first, last = three[0].created_at, three[-1].created_at
    newest_first = [embed_x.id, chat_y.id, chat_x.id]
    assert _ids(client, created_after=first, created_before=last + 1, **tag) == newest_first
    assert _ids(client, created_after=last + 1, **tag) == []
    assert _ids(client, created_before=first, **tag) == []  # created_before is exclusive
    for name in ("created_after", "created_before"):
        with pytest.raises(openai.BadRequestError) as info:
            client.batches.list(extra_query={name: "yesterday"})
        assert (info.value.param, info.value.code) == (name, "invalid_type")


def test_filtered_pages_keep_cursor_and_has_more_right(client, suite):
    """Matches interleaved with non-matches, an older non-match last: every page is full until
    the last, which says no more follow."""
    file = upload(client, [chat_line("1")])

    def make(team: str) -> str:
        return client.batches.create(
            input_file_id=file.id,
            endpoint="/v1/chat/completions",
            completion_window="24h",
            metadata={"suite": suite, "team": team},
        ).id

    oldest_other = make("q")
    # No metadata at all (a JSON null): never matches, never an error.
    client.batches.create(input_file_id=file.id, endpoint="/v1/chat/completions", completion_window="24h")
    pairs = [(make("p"), make("q")) for _ in range(5)]
    wanted = [p for p, _ in reversed(pairs)]
    tag = {"metadata[suite]": suite, "metadata[team]": "p"}
    assert _ids(client, **tag) == wanted
    first = client.batches.list(limit=2, extra_query=tag)
    assert [b.id for b in first.data] == wanted[:2] and first.has_more
    last = client.batches.list(limit=2, after=wanted[3], extra_query=tag)
    assert [b.id for b in last.data] == wanted[4:] and last.has_more is False
    # A cursor that the filter leaves out still keeps the place.
    after_other = client.batches.list(limit=2, after=pairs[2][1], extra_query=tag)
    assert [b.id for b in after_other.data] == [pairs[2][0], pairs[1][0]] and after_other.has_more
    assert oldest_other not in _ids(client, **tag)
    assert len(_ids(client, **{"metadata[suite]": suite})) == 11
