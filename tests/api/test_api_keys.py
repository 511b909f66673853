"""Keys created with `batchd keys create` (stored as keyed hashes) and open mode."""

from __future__ import annotations

import subprocess
import time

import openai
import pytest

from tests.support import db
from tests.support.server import BATCHD


def _create_key(server, project: str) -> str:
    cmd = [str(BATCHD), "keys", "create", "--project", project, "--data-dir", str(server.data_dir)]
    if server.database_url:
        cmd += ["--database-url", server.database_url]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True, timeout=120)
    return done.stdout.strip()


def _rejected(client) -> bool:
    try:
        client.files.list()
    except openai.AuthenticationError:
        return True
    return False


def test_open_mode_then_stored_keys_scope_projects(start_server):
    server = start_server()
    anyone = openai.OpenAI(base_url=server.base_url, api_key="whatever", max_retries=0)
    open_file = anyone.files.create(file=("open.jsonl", b"{}\n"), purpose="batch")
    assert "OPEN MODE" in server.log()

    key_one, key_two = _create_key(server, "team-one"), _create_key(server, "team-two")
    assert key_one.startswith("bd-") and len(key_one) == 43 and key_one != key_two
    # Only the keyed hash is stored, never the key.
    stored = db.execute(server, "SELECT key_hash, project FROM api_keys ORDER BY id")
    assert [p for _, p in stored] == ["team-one", "team-two"]
    assert all(key_one not in h and key_two not in h for h, _ in stored)

    # Open mode ends within the server's 5 s key-count cache.
    deadline = time.monotonic() + 10
    while not _rejected(anyone) and time.monotonic() < deadline:
        time.sleep(0.3)
    assert _rejected(anyone)
    one = openai.OpenAI(base_url=server.base_url, api_key=key_one, max_retries=0)
    two = openai.OpenAI(base_url=server.base_url, api_key=key_two, max_retries=0)
    mine = one.files.create(file=("one.jsonl", b"{}\n"), purpose="batch")
    assert [f.id for f in one.files.list()] == [mine.id]
    assert two.files.list().data == []
    with pytest.raises(openai.NotFoundError):
        two.files.retrieve(mine.id)
    # Files uploaded in open mode belong to project 'default', which neither key can reach.
    with pytest.raises(openai.NotFoundError):
        one.files.retrieve(open_file.id)
