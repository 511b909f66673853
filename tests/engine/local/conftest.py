"""Fixtures for engine tests: one registry with the two built-in models per module
(test_registry.py).

Engines take tens of seconds to start, so a module starts them once and its
tests share them. pytest-asyncio is not a dependency: the module owns an event
loop and tests drive coroutines with the ``run`` fixture (every engine call
must happen on the loop that started the engines).
"""

from __future__ import annotations

import asyncio
import gc
import os
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import replace
from typing import Any

import pytest

# The built-in models are local; never let a load fall back to the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")


@pytest.fixture(scope="module")
def loop() -> Iterator[asyncio.AbstractEventLoop]:
    loop = asyncio.new_event_loop()
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def run(loop) -> Callable[[Coroutine[Any, Any, Any]], Any]:
    return loop.run_until_complete


@pytest.fixture(scope="module")
def registry(run, tmp_path_factory):
    from app.engine.config.catalog import builtin_model_specs
    from app.engine.local.registry import EngineRegistry

    registry = EngineRegistry()
    cpus = os.sched_getaffinity(0)
    specs = builtin_model_specs(tmp_path_factory.mktemp("data"))
    # Eager engines start ~10 s faster (no torch.compile); the engine path is the same.
    run(registry.start([replace(s, engine_args={**s.engine_args, "enforce_eager": True}) for s in specs]))
    yield registry
    run(registry.shutdown())
    # The registry pins this process off the workers' CPUs while it runs; later engines in
    # this process need them all back.
    assert os.sched_getaffinity(0) == cpus
    # Nothing stays frozen out of the collector's reach (else Triton's nanobind objects leak
    # at exit and nanobind prints its leak report after pytest's summary).
    assert gc.get_freeze_count() == 0
