"""A real `batchd serve` keeps an idle client connection open for longer than uvicorn's 5 s
default (app/cli/serve.py KEEP_ALIVE_SECONDS): a client polling every few seconds, or a load balancer
reusing its idle connections, never sends on a socket the server has just closed."""

from __future__ import annotations

import socket
import time

import pytest

from app.cli import KEEP_ALIVE_SECONDS

pytestmark = pytest.mark.parametrize("backend", ["sqlite"], indirect=True)

IDLE_SECONDS = 6.0  # past uvicorn's default of 5 s


def _get_health(conn: socket.socket) -> bytes:
    conn.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    response = b""
    while b"\r\n\r\n" not in response or not response.rstrip().endswith(b"}"):
        chunk = conn.recv(65536)
        if not chunk:
            break
        response += chunk
    return response


def test_an_idle_connection_outlives_uvicorns_default_keep_alive(start_server):
    assert KEEP_ALIVE_SECONDS >= 60
    server = start_server()
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as conn:
        assert _get_health(conn).startswith(b"HTTP/1.1 200")
        time.sleep(IDLE_SECONDS)  # the idle time is what is under test
        assert _get_health(conn).startswith(b"HTTP/1.1 200")
