"""A Message Batch create body (up to BATCHD_MAX_MESSAGE_BATCH_BYTES, 256 MiB) parsed one request
at a time, to be run in a thread beside the event loop.

A thread alone would not do: one `orjson.loads` of such a body is a single C call that holds the
GIL for seconds (1.8 s for 200 MB here), and the event loop (lease heartbeats, /health/live)
waits for the GIL as it would for the call. So every step here is many short calls, and the GIL
changes hands between them: the body comes as the server's chunks (never joined), is decoded a
few MB at a time as the parse reaches it (never one string of the whole), and parsed member by
member and request by request with the stdlib's decoder (`raw_decode` from an offset).

The value is `jsonbody.loads`'s: integers of any size exact, NaN and Infinity refused, and once
the text has escaped a surrogate (which orjson refuses unpaired and the stdlib takes) each value
is parsed again by `jsonbody.loads` from its own text. A body that is not a JSON object is
parsed by `jsonbody.loads` whole."""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from json.decoder import scanstring  # type: ignore[attr-defined]  # public, untyped in typeshed
from typing import Any

from app.core import jsonbody

REQUESTS = "requests"
# Bytes decoded in one call; the text held is about one or two of these past the parse.
PIECE = 4 * 1024 * 1024
_WHITESPACE = re.compile(r"[ \t\n\r]*")
# As app/core/input_hygiene.py's: an escaped NUL (the group) or surrogate.
_ESCAPE = re.compile(r"\\u(?:(0000)|[dD][89a-fA-F])")
_LONGEST_ESCAPE = 6
_NUMBER_TAIL = 8


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant)


@dataclass
class Body:
    value: Any
    # Whether the text escapes a NUL or a surrogate (input_hygiene's cheap test before its walk).
    may_be_unclean: bool


def loads(chunks: Iterable[bytes]) -> Body:
    """The body of these chunks parsed as `jsonbody.loads` parses it, the `requests` list one
    request at a time. Raises ValueError on a body that is not JSON."""
    parser = _Parser(_decoded(chunks))
    if parser.peek() != "{":
        value = jsonbody.loads(parser.rest())
        return Body(value, parser.nul or parser.surrogate)
    value = parser.object()
    return Body(value, parser.nul or parser.surrogate)


def _decoded(chunks: Iterable[bytes]) -> Iterator[str]:
    decoder = codecs.getincrementaldecoder("utf-8")()
    try:
        for chunk in chunks:
            view = memoryview(chunk)
            for at in range(0, len(view), PIECE):
                yield decoder.decode(view[at : at + PIECE])
        yield decoder.decode(b"", final=True)
    except UnicodeDecodeError as exc:
        raise ValueError(str(exc)) from None


class _Parser:
    """The text decoded so far past what is parsed (`text[at:]`), and what its escapes held."""

    def __init__(self, pieces: Iterator[str]) -> None:
        self.pieces = pieces
        self.text = ""
        self.at = 0
        self.ended = False
        self.nul = self.surrogate = False

    def _extend(self, least: int) -> bool:
        """At least `least` more characters (fewer at the body's end); False at its end."""
        added: list[str] = []
        while not self.ended and sum(map(len, added)) < least:
            piece = next(self.pieces, None)
            if piece is None:
                self.ended = True
            elif piece:
                added.append(piece)
        if not added:
            return False  # the text as it was: a caller's offsets into it still hold
        if self.at > PIECE:  # what is parsed goes, so the text stays a piece or two long
            self.text, self.at = self.text[self.at :], 0
        # Escapes are looked for in the new text and the tail before it (one may straddle the two).
        scan_from = max(0, len(self.text) - _LONGEST_ESCAPE)
        self.text += "".join(added)
        for match in _ESCAPE.finditer(self.text, scan_from):
            if match.group(1) is None:
                self.surrogate = True
            else:
                self.nul = True
        return True

    def rest(self) -> str:
        while self._extend(PIECE):
            pass
        return self.text[self.at :]

    def peek(self) -> str:
        """The next character past whitespace ("" at the body's end)."""
        while True:
            match = _WHITESPACE.match(self.text, self.at)
            assert match is not None, "the pattern matches the empty string"
            self.at = match.end()
            if self.at < len(self.text) or not self._extend(1):
                return self.text[self.at : self.at + 1]

    def take(self, char: str) -> None:
        if self.peek() != char:
            raise ValueError(f"Expecting {char!r}")
        self.at += 1

    def _decode(self, decode: Callable[[str, int], tuple[Any, int]]) -> tuple[Any, int, int]:
        """What `decode(text, at)` reads, with the text made longer while it may run past the
        end of what is decoded; the value and its span."""
        while True:
            try:
                value, end = decode(self.text, self.at)
            except ValueError:  # perhaps only cut short: try again on more text (twice as much)
                if self._extend(max(PIECE, len(self.text) - self.at)):
                    continue
                raise
            # A number may go on past the text's end (`1` of `12`, `1` of `1.5`, whose `1.` alone is no number).
            if len(self.text) - end < _NUMBER_TAIL and self._extend(_NUMBER_TAIL):
                continue
            start, self.at = self.at, end
            return value, start, end

    def value(self) -> Any:
        self.peek()
        value, start, end = self._decode(_DECODER.raw_decode)
        if self.surrogate:  # orjson's rules for surrogates, on this value's own text
            return jsonbody.loads(self.text[start:end])
        return value

    def object(self) -> dict[str, Any]:
        self.take("{")
        body: dict[str, Any] = {}
        if self.peek() == "}":
            self.at += 1
        else:
            while True:
                if self.peek() != '"':
                    raise ValueError("Expecting a property name")
                key, _, _ = self._decode(lambda text, at: scanstring(text, at + 1))
                self.take(":")
                if key == REQUESTS and self.peek() == "[":
                    body[key] = self.array()
                else:
                    body[key] = self.value()
                if not self.more("}"):
                    break
        if self.peek() != "":
            raise ValueError("Extra data")
        return body

    def array(self) -> list[Any]:
        self.take("[")
        items: list[Any] = []
        if self.peek() == "]":
            self.at += 1
            return items
        while True:
            items.append(self.value())
            if not self.more("]"):
                return items

    def more(self, close: str) -> bool:
        """Past the `,` before another member (True) or the `close` that ends them (False)."""
        char = self.peek()
        if char not in (",", close):
            raise ValueError(f"Expecting ',' or {close!r}")
        self.at += 1
        return char == ","
