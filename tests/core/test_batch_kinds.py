"""The table of batch kinds (app/core/batch_kinds.py): one record per API, and the rows built
from it (new_batch)."""

from __future__ import annotations

import pytest

from app.core.batch_kinds import (
    ANTHROPIC_KIND,
    BATCH_KINDS,
    FLEX_KIND,
    OPENAI_KIND,
    RESPONSE_KIND,
    UNLISTED_APIS,
    BatchApi,
    RequestLane,
    WebhookFamily,
    kind_of,
)
from app.core.config import Settings
from app.core.statuses import BatchStatus, WebhookEventType
from app.db.models import new_batch


def test_every_api_has_one_kind_found_by_its_stored_value():
    assert set(BATCH_KINDS) == set(BatchApi)
    assert all(kind.api is api for api, kind in BATCH_KINDS.items())
    assert kind_of("response") is RESPONSE_KIND  # as the column reads back: a plain string
    assert kind_of(BatchApi.ANTHROPIC) is ANTHROPIC_KIND
    with pytest.raises(ValueError):
        kind_of("background")  # neither a stored api nor a lane


def test_the_batch_apis_list_batches_and_message_batches_only():
    assert [kind.api for kind in BATCH_KINDS.values() if kind.listed_as_batch] == ["openai", "anthropic"]
    assert UNLISTED_APIS == ("response", "flex")


def test_the_single_requests_run_in_a_lane_named_as_their_stored_api():
    # One name: the stored api, the requests list's lane and the metric's label.
    lanes = {kind.api: kind.lane for kind in BATCH_KINDS.values()}
    assert lanes == {"openai": None, "anthropic": None, "response": RequestLane.RESPONSE, "flex": RequestLane.FLEX}
    assert all(kind.lane == kind.api for kind in BATCH_KINDS.values() if kind.lane is not None)
    assert [kind.api for kind in BATCH_KINDS.values() if kind.waits_for_start] == ["flex"]


def test_each_kind_fails_with_its_own_event_or_none():
    assert OPENAI_KIND.failed_event is WebhookEventType.BATCH_FAILED
    assert ANTHROPIC_KIND.failed_event is WebhookEventType.BATCH_FAILED
    assert (RESPONSE_KIND.webhooks, RESPONSE_KIND.failed_event) == (
        WebhookFamily.RESPONSE,
        WebhookEventType.RESPONSE_FAILED,
    )
    assert (FLEX_KIND.webhooks, FLEX_KIND.failed_event) == (None, None)


def test_a_message_batch_checks_its_requests_as_they_run_and_regroups_every_shard():
    checked = [kind.api for kind in BATCH_KINDS.values() if kind.lines_checked_as_they_run]
    regrouped = [kind.api for kind in BATCH_KINDS.values() if kind.regroups_shards]
    unordered = [kind.api for kind in BATCH_KINDS.values() if not kind.ordered_copy]
    assert checked == regrouped == unordered == ["anthropic"]


def test_each_kind_reads_its_own_line_limit():
    settings = Settings(max_batch_lines=7, max_message_batch_requests=9)
    assert [kind.max_lines(settings) for kind in BATCH_KINDS.values()] == [7, 9, 7, 7]


def test_new_batch_builds_a_validating_row_of_its_kind():
    batch = new_batch(
        ANTHROPIC_KIND,
        batch_id="msgbatch_1",
        project="p",
        endpoint="/v1/messages",
        input_file_id="file-1",
        completion_window="24h",
        created_at=100,
        expires_at=200,
        api_key_id=None,
        total=3,
    )
    row = (batch.id, batch.api, batch.status, batch.project, batch.total, batch.due_at, batch.expires_at)
    assert row == ("msgbatch_1", "anthropic", BatchStatus.VALIDATING, "p", 3, None, 200)
    assert batch.traceparent is None  # tracing is off in the suite
