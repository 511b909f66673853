"""Upstream models in `--model` and the config file's `upstream:` block."""

from __future__ import annotations

from pathlib import Path

import pytest

from app.engine.config.catalog import resolve_model_specs
from app.engine.config.specs import ModelSpec
from app.engine.config.upstream import UpstreamSpec
from app.engine.errors import ModelConfigError


def test_model_flag_with_urls_is_an_upstream_model():
    specs = resolve_model_specs(
        ["qwen=http://a:8000/v1,http://b:8000/v1/", "qwen=http://c:8000/v1", "batchd-tiny-chat"], data_dir=Path("/tmp")
    )
    qwen, tiny = specs
    assert isinstance(qwen, UpstreamSpec) and isinstance(tiny, ModelSpec)
    assert qwen.urls == ("http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1")
    assert qwen.upstream_model == "qwen" and qwen.line_deadline_s == 3 * qwen.timeout_s


def test_config_upstream_block():
    config = {
        "models": {
            "qwen": {"upstream": {"max_concurrency": 8, "model": "Qwen/Qwen2.5-7B-Instruct"}},
            "emb": {
                "upstream": {"urls": ["http://x/v1"], "endpoints": ["/embeddings"], "timeout_s": 30, "priority": True}
            },
        }
    }
    qwen, emb = resolve_model_specs(["qwen=http://a/v1"], config, data_dir=Path("/tmp"))
    assert (qwen.max_concurrency, qwen.upstream_model, qwen.urls) == (8, "Qwen/Qwen2.5-7B-Instruct", ("http://a/v1",))
    assert emb.endpoints == frozenset({"/v1/embeddings"}) and emb.timeout_s == 30
    assert (qwen.priority, emb.priority) == (False, True)


def test_upstream_adapters_are_on_unless_turned_off():
    config = {"models": {"off": {"upstream": {"urls": ["http://x/v1"], "adapters": False}}}}
    on, off = resolve_model_specs(["on=http://a/v1"], config, data_dir=Path("/tmp"))
    assert (on.name, on.adapters) == ("on", True)
    assert (off.name, off.adapters) == ("off", False)


@pytest.mark.parametrize(
    "config",
    [
        {"models": {"q": {"upstream": {"urls": ["http://x/v1"], "bogus": 1}}}},
        {"models": {"q": {"upstream": {"model": "m"}}}},  # no URLs anywhere
        {"models": {"q": {"upstream": {"urls": ["ftp://x"]}}}},
        {"models": {"q": {"upstream": {"urls": ["http://x/v1"], "max_concurrency": 0}}}},
        {"models": {"q": {"upstream": {"urls": ["http://x/v1"]}, "dtype": "float32"}}},
        {"models": {"q": {"upstream": {"urls": ["http://x/v1"], "endpoints": ["/v1/nope"]}}}},
        {"models": {"q": {"upstream": {"urls": ["http://x/v1"], "priority": 10}}}},
        {"models": {"q": {"upstream": {"urls": ["http://x/v1"], "adapters": "no"}}}},
        {"models": {"q": {"upstream": {"urls": ["http://x/v1"], "adapters": 0}}}},
    ],
)
def test_bad_upstream_config_fails_at_start(config):
    with pytest.raises(ModelConfigError):
        resolve_model_specs([], config, data_dir=Path("/tmp"))
