"""A shard's lines read from its chunks' blobs in bulk (app/worker/chunks.py, `ShardLines`) are
what reading them line by line gave: the counted lines only, in line order, a line recorded
twice read from its last place, and the output and error files' bytes alike."""

from __future__ import annotations

import random

import pytest

from app.core.chunk_format import decode_columns, encode_line
from app.worker.chunks import FinishedLine, ShardLines, _lines_one_by_one


def _blob(lines: list[tuple[int, bool]], tag: str = "") -> bytes:
    return b"".join(
        encode_line(n, ok, b'{"custom_id":"c-%d","note":"%s","x":"a b"}' % (n, tag.encode())) for n, ok in lines
    )


def _files_one_by_one(lines: list[FinishedLine]) -> tuple[bytes, bytes]:
    output = b"".join(line.line + b"\n" for line in lines if line.ok)
    errors = b"".join(line.line + b"\n" for line in lines if not line.ok)
    return output, errors


def _check(blobs: list[tuple[bytes, list[int]]]) -> ShardLines:
    expected = _lines_one_by_one(blobs)
    bulk = ShardLines.of_blobs(blobs)
    assert list(bulk) == expected
    assert bulk.files() == _files_one_by_one(expected)
    assert len(bulk) == len(expected)
    return bulk


def test_chunks_written_out_of_order_come_out_in_line_order():
    rng = random.Random(7)
    numbers = list(range(1000, 2000))
    rng.shuffle(numbers)
    blobs = []
    for start in range(0, 1000, 256):
        part = [(n, rng.random() < 0.9) for n in numbers[start : start + 256]]
        blobs.append((_blob(part), [n for n, _ in part]))
    bulk = _check(blobs)
    assert bulk.line_nos.tolist() == list(range(1000, 2000))


def test_uncounted_and_twice_recorded_lines():
    """A retried write's blob holds lines its row does not count; a line in two counted places
    (never written so, but the line-by-line reader kept the last) is read from the last."""
    first = _blob([(1, True), (2, False), (3, True)], "first")
    retried = _blob([(2, True), (3, True), (4, True)], "retried")
    _check([(first, [1, 2, 3]), (retried, [4])])
    _check([(first, [1, 2, 3]), (retried, [3, 4])])
    _check([(first + _blob([(1, False)], "again"), [1, 2, 3])])


def test_empty_and_no_blobs():
    _check([])
    _check([(b"", [])])
    assert ShardLines.of_blobs([]).files() == (b"", b"")


@pytest.mark.parametrize(
    "odd", [b"5 1 no newline at the end", b"x 1 {}\n", b"\n", b"+5 1 {}\n", b"12345678901 1 {}\n", b"5 1 \n"]
)
def test_a_blob_off_the_format_is_read_as_before(odd):
    blob = _blob([(1, True), (2, False)]) + odd
    if odd in (b"5 1 \n",):  # an empty line is still the format
        assert decode_columns(blob) is not None
    else:
        assert decode_columns(blob) is None
    try:
        expected = _lines_one_by_one([(blob, [1, 2, 5])])
    except ValueError:
        with pytest.raises(ValueError):
            ShardLines.of_blobs([(blob, [1, 2, 5])])
        return
    assert list(ShardLines.of_blobs([(blob, [1, 2, 5])])) == expected
