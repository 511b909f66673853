"""Webhook deliveries (the sender's and the test event's one attempt, `send_once` with the guarded
client) obey the outbound policy: internal addresses are refused with nothing reaching a real
receiver on 127.0.0.1, a listed host is delivered to, and a resolver that answers a public
address to the check and loopback afterwards (DNS rebinding) cannot turn a delivery to
loopback. Addresses other than 127.0.0.1 come from a stub resolver; the connect hook refuses
(and records) any connection to them."""

from __future__ import annotations

import asyncio

import pytest

from app.core.outbound import REFUSED, OutboundPolicy, guarded_client
from app.domains.webhooks.delivery import AttemptResult, send_once
from tests.support.outbound import RecordingServer

PUBLIC = "93.184.216.34"


def _deliver(url: str, policy: OutboundPolicy = OutboundPolicy()) -> AttemptResult:
    async def attempt() -> AttemptResult:
        async with guarded_client(policy, timeout=5) as client:
            return await send_once(client, url, ["whsec_dGVzdA=="], "msg_1", b"{}", timeout=5)

    return asyncio.run(attempt())


@pytest.mark.parametrize(
    "address", ["127.0.0.1", "169.254.169.254", "10.0.0.8", "192.168.3.4", "fe80::1", "::ffff:127.0.0.1"]
)
def test_internal_addresses_are_refused_and_nothing_reaches_the_receiver(stub_network, address):
    stub_network.answers["hooks.test"] = [[address]]
    with RecordingServer() as receiver:
        result = _deliver(receiver.url("hooks.test"))
        assert result.status_code is None and REFUSED in (result.error or "") and address not in result.error
        assert receiver.hits == []
    assert stub_network.blocked == []


def test_a_listed_host_or_network_is_delivered_to(stub_network):
    stub_network.answers["hooks.internal"] = [["127.0.0.1"]]
    with RecordingServer() as receiver:
        assert _deliver(receiver.url("hooks.internal"), OutboundPolicy.parse("hooks.internal")).ok
        assert _deliver(receiver.url(), OutboundPolicy.parse("127.0.0.1/32")).ok
        assert [(hit.method, hit.host) for hit in receiver.hits] == [
            ("POST", f"hooks.internal:{receiver.port}"),
            ("POST", f"127.0.0.1:{receiver.port}"),
        ]
    assert stub_network.blocked == []


def test_dns_rebinding_cannot_turn_a_delivery_to_loopback(stub_network):
    """The name answers a public address once, then loopback: the delivery goes to the address
    that was checked (refused by the connect hook before a packet leaves), never to the receiver."""
    stub_network.answers["rebind.test"] = [[PUBLIC], ["127.0.0.1"]]
    with RecordingServer() as receiver:
        result = _deliver(receiver.url("rebind.test"))
        assert result.status_code is None and receiver.hits == []
    assert stub_network.lookups == ["rebind.test"]  # resolved once
    assert stub_network.blocked == [PUBLIC]


def test_a_redirect_is_not_followed_and_no_answer_is_recorded(stub_network):
    with RecordingServer() as target, RecordingServer(redirect_to=target.url()) as redirector:
        result = _deliver(redirector.url(), OutboundPolicy.parse("127.0.0.1"))
        assert result.status_code == 302 and not result.ok
        assert result.error is None  # the status code is kept, what the receiver said is not
        assert len(redirector.hits) == 1 and target.hits == []
