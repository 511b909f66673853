"""Tools for outbound-policy tests that send traffic to 127.0.0.1 only: a recording HTTP server
there, and a stub network (a resolver answering from a table and a connect hook that refuses,
and records, every connection to an address other than loopback, before a packet leaves)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from app.core import outbound

AUDIO = b"RIFF-not-really-audio"


@dataclass
class Hit:
    method: str
    path: str
    host: str


class RecordingServer:
    """Answers every request on 127.0.0.1 with AUDIO (or a redirect to `redirect_to`) and
    records it."""

    def __init__(self, redirect_to: str | None = None) -> None:
        self.hits: list[Hit] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.rfile.read(int(self.headers.get("content-length", 0)))
                recorder.hits.append(Hit(self.command, self.path, self.headers.get("host", "")))
                if recorder.redirect_to:
                    self.send_response(302)
                    self.send_header("location", recorder.redirect_to)
                    self.send_header("content-length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("content-length", str(len(AUDIO)))
                self.end_headers()
                self.wfile.write(AUDIO)

            do_GET = do_POST = _answer  # noqa: N815 - http.server's naming

            def log_message(self, *args) -> None:
                pass

        self.redirect_to = redirect_to
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    def url(self, host: str = "127.0.0.1") -> str:
        return f"http://{host}:{self.port}/audio.wav"

    def __enter__(self) -> RecordingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()


@dataclass
class StubNetwork:
    """`answers[name]`: the addresses of each successive lookup of `name` (the last repeats).
    `blocked`: every non-loopback address something tried to connect to."""

    answers: dict[str, list[list[str]]] = field(default_factory=dict)
    lookups: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)

    def answer(self, host: str) -> list[str]:
        self.lookups.append(host)
        rounds = self.answers[host]
        return rounds.pop(0) if len(rounds) > 1 else rounds[0]


def install_stub_network(monkeypatch: pytest.MonkeyPatch) -> StubNetwork:
    """The stub resolver and connect hook, installed until `monkeypatch` undoes them."""
    network = StubNetwork()
    real_getaddrinfo = asyncio.base_events.BaseEventLoop.getaddrinfo
    real_connect, real_connect_ex = socket.socket.connect, socket.socket.connect_ex

    async def getaddrinfo(self, host, port, *, family=0, type=0, proto=0, flags=0):
        name = host.decode() if isinstance(host, bytes) else host
        if name in network.answers:
            return [_info(address, port) for address in network.answer(name)]
        try:
            ipaddress.ip_address(name)
        except ValueError:  # no real DNS query ever leaves a test
            raise socket.gaierror(socket.EAI_NONAME, "unknown to the stub resolver") from None
        return await real_getaddrinfo(self, host, port, family=family, type=type, proto=proto, flags=flags)

    def guard(address) -> None:
        if isinstance(address, tuple) and not ipaddress.ip_address(address[0].split("%")[0]).is_loopback:
            network.blocked.append(address[0])
            raise ConnectionRefusedError(f"the test's connect hook refused {address[0]}")

    def connect(sock, address):
        guard(address)
        return real_connect(sock, address)

    def connect_ex(sock, address):
        guard(address)
        return real_connect_ex(sock, address)

    def lookup(host: str, port: int) -> list[tuple]:  # the outbound guard's resolver (a DNS thread)
        if host in network.answers:
            return [_info(address, port) for address in network.answer(host)]
        raise socket.gaierror(socket.EAI_NONAME, "unknown to the stub resolver")

    monkeypatch.setattr(asyncio.base_events.BaseEventLoop, "getaddrinfo", getaddrinfo)
    monkeypatch.setattr(outbound, "_lookup", lookup)
    monkeypatch.setattr(socket.socket, "connect", connect)
    monkeypatch.setattr(socket.socket, "connect_ex", connect_ex)
    return network


def _info(address: str, port: int) -> tuple:
    if ":" in address:
        return (socket.AF_INET6, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port, 0, 0))
    return (socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port))
