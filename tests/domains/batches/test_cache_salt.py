"""Each project's prompt cache apart (issue #54): every line batchd sends to an engine carries its
project's own `cache_salt`, replacing any the caller sent, so no project can learn from
`cached_tokens` (or timing) whether another sent a prompt. Through the official `openai` client
on the app in process, with a fake engine that records what it was sent."""

from __future__ import annotations

from typing import Any

import pytest

from app.core.config import Settings
from app.db.engine import Database
from app.engine.results import LineResult
from app.pipeline.cache_salt import project_salt, salt_key
from app.worker.context import WorkerContext
from tests.conftest import API_KEYS_ENV
from tests.support.batches import CHAT_MODEL, EMBED_MODEL, chat_line, create, embedding_line, wait_for
from tests.support.fake_engine import FakeEngines

SECRET = "the-operators-cache-salt-secret"
HI = [{"role": "user", "content": "the same prompt for everyone"}]


class RecordingEngines(FakeEngines):
    """The fake engine, keeping each line's body as it reached the engine."""

    def __init__(self) -> None:
        super().__init__()
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def execute(self, endpoint: str, body: Any, request_id: str, priority: int = 0, **kwargs: Any) -> LineResult:
        self.sent.append((endpoint, dict(body)))
        return await super().execute(endpoint, body, request_id, priority, **kwargs)


@pytest.fixture(scope="module")
def engines(backend) -> RecordingEngines:
    """One per backend: each backend's app records only its own lines."""
    return RecordingEngines()


@pytest.fixture(scope="module")
def salted(start_app, engines):
    return start_app({"BATCHD_API_KEYS": API_KEYS_ENV, "BATCHD_CACHE_SALT_SECRET": SECRET}, engines=engines)


def _salts(engines: RecordingEngines, marker: str) -> list[str | None]:
    return [body.get("cache_salt") for _, body in engines.sent if marker in str(body)]


def test_two_projects_same_prompt_each_line_carries_its_own_projects_salt(salted, engines):
    key = salt_key(SECRET.encode())
    expected = {"key-a": project_salt(key, "proj-a"), "key-b": project_salt(key, "proj-b")}
    assert expected["key-a"] != expected["key-b"]
    for api_key in expected:
        client = salted.client(api_key)
        lines = [
            chat_line(f"{api_key}-plain", text=f"{HI[0]['content']} [{api_key}]"),
            # A caller's own salt (here: the other project's) is replaced, not passed on.
            chat_line(f"{api_key}-own", text=f"{HI[0]['content']} [{api_key}]", cache_salt=project_salt(key, "proj-b")),
        ]
        batch = create(client, lines)
        assert wait_for(client, batch.id).status == "completed"
        embeddings = create(client, [embedding_line(f"{api_key}-vec", f"embed [{api_key}]")], "/v1/embeddings")
        assert wait_for(client, embeddings.id).status == "completed"
        # A flex call is a one-line batch too: its line is salted the same way.
        client.chat.completions.create(
            model=CHAT_MODEL,
            messages=[{"role": "user", "content": f"flex [{api_key}]"}],
            service_tier="flex",
            extra_body={"cache_salt": "caller-chosen"},
        )
        client.embeddings.create(
            model=EMBED_MODEL, input=f"flex embed [{api_key}]", extra_body={"service_tier": "flex"}
        )
    for api_key, salt in expected.items():
        assert _salts(engines, f"[{api_key}]") == [salt] * 5, api_key


def test_the_default_salt_is_derived_from_the_server_secret_and_stable(tmp_path):
    """No BATCHD_CACHE_SALT_SECRET: the salt comes from the key-hashing secret (created once in the
    data dir), so a restarted server, or a replica sharing BATCHD_SECRET_KEY, salts alike."""

    def salt(**settings: Any) -> str:
        store: Any = None  # not used for salts
        context = WorkerContext(
            Database(f"sqlite+aiosqlite:///{tmp_path}/unused.db"), store, FakeEngines(), Settings(**settings)
        )
        return context.cache_salt("proj-a")

    first = salt(data_dir=tmp_path)
    assert first == salt(data_dir=tmp_path) != salt(data_dir=tmp_path / "other")
    assert salt(data_dir=tmp_path / "r1", secret_key="shared") == salt(data_dir=tmp_path / "r2", secret_key="shared")
    assert salt(data_dir=tmp_path, cache_salt_secret="set") == project_salt(salt_key(b"set"), "proj-a") != first
    assert len(first) == 43 and "/" not in first and "@" not in first
