"""The engine-niceness setting, without engines (tests/e2e/test_batch_runs.py checks the
niceness itself on a real server's vLLM processes)."""

from __future__ import annotations

import pytest

from app.engine.errors import ModelConfigError
from app.engine.local.cpu_priority import SETTING, lower_engine_priority


@pytest.mark.parametrize("value", ["high", "-1", "20"])
def test_a_bad_setting_is_a_config_error(monkeypatch, value):
    monkeypatch.setenv(SETTING, value)
    with pytest.raises(ModelConfigError, match="from 0 to 19"):
        lower_engine_priority()
