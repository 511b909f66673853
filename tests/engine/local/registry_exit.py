"""Runs the in-process engine registry on the built-in chat model for one line, shuts it down and
exits: tests/engine/local/test_clean_exit.py checks that nothing is printed after DONE.
    python -m tests.engine.local.registry_exit DATA_DIR"""

from __future__ import annotations

import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path

# The built-in models are local; never let a load fall back to the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from app.engine.config.catalog import builtin_model_specs  # noqa: E402
from app.engine.config.tiny_chat import TINY_CHAT_NAME  # noqa: E402
from app.engine.local.registry import EngineRegistry  # noqa: E402

DONE = "registry shut down"


async def main(data_dir: Path) -> None:
    registry = EngineRegistry()
    (spec,) = [s for s in builtin_model_specs(data_dir) if s.name == TINY_CHAT_NAME]
    # Eager: ~10 s faster (no torch.compile); the engine path is the same.
    await registry.start([replace(spec, engine_args={**spec.engine_args, "enforce_eager": True})])
    try:
        body = {"model": TINY_CHAT_NAME, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        result = await registry.execute("/v1/chat/completions", body, "exit-1")
        assert result.status_code == 200, result.body
    finally:
        await registry.shutdown()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
    print(DONE, flush=True)
