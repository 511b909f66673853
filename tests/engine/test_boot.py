"""What a process starts with: no models at all, or the engines its model specs ask for."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest

from app.engine.boot import NoModels, start_serving
from app.engine.config.specs import ModelSpec
from app.engine.config.upstream import UpstreamSpec
from app.engine.errors import ModelConfigError
from app.engine.upstream.registry import UpstreamRegistry

CHAT = "/v1/chat/completions"
BODY = {"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}]}


def test_no_models_serves_nothing():
    engines = NoModels()

    assert engines.ready
    assert engines.model_cards() == []
    assert (engines.engine_state("gpt-4o"), engines.engine_ready("gpt-4o")) == ("stopped", False)
    assert engines.endpoints_for("gpt-4o") == set()
    assert engines.status() == {}
    assert asyncio.run(engines.abort("req-1")) is False


def test_no_models_refuses_a_line_the_same_way_at_validation_and_at_execution():
    engines = NoModels()

    problem = engines.validate_line(CHAT, BODY)
    result = asyncio.run(engines.execute(CHAT, BODY, "req-1"))

    assert (problem.code, problem.param) == ("model_not_found", "body.model")
    assert "'gpt-4o' does not exist: this server runs no models" in problem.message
    assert result.status_code == 404 and not result.ok
    assert result.body == {
        "error": {"message": problem.message, "type": "NotFoundError", "param": "model", "code": "model_not_found"}
    }


# Run in a fresh interpreter: this test process may have imported vLLM or started engines already.
NO_MODELS_PROBE = """
import asyncio, sys, psutil
from app.core.config import Settings
from app.engine.boot import start_registry
engines = asyncio.run(start_registry(Settings(no_models=True, data_dir=sys.argv[1])))
print(type(engines).__name__, sorted(m for m in ("vllm", "torch") if m in sys.modules), len(psutil.Process().children()))
"""


def test_no_models_setting_starts_no_engine(tmp_path):
    """NoModels, and neither vLLM nor torch imported, nor any process started."""
    probe = subprocess.run(
        [sys.executable, "-c", NO_MODELS_PROBE, str(tmp_path)], capture_output=True, text=True, timeout=120
    )
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["NoModels", "[]", "0"], probe.stdout


def test_served_names_must_be_unique_before_anything_starts():
    specs = [ModelSpec(name="m", path="/models/m"), UpstreamSpec(name="m", urls=("http://127.0.0.1:9/v1",))]
    with pytest.raises(ModelConfigError, match="unique"):
        asyncio.run(start_serving(specs))


def test_upstream_models_alone_need_no_local_engine():
    async def scenario():
        engines = await start_serving([UpstreamSpec(name="m", urls=("http://127.0.0.1:9/v1",))])
        try:
            # Nothing listens on port 9: the model is served, its only URL is down.
            assert isinstance(engines, UpstreamRegistry)
            assert [card["id"] for card in engines.model_cards()] == ["m"]
            assert (engines.ready, engines.engine_state("m")) == (False, "dead")
            assert engines.status()["m"]["http://127.0.0.1:9/v1"]["state"] == "down"
        finally:
            await engines.shutdown()

    asyncio.run(scenario())
