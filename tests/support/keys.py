"""Stored API keys for tests: `batchd keys create` run on a server's database, and whether a
client's key is refused."""

from __future__ import annotations

import openai

from tests.support import cli


def create_key(server, project: str, *extra: str) -> str:
    return cli.on(server, "keys", "create", "--project", project, *extra).stdout.strip()


def rejected(client) -> bool:
    try:
        client.files.list()
    except openai.AuthenticationError:
        return True
    return False
