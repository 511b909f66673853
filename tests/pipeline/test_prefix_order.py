"""A whole batch's order by shared prompt prefix (app/pipeline/prefix_order.py): lines about one
document end up side by side wherever they sat in the input, ties keep input order, and only
keys are held in memory (the lines are read back from the spool)."""

import asyncio
import random

from app.pipeline.lines import InputLine
from app.pipeline.prefix_order import PREFIX_LEVELS, PrefixOrder, in_prefix_order, prefix_key

DOCUMENT = " ".join(f"w{n}" for n in range(300))  # ~1.5 KB: longer than the first two levels


def _body(document: int, question: str, system: str = "") -> dict:
    messages = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": f"doc {document}: {DOCUMENT}\n\n{question}"})
    return {"model": "m", "messages": messages}


def _documents_in_order(bodies: list[dict]) -> list[int]:
    order = PrefixOrder()
    raw = [f'{{"n": {n}}}'.encode() for n in range(len(bodies))]
    for n, (line, body) in enumerate(zip(raw, bodies, strict=True)):
        order.append(line, body, n + 1)
    try:
        got = list(order.lines())
    finally:
        order.close()
    assert sorted(line_no for line_no, _ in got) == list(range(1, len(bodies) + 1))
    assert all(line == raw[line_no - 1] for line_no, line in got)  # read back byte for byte
    return [int(bodies[line_no - 1]["messages"][-1]["content"].split(":")[0].split()[1]) for line_no, _ in got]


def _runs(documents: list[int]) -> int:
    return sum(1 for n, d in enumerate(documents) if n == 0 or documents[n - 1] != d)


def test_a_documents_questions_become_one_run_wherever_they_were():
    bodies = [_body(d, f"question {q}?") for d in range(40) for q in range(10)]
    random.Random(1).shuffle(bodies)
    assert _runs([int(b["messages"][-1]["content"].split(":")[0].split()[1]) for b in bodies]) > 300
    assert _runs(_documents_in_order(bodies)) == 40


def test_documents_behind_one_long_shared_system_prompt_still_group():
    """A shared system prompt longer than every level (5 KB) leaves the last message's levels to
    tell the documents apart."""
    system = "You answer from the document. " * 170
    bodies = [_body(d, f"q{q}", system) for d in range(8) for q in range(6)]
    random.Random(2).shuffle(bodies)
    assert len(system) > PREFIX_LEVELS[-1]
    assert _runs(_documents_in_order(bodies)) == 8


def test_a_document_in_the_system_message_groups_its_questions():
    """W3's shape: the document is the system message, the question the user's."""
    bodies = [
        {
            "model": "m",
            "messages": [
                {"role": "system", "content": f"Answer from this document.\n\n{DOCUMENT} {d}"},
                {"role": "user", "content": f"doc {d}: question {q}"},
            ],
        }
        for d in range(30)
        for q in range(8)
    ]
    random.Random(3).shuffle(bodies)
    assert _runs(_documents_in_order(bodies)) == 30


def test_equal_keys_keep_input_order():
    body = _body(1, "same")
    order = PrefixOrder()
    for n in range(5):
        order.append(f"line {n}".encode(), body, n + 1)
    assert [line_no for line_no, _ in order.lines()] == [1, 2, 3, 4, 5]
    order.close()


def test_the_key_reads_every_prompt_shape():
    assert prefix_key({"prompt": "abc"}) == prefix_key({"prompt": "abc"}) != prefix_key({"prompt": "abd"})
    assert prefix_key({"input": "x"}) != prefix_key({"query": "x"})  # no prompt: the empty key
    assert 0 <= prefix_key({"messages": [{"role": "user", "content": "hi"}]}) < 2**64


def test_spooled_input_lines_are_named_by_their_offsets():
    """The server's way: the whole file is spooled as it streams, lines added by offset."""
    data = b'{"a": 1}\n\n{"b": 2}\r\n{"c": 3}'
    order = PrefixOrder()
    order.spool(data[:5])
    order.spool(data[5:])
    for offset, length, text in ((0, 8, "z"), (10, 8, "a"), (20, 8, "m")):
        order.add(offset, length, {"prompt": text})
    got = [line for _, line in order.lines()]
    order.close()
    assert sorted(got) == [b'{"a": 1}', b'{"b": 2}', b'{"c": 3}']
    assert len(got) == 3


def test_in_prefix_order_reads_everything_then_yields_parsed_lines_grouped():
    async def source():
        for n, d in enumerate([0, 1, 0, 1, 0, 1], start=1):
            body = {"model": "m", "prompt": f"doc {d} {DOCUMENT} q{n}"}
            raw = f'{{"custom_id": "c{n}", "method": "POST", "url": "/v1/completions", "body": {{"model": "m", "prompt": "{body["prompt"]}"}}}}'
            yield raw.encode(), InputLine(n, f"c{n}", "/v1/completions", body)

    async def collect():
        return [line async for line in in_prefix_order(source())]

    got = asyncio.run(collect())
    assert sorted(line.custom_id for line in got) == [f"c{n}" for n in range(1, 7)]
    documents = [line.body["prompt"].split()[1] for line in got]
    assert _runs(documents) == 2
    assert all(line.line_no == int(line.custom_id[1:]) for line in got)


def test_a_spool_that_fails_is_remembered_and_reading_back_raises_it():
    """A full disk under the spool: validation goes on (the server then runs the batch in its
    input's order) and nothing reads half a spool back."""

    class FullDisk:
        def write(self, _data):
            raise OSError(28, "No space left on device")

        def close(self):
            pass

    order = PrefixOrder()
    order._spool.close()
    order._spool = FullDisk()
    order.spool(b'{"a": 1}\n')
    order.add(0, 8, {"prompt": "a"})
    assert isinstance(order.spool_error, OSError) and len(order) == 1
    try:
        next(order.lines())
    except OSError as exc:
        assert exc.errno == 28
    else:
        raise AssertionError("lines() read back a spool that failed")
    order.close()


def _order_of(bodies: list[dict]) -> PrefixOrder:
    order = PrefixOrder()
    for n, body in enumerate(bodies):
        order.append(b"{}", body, n + 1)
    return order


def test_only_lines_that_share_a_prefix_need_an_order():
    """An ordered copy is made only when some lines share earlier messages or the first level of
    the last one; W8's shape (short distinct prompts, no earlier messages) needs none."""
    # 20,000 of them: far more than 16-bit levels tell apart (they collide by the thousand)
    distinct = [{"messages": [{"role": "user", "content": f"hello {i}"}]} for i in range(20_000)]
    same_document = [_body(d, f"question {q}?") for d in range(3) for q in range(2)]
    shared_system = [_body(0, "q", system=f"system {n % 2}") for n in range(3)]
    for n, shared_system_body in enumerate(shared_system):  # distinct last messages
        shared_system_body["messages"][-1]["content"] = f"question {n}"
    cases = [
        (distinct, False),
        (distinct[:1], False),
        (same_document, True),
        (shared_system, True),
        ([{"input": "the same text"}, {"input": "the same text"}], True),
    ]
    for bodies, expected in cases:
        order = _order_of(bodies)
        try:
            assert order.shares_prefixes() is expected, bodies[:2]
        finally:
            order.close()
