"""The kinds of batch: one record per API a batch can be made through, saying everything the
worker and the listings decide by it. They all run on the same scheduler; the code reads a
batch's kind (`kind_of(batch.api)`) instead of testing its `api` string.

Not in app/core/statuses.py: these values are not statuses ("response" and "flex" are also
request fields and objects), and that module's values are hunted as raw strings."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from app.core.statuses import WebhookEventType

if TYPE_CHECKING:
    from app.core.config import Settings


class BatchApi(StrEnum):
    """Which API a batch was made through: its stored `batches.api` value."""

    OPENAI = "openai"  # POST /v1/batches
    ANTHROPIC = "anthropic"  # POST /v1/messages/batches
    RESPONSE = "response"  # POST /v1/responses with `background: true`: a one-line batch
    FLEX = "flex"  # `service_tier: "flex"` on a synchronous route: a one-line batch the call waits for


class RequestLane(StrEnum):
    """The short-deadline lane a single request runs in, one name everywhere: its kind's stored
    `api` value, the requests list's `lane` (`GET /v1/queue/requests`, the dashboard's Requests
    page) and the `lane` label of `batchd_single_request_seconds`."""

    RESPONSE = "response"  # a background response (BatchApi.RESPONSE)
    FLEX = "flex"  # a flex request (BatchApi.FLEX)


class WebhookFamily(StrEnum):
    """Which webhook events a kind's batches send when they end."""

    BATCH = "batch"  # batch.completed | failed | cancelled | expired
    RESPONSE = "response"  # response.completed | failed | cancelled | incomplete (read from its result)


@dataclass(frozen=True)
class BatchKind:
    """What a kind of batch is told apart by; the defaults are an OpenAI batch's."""

    api: BatchApi
    # Shown by the batch APIs (`GET /v1/batches`, and a Message Batch by Anthropic's routes too);
    # a single request only by its own route and the requests list.
    listed_as_batch: bool = True
    # Its lines are checked one by one as they run (a request that cannot run fails alone), not
    # refused together at validation.
    lines_checked_as_they_run: bool = False
    # The setting that caps how many lines its input may hold.
    max_lines_setting: str = "max_batch_lines"
    # Validation may write its lines in prompt-prefix order for its shards to run from (its
    # results need not follow the input's order).
    ordered_copy: bool = True
    # Every shard groups its lines by prompt prefix as it reads them, however many shards (an
    # input with an ordered copy, or of more than one shard, is not worth it otherwise).
    regroups_shards: bool = False
    # The events its endings send; None: none (a flex call's caller has its answer).
    webhooks: WebhookFamily | None = WebhookFamily.BATCH
    # Its short-deadline lane (it never preempts a busy engine; its latency is
    # `batchd_single_request_seconds{lane}`); None: the batch queue's.
    lane: RequestLane | None = None
    # Its line fails if no engine starts it within `flex_wait_seconds` of its creation.
    waits_for_start: bool = False

    @property
    def failed_event(self) -> WebhookEventType | None:
        """The event of a batch of this kind that fails (refused at validation, or dead-lettered)."""
        if self.webhooks is WebhookFamily.BATCH:
            return WebhookEventType.BATCH_FAILED
        if self.webhooks is WebhookFamily.RESPONSE:
            return WebhookEventType.RESPONSE_FAILED
        return None

    def max_lines(self, settings: Settings) -> int:
        return int(getattr(settings, self.max_lines_setting))


OPENAI_KIND = BatchKind(BatchApi.OPENAI)
ANTHROPIC_KIND = BatchKind(
    BatchApi.ANTHROPIC,
    lines_checked_as_they_run=True,
    max_lines_setting="max_message_batch_requests",
    ordered_copy=False,  # its results keep the input's order
    regroups_shards=True,
)
RESPONSE_KIND = BatchKind(
    BatchApi.RESPONSE,
    listed_as_batch=False,
    webhooks=WebhookFamily.RESPONSE,
    lane=RequestLane.RESPONSE,
)
FLEX_KIND = BatchKind(
    BatchApi.FLEX,
    listed_as_batch=False,
    webhooks=None,
    lane=RequestLane.FLEX,
    waits_for_start=True,
)

BATCH_KINDS: dict[BatchApi, BatchKind] = {
    kind.api: kind for kind in (OPENAI_KIND, ANTHROPIC_KIND, RESPONSE_KIND, FLEX_KIND)
}


def kind_of(api: str) -> BatchKind:
    """The kind of a batch whose `api` is this."""
    return BATCH_KINDS[BatchApi(api)]


# The stored `api` values of the kinds that the batch APIs do not list (the single requests).
UNLISTED_APIS = tuple(kind.api for kind in BATCH_KINDS.values() if not kind.listed_as_batch)
