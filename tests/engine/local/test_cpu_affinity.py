"""The CPU-pinning setting, without engines (tests/engine/local/test_registry.py checks the pinning
itself against real vLLM workers)."""

from __future__ import annotations

import os

import pytest

from app.engine.errors import ModelConfigError
from app.engine.local.cpu_affinity import SETTING, pin_off_worker_cpus


def test_a_bad_setting_is_a_config_error(monkeypatch):
    monkeypatch.setenv(SETTING, "sometimes")
    with pytest.raises(ModelConfigError, match="expected auto or off"):
        pin_off_worker_cpus()


def test_off_moves_nothing(monkeypatch):
    monkeypatch.setenv(SETTING, "off")
    before = os.sched_getaffinity(0)
    assert pin_off_worker_cpus() is None
    assert os.sched_getaffinity(0) == before
