"""A gate a judge waits at, that works across a process boundary: the same tests drive the thread worker
and the process worker (whose judge runs in a child process, where a ``threading.Event`` of the test cannot
reach).

The test side (:class:`Gate`) is a real TCP server on 127.0.0.1. Each judge call (:func:`pass_gate`, in
whichever process the judge runs) connects, reports what it saw (the query, whether OpenTelemetry
instrumentation was suppressed, whether it waits) and, when it waits, blocks until the test calls
:meth:`Gate.release`. A judge cancelled while waiting reports that on a new connection
(:func:`report`). Every report is recorded before the caller goes on. Only the address is pickled
with a judge, so a judge holding a gate's address can be sent to a child process.
"""

from __future__ import annotations

import asyncio
import json
import socket
import socketserver
import threading
import weakref
from typing import Any

from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY, get_value

__all__ = ["Gate", "pass_gate", "report"]

Address = tuple[str, int]


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    gate: Gate


class _Handler(socketserver.StreamRequestHandler):
    server: _Server

    def handle(self) -> None:
        line = self.rfile.readline()
        if not line:
            return
        message: dict[str, Any] = json.loads(line)
        gate = self.server.gate
        gate._record(message)
        if message.get("wait"):
            gate._released.wait()
        self.wfile.write(b"go\n")  # recorded (and let through): the caller may go on
        self.wfile.flush()


class Gate:
    """The test side: ``entered`` is set when a call waits at the gate; ``calls`` counts the calls,
    ``suppressed`` lists the suppress-instrumentation flag each call saw, ``cancelled`` is set when a
    waiting call was cancelled; ``release()`` lets every current and future call through."""

    def __init__(self) -> None:
        self.entered = threading.Event()
        self.cancelled = threading.Event()
        self._released = threading.Event()
        self._lock = threading.Condition()
        self.reports: list[dict[str, Any]] = []
        server = _Server(("127.0.0.1", 0), _Handler)
        server.gate = self
        self.address: Address = server.server_address[:2]  # type: ignore[assignment]
        thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True, name="test-gate")
        thread.start()
        weakref.finalize(self, _stop, server, self._released)

    def _record(self, message: dict[str, Any]) -> None:
        with self._lock:
            self.reports.append(message)
            self._lock.notify_all()
        if message.get("event") == "cancelled":
            self.cancelled.set()
        elif message.get("wait"):
            self.entered.set()

    @property
    def calls(self) -> int:
        with self._lock:
            return sum(1 for r in self.reports if r.get("event") == "call")

    @property
    def suppressed(self) -> list[object]:
        with self._lock:
            return [r.get("suppressed") for r in self.reports if r.get("event") == "call"]

    def wait_for_calls(self, n: int, timeout: float = 30.0) -> bool:
        """Block until at least ``n`` calls reported (or ``timeout`` seconds passed); True if they did."""
        with self._lock:
            return self._lock.wait_for(
                lambda: sum(1 for r in self.reports if r.get("event") == "call") >= n, timeout
            )

    def release(self) -> None:
        self._released.set()


def _stop(server: _Server, released: threading.Event) -> None:
    released.set()  # unblock handlers still waiting
    server.shutdown()
    server.server_close()


async def pass_gate(address: Address, query: str, *, wait: bool) -> None:
    """Report one judge call to the gate at ``address``; with ``wait``, return when the gate is open."""
    reader, writer = await asyncio.open_connection(*address)
    try:
        message = {
            "event": "call",
            "query": query,
            "wait": wait,
            "suppressed": get_value(_SUPPRESS_INSTRUMENTATION_KEY),
        }
        writer.write(json.dumps(message).encode() + b"\n")
        await writer.drain()
        await reader.readline()
    finally:
        writer.close()


def report(address: Address, event: str) -> None:
    """Report ``event`` (e.g. ``cancelled``) to the gate, synchronously (from an ``except`` clause)."""
    with socket.create_connection(address, timeout=5) as conn:
        conn.sendall(json.dumps({"event": event}).encode() + b"\n")
        conn.recv(8)  # recorded before this returns
