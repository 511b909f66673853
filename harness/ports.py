"""Free TCP ports on the loopback interface."""

from __future__ import annotations

import random
import socket

# Below the kernel's ephemeral range (32768-60999 on Linux): a port the kernel handed out as
# "free" could be taken by any outgoing connection (vLLM's, httpx's) before the server binds it,
# which a CI run saw as a server exiting with "address already in use". Outgoing connections
# never take a port from this range.
PORT_RANGE = (20000, 32000)


def free_port() -> int:
    """A port nothing listens on now (another test process could still take it, rarely: random)."""
    while True:
        port = random.randrange(*PORT_RANGE)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
