"""vLLM's media fetch (a chat line's image_url, audio_url or video_url, downloaded by vLLM in
batchd's process) obeys the outbound policy once the in-process engines start: internal
addresses are refused with nothing reaching a receiver on 127.0.0.1 and no other connection
tried, a redirect there is refused, and a listed host is fetched. Imports vLLM; starts no engine."""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

import pytest

from app.core.outbound import ALLOW_SETTING, REFUSED, WEBHOOK_ALLOW_SETTING
from tests.support.outbound import AUDIO, RecordingServer

if TYPE_CHECKING:
    from app.engine.local.media import GuardedMediaConnector


class RawMedia:
    """A media reader that keeps the bytes as they came."""

    def get_max_bytes(self) -> int | None:
        return None

    def load_bytes(self, data: bytes) -> bytes:
        return data


@pytest.fixture
def connector(monkeypatch) -> GuardedMediaConnector:
    # vLLM imported here, not at collection: seconds of CPU in every pytest-xdist worker otherwise.
    from vllm.multimodal.media import MEDIA_CONNECTOR_REGISTRY

    from app.engine.local.media import GuardedMediaConnector, guard_media_fetches

    monkeypatch.delenv(ALLOW_SETTING, raising=False)
    monkeypatch.delenv(WEBHOOK_ALLOW_SETTING, raising=False)
    monkeypatch.setitem(MEDIA_CONNECTOR_REGISTRY.name2class, "http", MEDIA_CONNECTOR_REGISTRY.name2class["http"])
    guard_media_fetches()
    loaded = MEDIA_CONNECTOR_REGISTRY.load("http")  # what vLLM's chat renderer loads
    assert isinstance(loaded, GuardedMediaConnector)
    return loaded


def _load(connector: GuardedMediaConnector, url: str) -> bytes:
    return asyncio.run(connector.load_from_url_async(url, RawMedia(), fetch_timeout=5))


def test_internal_addresses_are_refused(connector, stub_network):
    stub_network.answers["metadata.test"] = [["169.254.169.254"]]
    with RecordingServer() as receiver:
        for url in (receiver.url(), "http://metadata.test/latest/meta-data/", "http://[fd00::1]/a.png"):
            with pytest.raises(ValueError, match=REFUSED):
                _load(connector, url)
        with pytest.raises(ValueError, match=REFUSED):  # the synchronous path too
            connector.load_from_url(receiver.url(), RawMedia(), fetch_timeout=5)
        assert receiver.hits == []
    assert stub_network.blocked == []


def test_a_listed_host_is_fetched_and_a_redirect_off_it_refused(connector, stub_network, monkeypatch):
    monkeypatch.setenv(ALLOW_SETTING, "media.internal")
    stub_network.answers["media.internal"] = [["127.0.0.1"]]
    with RecordingServer() as target, RecordingServer() as redirector:
        assert _load(connector, target.url("media.internal")) == AUDIO
        redirector.redirect_to = target.url()  # 127.0.0.1 itself is not listed
        with pytest.raises(ValueError, match=REFUSED):
            _load(connector, redirector.url("media.internal"))
        assert len(target.hits) == 1 and len(redirector.hits) == 1
    assert stub_network.blocked == []
