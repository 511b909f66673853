"""Schemathesis hooks for test_schemathesis.py (loaded through SCHEMATHESIS_HOOKS).

The documented example webhook URL is sent as the test's own receiver instead
(BATCHD_FUZZ_WEBHOOK_RECEIVER), as DNS would send it to a real one: so an endpoint the stateful
phase creates answers `POST /v1/webhook_endpoints/{endpoint_id}/test` with a 200. Only that exact
URL: a request made invalid through its URL stays invalid.

A valid `Idempotency-Key` it generates is sent as a fresh random one: Schemathesis draws few
distinct keys ("0" again and again) for unrelated requests, and a repeat rightly gets the first
response back (a webhook endpoint deleted since), which its stateful checks take for a bug. An
invalid key is sent as generated: its 400 is still checked. Keys are tested in
tests/http/test_idempotency.py."""

from __future__ import annotations

import os
import re
import uuid

import schemathesis

EXAMPLE_URL = "https://example.com/webhooks/batchd"  # app/domains/webhooks/schemas.py's example
VALID_KEY = re.compile(r"[!-~]([ -~]{0,253}[!-~])?")  # app/http/openapi.py IDEMPOTENCY_KEY


@schemathesis.hook
def before_call(context, case, kwargs) -> None:
    receiver = os.environ.get("BATCHD_FUZZ_WEBHOOK_RECEIVER")
    if receiver and isinstance(case.body, dict) and case.body.get("url") == EXAMPLE_URL:
        case.body = {**case.body, "url": receiver}
    headers = case.headers or {}
    for name, value in headers.items():
        if name.lower() == "idempotency-key" and isinstance(value, str) and VALID_KEY.fullmatch(value):
            headers[name] = uuid.uuid4().hex
