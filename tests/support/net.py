"""Ports on 127.0.0.1 for tests."""

from __future__ import annotations

import socket

__all__ = ["free_port"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago: bound, read and closed, so nothing listens on it
    now. Use it where ``0`` cannot mean "any port" (a CLI flag, a config file) or as a port that refuses
    connections; a caller that binds it retries if another process took it meanwhile."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
