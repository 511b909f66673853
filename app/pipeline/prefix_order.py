"""A whole batch's line order by shared prompt prefix, decided once over every line.

vLLM's prefix cache keeps a shared prefix (a document many questions are asked about) only while
it is in recent use, so the lines that share one should run together. Ordering inside a bounded
buffer (app/pipeline/ordering.py) stops at the buffer, and a server shard is such a buffer: a
document whose questions are spread over the file is prefilled once per shard. Here every line
gets a compact sort key while the input is read, the keys (not the lines) are sorted, and the
lines are copied out in that order, so a shard cut from the copy holds whole prefix groups.

The key is a hierarchy of 16-bit hashes: of every message before the last (a shared system
prompt, or the document itself), then of the last message's (or a completion prompt's) first 64,
512 and 4096 bytes. Lines sharing their earlier messages, and then a prefix of the last one at
least one of those lengths long, share the key's leading bits and sort next to each other; ties
keep the input's order. A prefix group that starts and ends between two levels of one message
(a 5 KB shared preamble, then 1 KB documents, in one message) is not told apart.

Memory is 32 bytes a line (offset, length, key, line number, check) plus the sort's 8, never the lines:
the input is spooled to a local temporary file as it streams past and the copy is read back
from there.
"""

from __future__ import annotations

import mmap
import tempfile
import zlib
from array import array
from collections.abc import AsyncIterator, Generator
from pathlib import Path
from typing import BinaryIO

import numpy as np

from app.pipeline.lines import InputLine, parse_input_line

PREFIX_LEVELS = (64, 512, 4096)
LEVEL_BITS = 16
_LEVEL_MASK = (1 << LEVEL_BITS) - 1
# Endpoints whose lines have a prompt the engine can keep a prefix of.
PREFIX_ENDPOINTS = frozenset({"/v1/chat/completions", "/v1/completions"})


def prompt_text(body: dict) -> str:
    """The text a line's prompt starts with, in the order the model sees it."""
    messages = body.get("messages")
    if isinstance(messages, list):
        return "".join(_message_text(message) for message in messages)
    for key in ("prompt", "input"):
        value = body.get(key)
        if isinstance(value, str):
            return value
        if isinstance(value, list) and value and isinstance(value[0], str):
            return value[0]
    return ""


def _message_text(message: object) -> str:
    if not isinstance(message, dict):
        return "\x00\x00"
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return f"{message.get('role', '')}\x00{content or ''}\x00"


def _prompt_parts(body: dict) -> tuple[str, str]:
    """(every message but the last, the last one), as the model reads them; ("", prompt) else."""
    messages = body.get("messages")
    if isinstance(messages, list) and messages:
        head = "".join(_message_text(message) for message in messages[:-1]) if len(messages) > 1 else ""
        return head, _message_text(messages[-1])
    return "", prompt_text(body)


def _crc16(data: bytes | memoryview) -> int:
    return zlib.crc32(data) & _LEVEL_MASK


def key_and_size(body: dict) -> tuple[int, int]:
    """The line's sort key (a CRC of the messages before the last, then of each prefix level of
    the last one, the shortest in the leading bits; a CRC, not Python's per-process str hash, so
    an order can be reproduced) and its prompt's size in bytes."""
    key, _, size = _key_check_size(body)
    return key, size


def _key_check_size(body: dict) -> tuple[int, int, int]:
    """key_and_size's key and size, and the upper halves of the head's and the first level's
    CRCs (the key holds their lower 16 bits): with the key's leading 32 bits, a 64-bit print of
    the line's first prefix group, which 16-bit levels alone cannot tell apart among thousands."""
    head, last = _prompt_parts(body)
    head_bytes, last_bytes = head.encode(), last.encode()
    head_crc = zlib.crc32(head_bytes)
    key = head_crc & _LEVEL_MASK
    text = memoryview(last_bytes)
    first_crc = crc = 0
    for n, length in enumerate(PREFIX_LEVELS):
        if n == 0 or len(text) > PREFIX_LEVELS[n - 1]:  # else this level is the one before's text
            crc = zlib.crc32(text[:length])
        if n == 0:
            first_crc = crc
        key = (key << LEVEL_BITS) | (crc & _LEVEL_MASK)
    check = (head_crc >> LEVEL_BITS) << LEVEL_BITS | (first_crc >> LEVEL_BITS)
    return key, check, len(head_bytes) + len(last_bytes)


