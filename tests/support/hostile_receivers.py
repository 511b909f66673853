"""Receivers that answer badly on purpose, on 127.0.0.1: a gzip bomb (about 1 MB of gzip that
inflates to 1 GiB of zeros) and a trickle (one byte of its reply at a time, never done). Each
records when requests arrive and when the client hung up on it."""

from __future__ import annotations

import functools
import socket
import struct
import threading
import time
import zlib

MIB = 1 << 20


@functools.cache
def gzip_bomb(inflated_mib: int = 1024) -> bytes:
    """A gzip stream of `inflated_mib` MiB of zeros, built without holding them: each MiB
    deflated after a full flush compresses to the same bytes, so one is repeated."""
    block = bytes(MIB)
    deflate = zlib.compressobj(6, zlib.DEFLATED, -15)
    first = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    steady = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    crc = 0
    for _ in range(inflated_mib):
        crc = zlib.crc32(block, crc)
    header = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"
    final_block = b"\x03\x00"  # an empty last block
    trailer = struct.pack("<II", crc, (inflated_mib * MIB) & 0xFFFFFFFF)
    return header + first + steady * (inflated_mib - 1) + final_block + trailer


class HostileReceiver:
    """`mode` "bomb": 200 with the gzip bomb as a `Content-Encoding: gzip` body; "trickle":
    `HTTP/1.1 200 OK` and headers one byte every `interval` seconds, forever."""

    def __init__(self, mode: str, interval: float = 0.2) -> None:
        self.mode, self.interval = mode, interval
        self.arrived: list[float] = []  # time.monotonic() of each request
        self.hung_up: list[float] = []  # time.monotonic() when the client closed on a reply
        self.requests: list[bytes] = []  # each request's head
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.05)  # accept() wakes to see the stop (closing does not wake it)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True, name=f"hostile-{mode}")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._listener.getsockname()[1]}/hook"

    def held_at(self, moment: float) -> bool:
        """Whether a request was in progress at `moment` (time.monotonic()); requests one at a time."""
        return any(
            start <= moment and (i >= len(self.hung_up) or moment < self.hung_up[i])
            for i, start in enumerate(self.arrived)
        )

    def __enter__(self) -> HostileReceiver:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._listener.close()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            conn.settimeout(None)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn:
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, body = data.split(b"\r\n\r\n", 1)
            length = next(
                (
                    int(line.split(b":", 1)[1])
                    for line in head.split(b"\r\n")
                    if line.lower().startswith(b"content-length:")
                ),
                0,
            )
            while len(body) < length:  # read it all: unread bytes would make the close a reset
                chunk = conn.recv(65536)
                if not chunk:
                    return
                body += chunk
            self.requests.append(head)
            self.arrived.append(time.monotonic())
            try:
                if self.mode == "bomb":
                    bomb = gzip_bomb()
                    conn.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\n"
                        + f"Content-Length: {len(bomb)}\r\nConnection: close\r\n\r\n".encode()
                        + bomb
                    )
                    conn.shutdown(socket.SHUT_WR)
                    conn.settimeout(30)
                    while conn.recv(65536):  # until the client has it all and hangs up
                        pass
                    return
                reply = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n" + b"X-Slow: " + b"z" * 100_000
                for i in range(len(reply)):
                    if self._stop.wait(self.interval):
                        return
                    conn.sendall(reply[i : i + 1])
            except OSError:
                self.hung_up.append(time.monotonic())
