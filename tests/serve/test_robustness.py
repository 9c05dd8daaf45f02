"""Senders that go away or stall mid-request neither kill nor hang the server; connections are bounded.

Synchronisation without sleeps: the server closes a connection only after its handler has counted the
outcome, so a client that half-closes (or stalls) and then reads until EOF knows the server is done with
it."""

from __future__ import annotations

import select
import socket
import struct
from collections.abc import Callable

from ctxutil_otel.serve import HEALTH_RESERVED_CONNECTIONS

from .conftest import EXPORT_HEADERS, RagTrace, Served, connect, read_until_closed
from .test_connections import until_acknowledged
from .test_errors import assert_alive


def test_sender_disconnects_mid_body(make_served: Callable[..., Served], rag_trace: RagTrace) -> None:
    served = make_served()
    payload = rag_trace.request_bytes()
    # Half-close: announces more bytes than it sends, then stops sending (EOF mid-body).
    with connect(served) as sock:
        sock.sendall(EXPORT_HEADERS.format(length=len(payload)).encode() + payload[:10])
        sock.shutdown(socket.SHUT_WR)
        assert read_until_closed(sock) == b""  # no answer: the server just closes
    # Full close, abruptly (RST): the handler must not care either.
    sock = connect(served)
    sock.sendall(EXPORT_HEADERS.format(length=len(payload)).encode() + payload[:10])
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    assert_alive(served, rag_trace)
    assert served.receiver.stats().requests["incomplete"] >= 1
    # Only the two complete exports (assert_alive's, one per transport) reached the processor; they carry
    # the same turn, recognised as delivered again: captured once.
    assert served.evaluator.stats().captured == 1


def test_stalled_sender_times_out_without_blocking_others(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served(header_timeout_s=1.0, request_timeout_s=1.0)
    payload = rag_trace.request_bytes()
    with connect(served) as stalled_body, connect(served) as stalled_headers:
        stalled_body.sendall(EXPORT_HEADERS.format(length=len(payload)).encode() + payload[:10])
        stalled_headers.sendall(b"POST /v1/tr")
        # Other senders are served while those two hang.
        assert_alive(served, rag_trace)
        # The server gives up on the body after request_timeout_s, on the request line after
        # header_timeout_s, and closes both without an answer.
        assert read_until_closed(stalled_body) == b""
        assert read_until_closed(stalled_headers) == b""
    assert served.receiver.stats().requests["incomplete"] == 2
    assert_alive(served, rag_trace)


def test_grpc_sender_disconnects_mid_frame(make_served: Callable[..., Served], rag_trace: RagTrace) -> None:
    served = make_served()
    with socket.create_connection(("127.0.0.1", served.grpc_port), timeout=10) as sock:
        # The HTTP/2 connection preface, then the start of a frame header, then gone.
        sock.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\x00\x00\x12\x04")
    with socket.create_connection(("127.0.0.1", served.grpc_port), timeout=10) as sock:
        sock.sendall(b"definitely not HTTP/2\r\n\r\n")
        read_until_closed(sock)
    assert_alive(served, rag_trace)


def test_connections_are_bounded(make_served: Callable[..., Served], rag_trace: RagTrace) -> None:
    served = make_served(max_connections=2, min_request_rate=0)  # the held ones are not too slow
    # Two slots for any request, then HEALTH_RESERVED_CONNECTIONS (2) for health probes, then the lobby.
    held = [connect(served) for _ in range(2 + HEALTH_RESERVED_CONNECTIONS)]
    try:
        held[0].sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")  # an ordinary slot: kept alive
        assert held[0].recv(65536).startswith(b"HTTP/1.1 200")
        for sock in held:  # each mid-request (an idle one would give its slot to the newcomer)
            sock.sendall(b"POST /v1/tra")
            until_acknowledged(sock)
        with connect(served) as fifth:  # no thread spent on it: it waits in the lobby for a slot
            fifth.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            readable, _, _ = select.select([fifth], [], [], 0.5)
            assert not readable, "answered while every slot was taken by a request at a good pace"
    finally:
        for sock in held:
            sock.shutdown(socket.SHUT_WR)
            read_until_closed(sock)  # the server closes it after releasing the slot
            sock.close()
    assert_alive(served, rag_trace)
