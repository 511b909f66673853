"""Schemathesis hooks for test_schemathesis.py (loaded through SCHEMATHESIS_HOOKS).

The documented example webhook URL is sent as the test's own receiver instead
(BATCHD_FUZZ_WEBHOOK_RECEIVER), as DNS would send it to a real one: so an endpoint the stateful
phase creates answers `POST /v1/webhook_endpoints/{endpoint_id}/test` with a 200. Only that exact
URL: a request made invalid through its URL stays invalid."""

from __future__ import annotations

import os

import schemathesis

EXAMPLE_URL = "https://example.com/webhooks/batchd"  # app/schemas/webhooks.py's example


@schemathesis.hook
def before_call(context, case, kwargs) -> None:
    receiver = os.environ.get("BATCHD_FUZZ_WEBHOOK_RECEIVER")
    if receiver and isinstance(case.body, dict) and case.body.get("url") == EXAMPLE_URL:
        case.body = {**case.body, "url": receiver}