def prefix_key(body: dict) -> int:
    return key_and_size(body)[0]


class PrefixOrder:
    """Collects (offset, length, key) for every request line of an input while its bytes are
    spooled to a temporary file (`spool` the whole input, or `append` the lines one by one);
    `lines()` then yields them in key order."""

    def __init__(self, spool_dir: Path | None = None) -> None:
        self._spool: BinaryIO = tempfile.TemporaryFile(dir=spool_dir, prefix="batchd-order-")
        self.offsets = array("Q")
        self.lengths = array("I")
        self.keys = array("Q")
        self.checks = array("I")  # see shares_prefixes
        self.line_nos = array("Q")
        self._spooled = 0
        # Why the spool failed (a full disk): the lines cannot be read back in order.
        self.spool_error: OSError | None = None

    def spool(self, chunk: bytes) -> None:
        """The input's next bytes: `add` then names lines by their offset in it."""
        if self.spool_error is not None:
            return
        try:
            self._spool.write(chunk)
        except OSError as exc:
            self.spool_error = exc
        self._spooled += len(chunk)

    def add(self, offset: int, length: int, body: dict, line_no: int = 0) -> None:
        self.offsets.append(offset)
        self.lengths.append(length)
        key, check, _ = _key_check_size(body)
        self.keys.append(key)
        self.checks.append(check)
        self.line_nos.append(line_no)

    def append(self, raw: bytes, body: dict, line_no: int) -> None:
        """One line (without its newline), spooled and placed."""
        offset = self._spooled
        self.spool(raw + b"\n")
        self.add(offset, len(raw), body, line_no)

    def __len__(self) -> int:
        return len(self.keys)

    def order(self) -> np.ndarray:
        """Positions of the lines in key order; equal keys keep their input order."""
        return np.argsort(np.frombuffer(self.keys, dtype=np.uint64), kind="stable")

    def shares_prefixes(self) -> bool:
        """Whether any two lines share a prompt prefix the order would put together: the same
        earlier messages (when there are any), or the same first PREFIX_LEVELS[0] bytes of the
        last one (by 64-bit prints: CRCs of both, so two lines that share none look alike about
        once in 2**64 pairs). Lines that share none run as well in any order: no ordered copy.
        (Earlier messages whose CRC is 0, as none have, count as none: at worst no copy.)"""
        keys = np.frombuffer(self.keys, dtype=np.uint64)
        if keys.size < 2:
            return False
        checks = np.frombuffer(self.checks, dtype=np.uint32).astype(np.uint64)
        lower = keys >> np.uint64(2 * LEVEL_BITS)  # the head's and the first level's lower 16 bits
        head_bits = np.uint64(LEVEL_BITS)
        heads = ((checks >> head_bits) << head_bits) | (lower >> head_bits)  # the head's CRC
        first = np.sort(
            (heads << np.uint64(32))
            | ((checks & np.uint64(_LEVEL_MASK)) << head_bits)
            | (lower & np.uint64(_LEVEL_MASK))
        )
        if bool(np.any(first[1:] == first[:-1])):
            return True
        heads = np.sort(heads[heads != 0])
        return bool(np.any(heads[1:] == heads[:-1]))

    def lines(self) -> Generator[tuple[int, bytes], None, None]:
        """(line number given to `add`, line without its newline) in key order."""
        if self.spool_error is not None:
            raise self.spool_error
        self._spool.flush()
        if not self.keys:
            return
        with mmap.mmap(self._spool.fileno(), 0, access=mmap.ACCESS_READ) as view:
            for i in self.order().tolist():
                start = self.offsets[i]
                yield self.line_nos[i], view[start : start + self.lengths[i]]

    def close(self) -> None:
        self._spool.close()


async def in_prefix_order(
    lines: AsyncIterator[tuple[bytes, InputLine]], spool_dir: Path | None = None
) -> AsyncIterator[InputLine]:
    """Every line of `lines` (raw bytes and parsed), read to the end first, then in prefix order."""
    order = PrefixOrder(spool_dir)
    try:
        async for raw, line in lines:
            order.append(raw, line.body, line.line_no)
        for line_no, raw in order.lines():
            parsed = parse_input_line(line_no, raw)
            if parsed is not None:
                yield parsed
    finally:
        order.close()
