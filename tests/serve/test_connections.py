"""The HTTP listener's connection limits: the health probe is answered when ``max_connections`` is reached
(reserved slots), idle and slow senders are cut off at the header deadline (a total bound, not a per-read
timeout), and the body has its own deadline.

Synchronisation without sleeps: the listener accepts connections in arrival order (the kernel's accept
queue), so sockets opened first take the ordinary slots; and the server releases a slot before it closes the
connection, so a client that reads until EOF knows the slot is free again. Waits on the server are bounded by
client socket timeouts (10 s), never timed assertions.
"""

from __future__ import annotations

import fcntl
import select
import socket
import struct
import termios
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from google.rpc import code_pb2, error_details_pb2

from ctxutil_otel.serve import HEALTH_RESERVED_CONNECTIONS

from .conftest import EXPORT_HEADERS, RagTrace, Served, connect, read_until_closed
from .test_errors import assert_alive, status_of


@contextmanager
def _idle_connections(served: Served, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections that send nothing; on exit the client half-closes each and waits for the
    server to close it (its slot is released by then)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(connect(served)) for _ in range(count)]
        yield sockets
        for sock in sockets:
            sock.shutdown(socket.SHUT_WR)
            read_until_closed(sock)


def until_acknowledged(sock: socket.socket) -> None:
    """Wait until the server's kernel has acknowledged every byte sent (the client's unacknowledged send
    queue, TIOCOUTQ, is empty): the bytes are then readable on the server's socket. Polls that kernel
    condition; a bound of 10 s, never a delay standing in for it."""
    deadline = time.monotonic() + 10
    while struct.unpack("i", fcntl.ioctl(sock, termios.TIOCOUTQ, b"\0\0\0\0"))[0] > 0:
        assert time.monotonic() < deadline, "the server never acknowledged the bytes"
        select.select([], [], [], 0.001)


@contextmanager
def _busy_connections(served: Served, count: int) -> Iterator[list[socket.socket]]:
    """``count`` connections that have sent part of a request line (not idle: never evicted); on exit
    the client closes each and waits for the server to close it."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(connect(served)) for _ in range(count)]
        for sock in sockets:
            sock.sendall(b"POST /v1/tra")
            until_acknowledged(sock)
        yield sockets
        for sock in sockets:
            sock.shutdown(socket.SHUT_WR)
            read_until_closed(sock)


def _exchange(served: Served, request: bytes) -> tuple[bytes, bytes]:
    """Send ``request`` on a new connection, read until the server closes it (by then the slot is
    released); returns the answer's head and body."""
    with connect(served) as sock:
        sock.sendall(request)
        answer = read_until_closed(sock)
    head, _, body = answer.partition(b"\r\n\r\n")
    return head, body


