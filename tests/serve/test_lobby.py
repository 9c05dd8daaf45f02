"""The HTTP listener's lobby on its own (``serve/_lobby.py``): connections wait there for their request
head without a slot, bounded in number and time, and are handed over first come first once it is in.

Real sockets (socket pairs: the test holds the client end); the listener is stood in for by the ``admit``
callable, which records what it is handed. Waits are on the client end (EOF, bounded by a 10 s socket
timeout) or on events the lobby's thread sets, never sleeps.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from ctxutil_otel.serve._lobby import Lobby, head_complete


class _Listener:
    """Records what the lobby hands over; refuses (``False``) while ``full`` is set."""

    def __init__(self) -> None:
        self.admitted: list[tuple[bytes, float]] = []
        self.outcomes: list[str] = []
        self.full = threading.Event()
        self.tried = threading.Event()
        self.done = threading.Event()
        self.sockets: list[socket.socket] = []

    def admit(self, sock: socket.socket, address: Any, head: bytes, waited_s: float) -> bool:
        self.tried.set()
        if self.full.is_set():
            return False
        self.admitted.append((head, waited_s))
        self.sockets.append(sock)
        self.done.set()
        return True


@pytest.fixture
def listener() -> Iterator[_Listener]:
    made = _Listener()
    yield made
    for sock in made.sockets:
        sock.close()


def _pair() -> tuple[socket.socket, socket.socket]:
    server, client = socket.socketpair()
    client.settimeout(10)
    return server, client


def test_head_complete_needs_the_empty_line_after_the_fields() -> None:
    assert head_complete(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    assert head_complete(b"\r\nGET / HTTP/1.1\n\n")  # an empty line before the request line is skipped
    assert not head_complete(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
    assert not head_complete(b"\r\n\r\n")


def test_a_complete_head_is_handed_over_with_what_was_read(listener: _Listener) -> None:
    lobby = Lobby(4, 10.0, listener.admit, listener.outcomes.append)
    server, client = _pair()
    try:
        lobby.enter(server, ("127.0.0.1", 1))
        client.sendall(b"POST /v1/traces HTTP/1.1\r\nContent-Length: 3\r\n")
        client.sendall(b"\r\nabc")
        assert listener.done.wait(10)
        [(head, _)] = listener.admitted
        assert head.startswith(b"POST /v1/traces") and head.endswith(b"\r\n\r\nabc")
        assert listener.outcomes == []
    finally:
        lobby.close()
        client.close()


def test_a_ready_connection_waits_for_a_slot_and_is_tried_again(listener: _Listener) -> None:
    listener.full.set()
    lobby = Lobby(4, 10.0, listener.admit, listener.outcomes.append)
    server, client = _pair()
    try:
        lobby.enter(server, None)
        client.sendall(b"GET /healthz HTTP/1.1\r\n\r\n")
        assert listener.tried.wait(10)  # refused once: it keeps waiting
        listener.full.clear()
        assert listener.done.wait(10)  # tried again
        assert listener.outcomes == []
    finally:
        lobby.close()
        client.close()


def test_bounds_close_the_oldest_beyond_capacity_and_each_at_its_deadline(listener: _Listener) -> None:
    lobby = Lobby(2, 0.3, listener.admit, listener.outcomes.append)
    pairs = [_pair() for _ in range(3)]
    try:
        pairs[1][1].sendall(b"GET /heal")  # part of a head
        for server, _ in pairs:
            lobby.enter(server, None)
        assert pairs[0][1].recv(1) == b""  # beyond capacity: the oldest closed
        assert pairs[1][1].recv(1) == b""  # its head never completed: closed at the deadline
        assert pairs[2][1].recv(1) == b""  # sent nothing: closed at the deadline, not counted
        lobby.close()
        assert sorted(listener.outcomes) == ["incomplete", "refused_connection"]
        assert listener.admitted == []
    finally:
        lobby.close()
        for _, client in pairs:
            client.close()
