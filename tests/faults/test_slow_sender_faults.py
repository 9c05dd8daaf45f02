"""Fault injection: slow-loris senders in every HTTP slot of ``serve`` (issue 24 row 4). They trickle a
request head and are never idle, so the reserved health slots and idle-connection eviction did not help:
``/healthz`` answered 8 to 11 of 50 probes and a well-behaved sender was refused 99 times in 124. Now a
newcomer that finds every slot taken waits in the lobby for its request head, then takes the slot of a
request coming below ``min_request_rate``; the slow one is cut (counted ``incomplete``).

Real parts: a ``TraceReceiver`` on real sockets; the slow senders are raw TCP connections. Waits poll the
server's own view of its connections (bounded by 10 s), never a sleep standing in for it.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from ctxutil_otel.serve import HEALTH_RESERVED_CONNECTIONS
from ctxutil_otel.serve._limits import IDLE_SLOW
from tests.serve.conftest import EXPORT_HEADERS, RagTrace, Served, connect, read_until_closed
from tests.serve.test_connections import until_acknowledged

_PROBE = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"


def _wait_until_slow(served: Served, count: int) -> None:
    """Until the listener sees ``count`` of its connections as too slow (the rule: below the rate for
    1 s at least). Polls the server's state; 10 s bound."""
    http = served.receiver._http
    assert http is not None
    deadline = time.monotonic() + 10
    while http.slots.levels().count(IDLE_SLOW) < count:
        assert time.monotonic() < deadline, f"never {count} slow: {http.slots.levels()}"
        time.sleep(0.02)


@contextmanager
def _slow_loris(served: Served, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections that have sent the first byte of a request head and then nothing."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(connect(served)) for _ in range(count)]
        for sock in sockets:
            sock.sendall(b"P")
            until_acknowledged(sock)
        yield sockets


def _exchange(served: Served, request: bytes) -> bytes:
    with connect(served) as sock:
        sock.sendall(request)
        return read_until_closed(sock)


def test_slow_senders_in_every_slot_yield_to_probes_and_senders(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served(max_connections=4, header_timeout_s=30.0, request_timeout_s=30.0)
    slots = 4 + HEALTH_RESERVED_CONNECTIONS
    payload = rag_trace.request_bytes()
    export = EXPORT_HEADERS.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n").format(length=len(payload))
    with _slow_loris(served, slots) as loris, ExitStack() as reopened:
        _wait_until_slow(served, slots)
        for i in range(3):  # before: refused at accept (closed unanswered) while the loris held every slot
            answer = _exchange(served, _PROBE)
            assert answer.startswith(b"HTTP/1.1 200") and answer.endswith(b"\r\n\r\nok\n"), answer
            assert read_until_closed(loris[i]) == b""  # the oldest slow sender was cut, unanswered
            # The attacker re-opens at once: it takes the slot the probe freed (it is no newcomer with a
            # head: it cannot cut a slow one itself), and is not slow yet.
            reopened.enter_context(_slow_loris(served, 1))
        answer = _exchange(served, export.encode() + payload)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        assert read_until_closed(loris[3]) == b""
    served.flush()
    requests = served.receiver.stats().requests
    assert requests["ok"] == 1
    assert requests["incomplete"] >= 4  # each cut slow sender (the rest end with the test's close)
    assert "refused_connection" not in requests
    assert served.evaluator.stats().evaluated == 1


def test_a_body_trickled_below_the_rate_yields_its_slot(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    # The rate covers the body too: headers at once, then a byte of body and nothing more (in the one
    # ordinary slot; the reserved ones are held by connections trickling a head).
    served = make_served(max_connections=1, header_timeout_s=30.0, request_timeout_s=30.0)
    payload = rag_trace.request_bytes()
    with ExitStack() as stack:
        body = stack.enter_context(connect(served))
        body.sendall(EXPORT_HEADERS.format(length=len(payload)).encode() + payload[:1])
        until_acknowledged(body)
        stack.enter_context(_slow_loris(served, HEALTH_RESERVED_CONNECTIONS))
        _wait_until_slow(served, 1 + HEALTH_RESERVED_CONNECTIONS)
        answer = _exchange(served, _PROBE)
        assert answer.startswith(b"HTTP/1.1 200"), answer
        assert read_until_closed(body) == b""  # the oldest: cut mid-body, without an answer
    assert served.receiver.stats().requests.get("incomplete", 0) >= 1
    assert served.evaluator.stats().captured == 0


def test_connections_that_never_send_a_head_do_not_cut_a_keep_alive_sender(
    make_served: Callable[..., Served],
) -> None:
    # In the slow-loris run the well-behaved sender lost 41 of its keep-alive connections between two
    # exports: each loris re-opened took the slot of the only idle connection, the sender's. A newcomer
    # now takes a keep-alive sender's slot only once its own request head is in (from the lobby).
    served = make_served(max_connections=1, header_timeout_s=30.0, request_timeout_s=30.0)
    with connect(served) as keep_alive:
        keep_alive.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"\r\n\r\nok\n"):
            chunk = keep_alive.recv(65536)
            assert chunk, answer
            answer += chunk
        with _slow_loris(served, HEALTH_RESERVED_CONNECTIONS), ExitStack() as stack:
            _wait_until_slow(served, HEALTH_RESERVED_CONNECTIONS)
            silent = [stack.enter_context(connect(served)) for _ in range(3)]  # wait in the lobby
            answer = _exchange(served, _PROBE)  # a newcomer with its head: the oldest slow one's slot
            assert answer.startswith(b"HTTP/1.1 200"), answer
            assert all(sock.fileno() >= 0 for sock in silent)
            keep_alive.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # the sender was spared
            assert keep_alive.recv(65536).startswith(b"HTTP/1.1 200")
