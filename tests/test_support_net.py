"""``tests.support.net.free_port``: ports a child process can still bind a moment later."""

from __future__ import annotations

import socket

from tests.support.net import _ephemeral_range, free_port


def test_free_ports_are_distinct_bindable_and_outside_the_kernels_ephemeral_range() -> None:
    # serve, started with a port from the ephemeral range, once found it taken by another test's outgoing
    # connection (CI, tests/faults/test_serve_faults.py): the kernel never hands out ports outside that range.
    low, high = _ephemeral_range()
    ports = [free_port() for _ in range(20)]
    assert len(set(ports)) == len(ports)
    assert all(not low <= port <= high for port in ports), (low, high, ports)
    for port in ports:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", port))