def test_health_is_answered_when_the_connection_cap_is_reached(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served(max_connections=4)
    with _idle_connections(served, 4):  # every ordinary slot held by a sender that says nothing
        for _ in range(3):  # a reserved slot serves one request, then the server closes it
            head, body = _exchange(served, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200") and b"Connection: close" in head
            assert body == b"ok\n"
    assert "refused_connection" not in served.receiver.stats().requests
    assert_alive(served, rag_trace)  # the ordinary slots are free again: exports are served


def test_reserved_slot_refuses_exports_with_a_retryable_503(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    # min_request_rate=0: the busy connections below trickle nothing more, and are not cut for a newcomer
    # (tests/faults/test_slow_sender_faults.py has them cut).
    served = make_served(max_connections=2, retry_after_s=3, min_request_rate=0)
    payload = rag_trace.request_bytes()
    with _idle_connections(served, 2):
        head, body = _exchange(served, EXPORT_HEADERS.format(length=len(payload)).encode() + payload)
        assert head.startswith(b"HTTP/1.1 503")
        assert b"Retry-After: 3" in head.split(b"\r\n")
        status = status_of(body)
        assert status.code == code_pb2.UNAVAILABLE
        assert "reserved for health probes" in status.message
        info = error_details_pb2.RetryInfo()
        assert status.details[0].Unpack(info) and info.retry_delay.seconds == 3
    # Every slot mid-request, none idle: the next connection waits in the lobby, unanswered, and is
    # served once a slot is free.
    with _busy_connections(served, 2 + HEALTH_RESERVED_CONNECTIONS):
        waiting = connect(served)
        waiting.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        readable, _, _ = select.select([waiting], [], [], 0.5)
        assert not readable, "answered while every slot was taken"
    with waiting:  # the busy connections are closed, their slots free
        assert read_until_closed(waiting).startswith(b"HTTP/1.1 200")
    assert served.receiver.stats().requests["refused_connection"] == 1  # the 503
    assert served.evaluator.stats().captured == 0  # the refused export never reached the processor
    assert_alive(served, rag_trace)


def test_idle_connections_are_closed_at_the_header_deadline(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served(header_timeout_s=0.2)
    with connect(served) as idle, connect(served) as keep_alive:
        keep_alive.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = b""
        while not answer.endswith(b"\r\n\r\nok\n"):  # headers and body may arrive apart
            chunk = keep_alive.recv(65536)
            assert chunk, f"closed before the whole answer arrived: {answer!r}"
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200") and b"Connection: close" not in answer
        # Neither sends (another request): the server closes both, without an answer.
        assert read_until_closed(idle) == b""
        assert read_until_closed(keep_alive) == b""
    # Closing an idle connection is routine, not a refused request.
    assert "incomplete" not in served.receiver.stats().requests
    assert_alive(served, rag_trace)


def test_a_trickled_request_line_is_cut_at_the_total_header_deadline(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served(header_timeout_s=0.5, request_timeout_s=30.0)
    request_line = b"GET /healthz?" + b"a" * 200  # 200 bytes at this pace: 10 s, the test's bound
    with connect(served) as sock:
        # A slow-loris: one byte every 50 ms, well within any per-read timeout, so only a total deadline
        # stops it; the select paces the bytes and notices the server's close.
        closed = False
        for byte in request_line:
            readable, _, _ = select.select([sock], [], [], 0.05)
            if readable:
                closed = True
                break
            sock.sendall(bytes([byte]))
        assert closed, "the server kept reading a request line that never ended"
        assert read_until_closed(sock) == b""  # no answer: the request never completed
    assert served.receiver.stats().requests["incomplete"] == 1
    assert_alive(served, rag_trace)


def test_the_body_has_its_own_deadline(make_served: Callable[..., Served], rag_trace: RagTrace) -> None:
    served = make_served(header_timeout_s=0.2, request_timeout_s=30.0)
    payload = rag_trace.request_bytes()
    with connect(served) as sock:
        sock.sendall(EXPORT_HEADERS.format(length=len(payload)).encode() + payload[:10])
        # Longer than the header deadline, far shorter than the body's: the server must keep waiting.
        readable, _, _ = select.select([sock], [], [], 1.0)
        assert not readable, "the server closed the connection at the header deadline, mid-body"
        sock.sendall(payload[10:])
        assert sock.recv(65536).startswith(b"HTTP/1.1 200")
    assert served.receiver.stats().requests == {"ok": 1}
    assert served.evaluator.stats().captured == 1


def test_idle_connections_in_every_slot_never_starve_probes_or_senders(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    # Issue 10 item 4: idle connections re-opened faster than the header deadline held the reserved slots
    # too, and 0 of 30 probes were answered. A newcomer now takes the slot of the oldest idle connection.
    served = make_served(max_connections=2, header_timeout_s=30.0)
    payload = rag_trace.request_bytes()
    with _idle_connections(served, 2 + HEALTH_RESERVED_CONNECTIONS) as idle:
        for _ in range(5):  # as kubelet probes: one request, Connection: close
            head, body = _exchange(served, b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert head.startswith(b"HTTP/1.1 200") and body == b"ok\n"
            idle.append(connect(served))  # the attacker re-opens one; it is the newest, not evicted first
        export = EXPORT_HEADERS.replace("\r\n\r\n", "\r\nConnection: close\r\n\r\n")
        head, body = _exchange(served, export.format(length=len(payload)).encode() + payload)
        assert head.startswith(b"HTTP/1.1 200")  # took an ordinary slot from an idle connection
        for sock in idle[:4]:  # the oldest idle ones were closed without an answer
            assert read_until_closed(sock) == b""
    requests = served.receiver.stats().requests
    assert requests == {"ok": 1}  # probes are not counted; evicted idle connections neither (no request)
    assert served.evaluator.stats().captured == 1


def _probe_on(sock: socket.socket) -> bytes:
    """``GET /healthz`` on an open keep-alive connection; the whole answer (head and body may arrive
    apart)."""
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    answer = b""
    while not answer.endswith(b"\r\n\r\nok\n"):
        chunk = sock.recv(65536)
        assert chunk, f"closed before the whole answer arrived: {answer!r}"
        answer += chunk
    return answer


def test_eviction_spares_keep_alive_senders_while_unused_connections_are_idle(
    make_served: Callable[..., Served],
) -> None:
    # The soak: bursts of idle connections evicted well-behaved keep-alive senders between two exports
    # (BrokenPipe on their next request). Connections that never completed a request go first.
    served = make_served(max_connections=1, header_timeout_s=30.0)
    probe = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    with connect(served) as keep_alive:  # the ordinary slot, kept alive after one request
        assert _probe_on(keep_alive).startswith(b"HTTP/1.1 200")
        with _idle_connections(served, HEALTH_RESERVED_CONNECTIONS) as unused:  # the reserved slots
            head, body = _exchange(served, probe)
            assert head.startswith(b"HTTP/1.1 200") and body == b"ok\n"
            assert read_until_closed(unused[0]) == b""  # the oldest unused one made room
            assert _probe_on(keep_alive).startswith(b"HTTP/1.1 200")  # the keep-alive sender was spared
