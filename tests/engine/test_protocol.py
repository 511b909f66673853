"""Every engine flavour implements the whole `Engines` protocol with its very signatures, so a
caller typed against the protocol never meets a missing or differently shaped member."""

from __future__ import annotations

import ast
import importlib
import inspect
from pathlib import Path

import pytest

from app.engine.protocol import Engines, LineChecker, LineRunner

APP = Path(__file__).resolve().parents[2] / "app"
ENGINE_PACKAGE = APP / "engine"
IMPLEMENTATIONS = [
    "app.engine.boot:NoModels",
    "app.engine.upstream.registry:UpstreamRegistry",
    "app.engine.multiplexer:ServingRegistry",
    "app.engine.local.registry:EngineRegistry",  # imports vLLM
]
# Importing vLLM takes ~10 s of CPU: that check runs with the engine tests, not in `make test-fast`.
IMPORTS_VLLM = {"app.engine.local.registry:EngineRegistry"}


def protocol_members() -> dict[str, object]:
    members: dict[str, object] = {}
    for protocol in (LineChecker, LineRunner, Engines):
        members.update({name: value for name, value in vars(protocol).items() if not name.startswith("_")})
    return members


def _uses_outside_engine() -> set[str]:
    """Every attribute read in app/ outside app/engine on an engine object: a name annotated with
    one of the protocols (`engine: LineRunner`, `registry: Engines`), or called `registry`."""
    protocols = {"Engines", "LineRunner", "LineChecker"}
    on_engines: set[str] = set()
    for path in APP.rglob("*.py"):
        if ENGINE_PACKAGE in path.parents:
            continue
        tree = ast.parse(path.read_text())
        receivers = {"registry"}
        for node in ast.walk(tree):
            if isinstance(node, (ast.arg, ast.AnnAssign)):
                annotation = node.annotation
                target = node.arg if isinstance(node, ast.arg) else getattr(node.target, "id", None)
                names = {n.id for n in ast.walk(annotation) if isinstance(n, ast.Name)} if annotation else set()
                if target and names & protocols:
                    receivers.add(target)
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                value = node.value
                receiver = value.id if isinstance(value, ast.Name) else getattr(value, "attr", None)
                if receiver in receivers:
                    on_engines.add(node.attr)
    return on_engines


def _public_members(path: str) -> set[str]:
    """The public methods and attributes a class defines (read from its source: no vLLM import)."""
    module, name = path.split(":")
    tree = ast.parse((APP.parent / (module.replace(".", "/") + ".py")).read_text())
    cls = next(n for n in ast.walk(tree) if isinstance(n, ast.ClassDef) and n.name == name)
    found = set()
    for node in cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found.add(node.name)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            found.add(node.target.id)
        elif isinstance(node, ast.Assign):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return {n for n in found if not n.startswith("_")}


def test_the_protocol_declares_what_callers_use():
    """Every member is used by some caller outside app/engine (none is dead), and what callers
    read on an engine object beyond the protocol is only `start` (called by whoever built the
    concrete registry)."""
    members = set(protocol_members())
    assert members == {
        "ready",
        "model_cards",
        "engine_state",
        "engine_ready",
        "endpoints_for",
        "suggested_concurrency",
        "status",
        "engine_problems",
        "validate_line",
        "lines_pass",
        "count_prompt_tokens",
        "execute",
        "abort",
        "shutdown",
    }
    used = _uses_outside_engine()
    assert members - used == set(), "protocol members no caller outside app/engine uses"
    implemented = set().union(*(_public_members(path) for path in IMPLEMENTATIONS))
    assert (used & implemented) - members <= {"start"}, "callers use engine members the protocol lacks"


@pytest.mark.parametrize(
    "path", [pytest.param(p, marks=pytest.mark.engine) if p in IMPORTS_VLLM else p for p in IMPLEMENTATIONS]
)
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
