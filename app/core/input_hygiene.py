"""Text no request may carry in an id, a cursor, a filename or metadata: NUL (which Postgres
refuses in every text and JSON column, so it would be a 500 there and a silent miss on SQLite)
and lone surrogates (half of a UTF-16 pair: not Unicode, so no column and no file can store
them). One rule, one message, for every layer that meets such text."""

from __future__ import annotations

import json
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
    member that holds it (or `param`, once inside one). A walk with a stack of its own, not
    recursion: a value as deep as the parser allows is no RecursionError here."""
    pending: list[tuple[Any, str | None]] = [(value, param)]
    while pending:
        item, named = pending.pop()
        if isinstance(item, str):
            check_text(named or "body", item)
        elif isinstance(item, dict):
            members = []
            for key, member in item.items():
                inner = named or str(key)
                check_text(inner, str(key))
                members.append((member, inner))
            pending.extend(reversed(members))  # in document order: the first unclean is named
        elif isinstance(item, list):
            pending.extend((member, named or "body") for member in reversed(item))


def too_deep() -> InvalidRequest:
    return InvalidRequest("The request body is not valid JSON: it is nested too deeply.", param="body")


def check_json_body(raw: bytes) -> None:
    """Refuse a JSON request body holding unclean text (or nested too deeply to parse, where it
    might). A body that is not JSON passes: the route's own parse refuses it. Parsed by the
    stdlib as FastAPI parses it (orjson would refuse a lone surrogate FastAPI takes)."""
    if not json_may_be_unclean(raw):
        return
    try:
        body = json.loads(raw)
    except ValueError:
        return
    except RecursionError:
        raise too_deep() from None
    check_json(body)
