"""Text no request may carry in an id, a cursor, a filename or metadata: NUL (which Postgres
refuses in every text and JSON column, so it would be a 500 there and a silent miss on SQLite)
and lone surrogates (half of a UTF-16 pair: not Unicode, so no column and no file can store
them). One rule, one message, for every layer that meets such text."""

from __future__ import annotations

import re
from typing import Any

from app.core.errors import InvalidRequest

_UNCLEAN = re.compile("[\x00\ud800-\udfff]")
# In raw JSON both can only come as escapes (\u0000, \udXXX); a surrogate escape may be one half
# of a valid pair, which the decoded text then shows.
_UNCLEAN_ESCAPE = re.compile(rb"\\u(?:0000|[dD][89a-fA-F])")


def is_unclean(text: str) -> bool:
    """Whether `text` holds a NUL or a lone surrogate (a decoded pair is one character)."""
    return _UNCLEAN.search(text) is not None


def refuse(param: str) -> InvalidRequest:
    return InvalidRequest(
        f"Invalid '{param}': it contains a NUL character or an unpaired surrogate, which no value may hold.",
        param=param,
        code="invalid_value",
    )


def check_text(param: str, text: str) -> None:
    if is_unclean(text):
        raise refuse(param)


def json_may_be_unclean(raw: bytes) -> bool:
    """The cheap test before a walk: whether a JSON text escapes a NUL or a surrogate."""
    return _UNCLEAN_ESCAPE.search(raw) is not None


def check_json(value: Any, param: str | None = None) -> None:
    """Refuse `value` (decoded JSON) if any key or string in it is unclean, naming the top-level
    member that holds it (or `param`, once inside one)."""
    if isinstance(value, str):
        check_text(param or "body", value)
    elif isinstance(value, dict):
        for key, item in value.items():
            named = param or str(key)
            check_text(named, str(key))
            check_json(item, named)
    elif isinstance(value, list):
        for item in value:
            check_json(item, param or "body")
