"""Stalled gRPC calls (headers, then nothing) never starve other senders, and ``/healthz`` says when the
gRPC listener cannot take a call (issue 10 item 3). Real grpcio clients; a stalled call is a client-
streaming call whose request iterator blocks, so the client sends its headers and no message."""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable, Iterator

import grpc
import pytest

from .conftest import EXPORT_PATH, RagTrace, Served, grpc_export, record_rag_trace


class StalledCalls:
    def __init__(self, target: str, count: int) -> None:
        self._release = threading.Event()
        self._channel = grpc.insecure_channel(target)
        call = self._channel.stream_unary(EXPORT_PATH, request_serializer=None, response_deserializer=None)
        self.futures = [call.future(self._nothing(), timeout=60) for _ in range(count)]

    def _nothing(self) -> Iterator[bytes]:
        self._release.wait(60)
        return
        yield b""  # pragma: no cover (a generator that yields nothing)

    def close(self) -> None:
        self._release.set()
        for future in self.futures:
            future.cancel()
        self._channel.close()


def _health(served: Served) -> tuple[int, str]:
    connection = http.client.HTTPConnection("127.0.0.1", served.http_port, timeout=10)
    try:
        connection.request("GET", "/healthz", headers={"Connection": "close"})
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def _until_health(served: Served, status: int) -> str:
    """Probe until ``/healthz`` answers ``status`` (the server notices calls asynchronously); at most 200
    probes, a bound only."""
    for _ in range(200):
        answer, body = _health(served)
        if answer == status:
            return body
        threading.Event().wait(0.05)
    pytest.fail(f"/healthz never answered {status}")


def test_eight_stalled_calls_do_not_stop_other_exports(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served()  # default max_connections (64) and request_timeout_s (30 s)
    stalled = StalledCalls(served.grpc_target, 8)
    try:
        for _ in range(3):  # before: every one DEADLINE_EXCEEDED, the 8 workers held by the stalled calls
            grpc_export(served.grpc_target, record_rag_trace().request_bytes(), timeout=10)  # 3 turns
        assert _health(served) == (200, "ok\n")
    finally:
        stalled.close()
    assert served.receiver.stats().requests["ok"] == 3
    assert served.evaluator.stats().captured == 3


def test_stalled_calls_are_cancelled_at_the_request_deadline_and_health_says_so(
    make_served: Callable[..., Served], rag_trace: RagTrace
) -> None:
    served = make_served(max_connections=4, request_timeout_s=1.0)
    stalled = StalledCalls(served.grpc_target, 4)
    try:
        reason = _until_health(served, 503)  # every call slot held: the listener cannot serve
        assert "OTLP/gRPC listener saturated: 4 of 4 calls in progress" in reason
        for future in stalled.futures:  # the server cancels each at its request deadline
            with pytest.raises(grpc.FutureCancelledError if future.cancelled() else grpc.RpcError) as caught:
                future.result(timeout=30)
            if isinstance(caught.value, grpc.RpcError):
                assert caught.value.code() is grpc.StatusCode.CANCELLED
        assert _until_health(served, 200) == "ok\n"
    finally:
        stalled.close()
    grpc_export(served.grpc_target, rag_trace.request_bytes())
    requests = served.receiver.stats().requests
    assert requests == {"incomplete": 4, "ok": 1}
