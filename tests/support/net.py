"""Ports on 127.0.0.1 for tests."""

from __future__ import annotations

import random
import socket
from pathlib import Path

__all__ = ["free_port"]

_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_LOW = 10_000  # below: well-known and registered services a developer's machine may run
_handed_out: set[int] = set()


def _ephemeral_range() -> tuple[int, int]:
    """The kernel's range for ports it picks itself (client sockets, servers bound to port 0)."""
    try:
        low, high = (int(x) for x in _RANGE_FILE.read_text(encoding="ascii").split())
    except (OSError, ValueError):
        return 32_768, 60_999  # Linux's default
    return low, high


def _is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago, for a process that must be told its port (a CLI
    flag, a config file) or as a port that refuses connections.

    Drawn at random from outside the kernel's ephemeral range when there is room below it: the ports the
    kernel hands to client sockets and to servers bound to port 0, which the suite opens by the thousand,
    never land there, so a child process started a moment later still finds its port free (a port from
    the ephemeral range was taken by some test's outgoing connection in between, and ``serve`` failed to
    bind). Never the same port twice in one test process."""
    low, high = _ephemeral_range()
    candidates = (
        range(_LOW, low) if low - _LOW >= 1_000 else range(high + 1, 65_536) if high < 64_535 else None
    )
    if candidates is not None:
        for _ in range(200):
            port = random.choice(candidates)
            if port not in _handed_out and _is_free(port):
                _handed_out.add(port)
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:  # no room outside it: any free port
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
