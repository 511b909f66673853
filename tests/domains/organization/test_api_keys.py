"""Keys created with `batchd keys create` (stored as keyed hashes) and open mode (revoking keys
on two replicas, whose logs are checked too: tests/e2e/test_key_revocation.py)."""

from __future__ import annotations

import openai
import pytest

from harness.poll import wait_until
from tests.support import db
from tests.support.keys import create_key, rejected


def test_open_mode_then_stored_keys_scope_projects(start_app, caplog):
    server = start_app()
    anyone = server.client("whatever")
    open_file = anyone.files.create(file=("open.jsonl", b"{}\n"), purpose="batch")
    assert "OPEN MODE" in caplog.text

    key_one, key_two = create_key(server, "team-one"), create_key(server, "team-two")
    assert key_one.startswith("bd-") and len(key_one) == 43 and key_one != key_two
    # Only the keyed hash is stored, never the key.
    stored = db.execute(server, "SELECT key_hash, project FROM api_keys ORDER BY id")
    assert [p for _, p in stored] == ["team-one", "team-two"]
    assert all(key_one not in h and key_two not in h for h, _ in stored)

    # Open mode ends within the server's 5 s key-count cache.
    wait_until(lambda: rejected(anyone), 10, "open mode to end", interval=0.3)
    one = server.client(key_one)
    two = server.client(key_two)
    mine = one.files.create(file=("one.jsonl", b"{}\n"), purpose="batch")
    assert [f.id for f in one.files.list()] == [mine.id]
    assert two.files.list().data == []
    with pytest.raises(openai.NotFoundError):
        two.files.retrieve(mine.id)
    # Files uploaded in open mode belong to project 'default', which neither key can reach.
    with pytest.raises(openai.NotFoundError):
        one.files.retrieve(open_file.id)
