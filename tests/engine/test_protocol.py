"""Every engine flavour implements the whole `Engines` protocol with its very signatures, so a
caller typed against the protocol never meets a missing or differently shaped member."""

from __future__ import annotations

import importlib
import inspect

import pytest

from app.engine.protocol import Engines, LineChecker, LineRunner

IMPLEMENTATIONS = [
    "app.engine.boot:NoModels",
    "app.engine.upstream.registry:UpstreamRegistry",
    "app.engine.multiplexer:ServingRegistry",
    "app.engine.local.registry:EngineRegistry",  # imports vLLM
]


def protocol_members() -> dict[str, object]:
    members: dict[str, object] = {}
    for protocol in (LineChecker, LineRunner, Engines):
        members.update({name: value for name, value in vars(protocol).items() if not name.startswith("_")})
    return members


def test_the_protocol_declares_what_callers_use():
    assert set(protocol_members()) == {
        "ready",
        "model_cards",
        "engine_state",
        "engine_ready",
        "endpoints_for",
        "suggested_concurrency",
        "status",
        "validate_line",
        "count_prompt_tokens",
        "execute",
        "abort",
        "shutdown",
    }


@pytest.mark.parametrize("path", IMPLEMENTATIONS)
def test_implements_every_member(path):
    module, name = path.split(":")
    cls = getattr(importlib.import_module(module), name)
    for member, declared in protocol_members().items():
        implemented = inspect.getattr_static(cls, member, None)
        assert implemented is not None, f"{name} lacks {member}"
        if isinstance(declared, property):
            # A property or a plain class attribute both read as a value.
            assert not inspect.isfunction(implemented), f"{name}.{member} must be a value, not a method"
            continue
        assert inspect.isfunction(implemented), f"{name}.{member} must be a method"
        assert inspect.iscoroutinefunction(implemented) == inspect.iscoroutinefunction(declared), (
            f"{name}.{member}: async in one, not in the other"
        )
        assert list(inspect.signature(implemented).parameters) == list(inspect.signature(declared).parameters), (
            f"{name}.{member} has other parameters than the protocol's"
        )
