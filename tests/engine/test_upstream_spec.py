"""Upstream models in `--model` and the config file, and the per-URL window and routing."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from app.engine import ModelConfigError, ModelSpec, resolve_model_specs
from app.engine.upstream.spec import UpstreamSpec
from app.engine.upstream.targets import Target, TargetPool
from app.engine.upstream.transport import _retry_after


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
            "emb": {"upstream": {"urls": ["http://x/v1"], "endpoints": ["/embeddings"], "timeout_s": 30}},
        }
    }
    qwen, emb = resolve_model_specs(["qwen=http://a/v1"], config, data_dir=Path("/tmp"))
    assert (qwen.max_concurrency, qwen.upstream_model, qwen.urls) == (8, "Qwen/Qwen2.5-7B-Instruct", ("http://a/v1",))
    assert emb.endpoints == frozenset({"/v1/embeddings"}) and emb.timeout_s == 30


@pytest.mark.parametrize(
    "config",
    [
        {"models": {"q": {"upstream": {"urls": ["http://x/v1"], "bogus": 1}}}},
        {"models": {"q": {"upstream": {"model": "m"}}}},  # no URLs anywhere
        {"models": {"q": {"upstream": {"urls": ["ftp://x"]}}}},
        {"models": {"q": {"upstream": {"urls": ["http://x/v1"], "max_concurrency": 0}}}},
        {"models": {"q": {"upstream": {"urls": ["http://x/v1"]}, "dtype": "float32"}}},
        {"models": {"q": {"upstream": {"urls": ["http://x/v1"], "endpoints": ["/v1/nope"]}}}},
    ],
)
def test_bad_upstream_config_fails_at_start(config):
    with pytest.raises(ModelConfigError):
        resolve_model_specs([], config, data_dir=Path("/tmp"))


def test_least_outstanding_routing_and_aimd():
    async def scenario():
        a, b = Target("http://a/v1", 4, 10), Target("http://b/v1", 4, 10)
        pool = TargetPool("m", [a, b])
        pool.set_state(a, "up")
        pool.set_state(b, "up")
        taken = [await pool.acquire() for _ in range(4)]
        assert (a.outstanding, b.outstanding) == (2, 2)
        pool.overloaded(a)  # a 429: the window halves, once per burst
        pool.overloaded(a)
        assert int(a.window) == 2
        assert await pool.acquire() is b and await pool.acquire() is b
        waiter = asyncio.ensure_future(pool.acquire())  # both full: waits
        await asyncio.sleep(0)
        assert not waiter.done()
        pool.release(taken[0])
        assert (await waiter) is taken[0]
        for _ in range(3):
            pool.failed(b, "connection refused")
        assert not b.in_rotation
        pool.succeeded(a)
        assert 2 < a.window < 3

    asyncio.run(scenario())


def test_retry_after_seconds_and_dates():
    assert _retry_after("2") == 2.0
    assert _retry_after(None) == 0.0 and _retry_after("soon") == 0.0
    assert 0 <= _retry_after("Wed, 21 Oct 2015 07:28:00 GMT") <= 0.0 + 1e-9
