"""Audio lines' `file_url` downloads obey the outbound policy: loopback, link-local, private and
metadata addresses are refused before any connection (a real receiver on 127.0.0.1 records
nothing, the connect hook sees nothing), redirects are re-checked, and BATCHD_OUTBOUND_ALLOW
lets the operator's own hosts through. Other addresses come from a stub resolver only."""

from __future__ import annotations

import asyncio

import pytest

from app.core.outbound import ALLOW_SETTING, REFUSED, WEBHOOK_ALLOW_SETTING
from app.engine.audio import AudioFetchError, fetch_audio
from tests.support.outbound import AUDIO, RecordingServer

REFUSED_NAMES = {
    "loopback.test": "127.0.0.1",
    "metadata.test": "169.254.169.254",
    "private.test": "10.1.2.3",
    "cgnat.test": "100.64.0.9",
    "link-local6.test": "fe80::1",
    "mapped.test": "::ffff:192.168.0.1",
    "unique-local.test": "fd00::1",
}


@pytest.fixture(autouse=True)
def no_allow_list(monkeypatch):
    monkeypatch.delenv(ALLOW_SETTING, raising=False)
    monkeypatch.delenv(WEBHOOK_ALLOW_SETTING, raising=False)


def _refused(url: str) -> str:
    with pytest.raises(AudioFetchError) as caught:
        asyncio.run(fetch_audio(url))
    return str(caught.value)


def test_loopback_urls_are_refused_and_nothing_reaches_the_receiver(stub_network):
    with RecordingServer() as receiver:
        for host in ("127.0.0.1", "[::ffff:127.0.0.1]", "localhost"):
            stub_network.answers["localhost"] = [["127.0.0.1"]]
            assert REFUSED in _refused(receiver.url(host))
        assert receiver.hits == []
    assert stub_network.blocked == []


@pytest.mark.parametrize("name", sorted(REFUSED_NAMES))
def test_names_resolving_to_internal_addresses_are_refused_without_a_connection(stub_network, name):
    stub_network.answers[name] = [[REFUSED_NAMES[name]]]
    message = _refused(f"http://{name}/audio.wav")
    assert REFUSED in message and REFUSED_NAMES[name] not in message  # the address is not told
    assert stub_network.blocked == []


@pytest.mark.parametrize("address", ["169.254.169.254", "10.0.0.1", "192.168.1.1", "172.16.0.1", "[fe80::1]"])
def test_internal_address_literals_are_refused_without_a_connection(stub_network, address):
    assert REFUSED in _refused(f"http://{address}/latest/meta-data/")
    assert stub_network.blocked == []


def test_a_name_with_one_internal_address_among_public_ones_is_refused(stub_network):
    stub_network.answers["mixed.test"] = [["93.184.216.34", "10.0.0.7"]]
    assert REFUSED in _refused("http://mixed.test/audio.wav")
    assert stub_network.blocked == []


def test_listed_addresses_and_names_are_fetched(stub_network, monkeypatch):
    with RecordingServer() as receiver:
        monkeypatch.setenv(ALLOW_SETTING, "127.0.0.0/8")
        assert asyncio.run(fetch_audio(receiver.url())) == AUDIO
        # A listed name: fetched from the address it resolved to, with its own name as Host.
        monkeypatch.setenv(ALLOW_SETTING, "media.internal")
        stub_network.answers["media.internal"] = [["127.0.0.1"]]
        assert asyncio.run(fetch_audio(receiver.url("media.internal"))) == AUDIO
        # The older webhook setting is read as part of the same list.
        monkeypatch.delenv(ALLOW_SETTING)
        monkeypatch.setenv(WEBHOOK_ALLOW_SETTING, "127.0.0.1")
        assert asyncio.run(fetch_audio(receiver.url())) == AUDIO
    assert [hit.host for hit in receiver.hits] == [
        f"127.0.0.1:{receiver.port}",
        f"media.internal:{receiver.port}",
        f"127.0.0.1:{receiver.port}",
    ]
    assert stub_network.blocked == []


def test_a_redirect_to_a_refused_address_is_refused(stub_network, monkeypatch):
    """The first hop is allowed (listed by name); it redirects to a loopback address that is not
    listed, and to the metadata address: neither is followed."""
    monkeypatch.setenv(ALLOW_SETTING, "media.internal")
    stub_network.answers["media.internal"] = [["127.0.0.1"]]
    with RecordingServer() as target, RecordingServer() as redirector:
        for location in (target.url(), "http://169.254.169.254/latest/meta-data/"):
            redirector.redirect_to = location
            assert REFUSED in _refused(redirector.url("media.internal"))
        assert len(redirector.hits) == 2 and target.hits == []
    assert stub_network.blocked == []


def test_other_schemes_are_refused(stub_network):
    assert "http(s) URL" in _refused("file:///etc/passwd")
    assert stub_network.blocked == []
