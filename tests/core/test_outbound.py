"""The outbound policy's rules without a network: which addresses are public (also in their
IPv6 dress), and how the allow-list setting reads."""

from __future__ import annotations

import ipaddress

import pytest

from app.core.config import Settings
from app.core.outbound import OutboundPolicy, is_public


@pytest.mark.parametrize(
    "address",
    [
        "127.0.0.1", "10.0.0.1", "172.16.0.1", "192.168.1.1", "100.64.0.1", "169.254.169.254", "0.0.0.0",
        "224.0.0.1", "240.0.0.1", "255.255.255.255", "::1", "::", "fe80::1", "fc00::1", "fd12::1", "ff02::1",
        "::ffff:127.0.0.1", "::ffff:169.254.169.254", "::127.0.0.1", "64:ff9b::7f00:1", "2002:7f00:1::",
        "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    ],
)  # fmt: skip
def test_internal_addresses_are_not_public(address):
    assert not is_public(ipaddress.ip_address(address))


@pytest.mark.parametrize("address", ["93.184.216.34", "8.8.8.8", "::ffff:8.8.8.8", "2001:4860:4860::8888"])
def test_public_addresses_are_public(address):
    assert is_public(ipaddress.ip_address(address))


def test_the_allow_list_reads_names_addresses_and_networks_from_both_settings():
    settings = Settings(outbound_allow=" Media.Internal., 10.0.0.0/8 ,[fd00::1]", webhook_allow_hosts="hooks.lan")
    policy = settings.outbound_policy()
    assert policy.hosts == {"media.internal", "hooks.lan"}
    assert policy.allows_address(ipaddress.ip_address("10.200.0.1"))
    assert policy.allows_address(ipaddress.ip_address("fd00::1"))
    assert not policy.allows_address(ipaddress.ip_address("fd00::2"))
    assert not OutboundPolicy().allows_address(ipaddress.ip_address("10.200.0.1"))
