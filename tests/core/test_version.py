"""One version (pyproject.toml's, read from the installed package's metadata) is what
/openapi.json states and what upstream engines see in the User-Agent (`batchd --version`:
tests/test_cli.py)."""

from __future__ import annotations

import asyncio
import tomllib
from pathlib import Path

from aiohttp import web
from aiohttp.test_utils import TestServer

from app.core.version import USER_AGENT, VERSION
from app.engine.upstream.registry import _pooled_client
from app.http.app import create_app

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def test_the_version_is_pyprojects():
    assert VERSION == tomllib.loads(PYPROJECT.read_text())["project"]["version"]


def test_openapi_states_the_version():
    assert create_app().openapi()["info"]["version"] == VERSION


def test_upstream_calls_carry_the_user_agent():
    seen: list[str] = []

    async def models(request: web.Request) -> web.Response:
        seen.append(request.headers["user-agent"])
        return web.json_response({"data": []})

    async def call() -> None:
        app = web.Application()
        app.router.add_get("/v1/models", models)
        async with TestServer(app, host="127.0.0.1") as server, _pooled_client() as client:
            async with client.get(server.make_url("/v1/models")) as response:
                assert response.status == 200

    asyncio.run(call())
    assert seen == [USER_AGENT] == [f"batchd/{VERSION}"]
