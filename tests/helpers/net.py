"""Loopback ports for tests that start servers and processes."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A loopback port that nobody listens on: the OS picks a free one, the socket closes again, and the
    port is handed to the server a test starts (or left closed, for "nobody there" cases)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
