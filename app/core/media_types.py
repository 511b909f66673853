"""What a request body is, by its Content-Type, parsed rather than spelled: one answer for every
layer that asks (the body limit, the input-hygiene guard, the idempotency fingerprint), and the
same one FastAPI gives when it decides whether to parse a body as JSON (`application/json` or
any `application/*+json`, type and subtype in any case, any parameters): whatever FastAPI parses
as JSON, the guards see as JSON too."""

from __future__ import annotations

import re

# The routes whose bodies are multipart file uploads, read as a stream by their services; every
# other route's body is JSON.
_UPLOAD_ROUTE = re.compile(r"/v1/(files|uploads/[^/]+/parts)/?")


def media_type(content_type: str) -> str:
    """`type/subtype` of a Content-Type value, lower-cased, its parameters dropped."""
    return content_type.split(";", 1)[0].strip().lower()


def is_json(content_type: str) -> bool:
    # FastAPI reads the value with email.message: the part before `;`, stripped and lower-cased;
    # anything but one `/` is text/plain there (so not JSON). Here a second `/` in a `+json`
    # subtype still counts: a superset is safe (the guards look at a body FastAPI leaves as bytes).
    main, slash, subtype = media_type(content_type).partition("/")
    return main == "application" and slash == "/" and (subtype == "json" or subtype.endswith("+json"))


def takes_multipart(method: str, path: str) -> bool:
    return method == "POST" and _UPLOAD_ROUTE.fullmatch(path) is not None
