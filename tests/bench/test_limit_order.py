"""The limit runs lines in batchd's order, so a ratio to it does not credit batchd's ordering."""

import random

from app.pipeline.prefix_order import PrefixOrder, prefix_key
from bench.limit_runner import in_batchd_order


def _chat(text: str) -> dict:
    return {"messages": [{"role": "user", "content": text}]}


def test_the_limit_runs_the_whole_input_in_the_order_batchd_copies_it_out():
    bodies = [_chat(f"doc {(i * 7919) % 1000:04d} q{i}") for i in range(5000)]
    random.Random(0).shuffle(bodies)
    ordered = in_batchd_order(bodies)
    assert ordered != bodies and sorted(map(prefix_key, ordered)) == list(map(prefix_key, ordered))
    order = PrefixOrder()
    for n, body in enumerate(bodies, start=1):
        order.append(b"x", body, n)
    assert [bodies[n - 1] for n, _ in order.lines()] == ordered  # the server's and run-batch's order
    order.close()
