"""A real `batchd serve --forwarded-allow-ips` (BATCHD_FORWARDED_ALLOW_IPS): the client address
(what the failed-auth throttle counts) is the `X-Forwarded-For` of the proxies named, and only
of those; behind the shipped ingress (deploy/kubernetes/components/ingress) tenants are then
told apart by their own addresses, not the controller's."""

from __future__ import annotations

import itertools

import httpx
import pytest
from pydantic import ValidationError

from app.core.config import Settings

KEY = "key-forwarded"
BAD_KEYS = (f"bad{n:05d}-made-up" for n in itertools.count())  # each of its own prefix
PROXY = "127.0.0.2"  # a loopback address of its own: the trusted proxy (Linux answers all of 127/8)


def _statuses(server, source: str, forwarded_for: str, count: int) -> list[int]:
    with httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=30) as http:
        return [
            http.get(
                f"{server.base_url}/batches",
                headers={"Authorization": f"Bearer {next(BAD_KEYS)}", "X-Forwarded-For": forwarded_for},
            ).status_code
            for _ in range(count)
        ]


@pytest.mark.parametrize("backend", ["sqlite"], indirect=True)
def test_the_client_address_is_the_one_a_trusted_proxy_forwards(start_server):
    server = start_server(
        env={"BATCHD_API_KEYS": KEY, "BATCHD_AUTH_FAILURE_BURST": "2", "BATCHD_AUTH_FAILURE_WINDOW_SECONDS": "3600"},
        args=["--forwarded-allow-ips", PROXY],
    )
    # Through the trusted proxy: each forwarded client has its own allowance of failures.
    assert _statuses(server, PROXY, "198.51.100.1", 3) == [401, 401, 429]
    assert _statuses(server, PROXY, "198.51.100.2", 1) == [401]
    # From anyone else the header is ignored (the default 127.0.0.1 is no longer trusted):
    # every request is the peer's own, whatever it claims.
    assert _statuses(server, "127.0.0.1", "198.51.100.3", 2) == [401, 401]
    assert _statuses(server, "127.0.0.1", "198.51.100.4", 1) == [429]
    # A good key through the proxy is served.
    with httpx.Client(transport=httpx.HTTPTransport(local_address=PROXY), timeout=30) as http:
        good = http.get(
            f"{server.base_url}/batches",
            headers={"Authorization": f"Bearer {KEY}", "X-Forwarded-For": "198.51.100.1"},
        )
    assert good.status_code == 200, good.text


def test_a_malformed_trusted_proxy_is_refused_at_start(tmp_path):
    assert Settings(data_dir=tmp_path, forwarded_allow_ips="10.0.0.0/8, ::1").parsed_forwarded_allow_ips() == [
        "10.0.0.0/8",
        "::1",
    ]
    assert Settings(data_dir=tmp_path, forwarded_allow_ips="*").parsed_forwarded_allow_ips() == ["*"]
    assert Settings(data_dir=tmp_path).parsed_forwarded_allow_ips() is None  # uvicorn's default
    with pytest.raises(ValidationError, match="BATCHD_FORWARDED_ALLOW_IPS: 'ingress-nginx'"):
        Settings(data_dir=tmp_path, forwarded_allow_ips="10.0.0.0/8,ingress-nginx")
