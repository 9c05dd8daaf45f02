"""The OTLP/HTTP listener's server object: connection slots, TLS wrapping at accept, and closing.

The request handling (routes, answers, deadlines) is :mod:`._http`; see its docstring for the whole.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from ._limits import ConnectionSlots

if TYPE_CHECKING:
    from ._types import Receiver

__all__ = ["HttpListener"]

_log = logging.getLogger("ctxutil_otel.serve")


class HttpListener(ThreadingHTTPServer):
    """The OTLP/HTTP server (module docstring); :meth:`close` stops it and its connections."""

    daemon_threads = True
    allow_reuse_address = True
    # The listen backlog (socketserver's default is 5): a burst of connections beyond it has its SYNs
    # dropped and retried by the client after 1 s, 3 s, ... The kernel caps it at net.core.somaxconn.
    request_queue_size = socket.SOMAXCONN
    receiver: Receiver
    ssl_context: ssl.SSLContext | None = None
    thread: threading.Thread | None = None

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        ipv6: bool,
        max_connections: int,
    ) -> None:
        self.address_family = socket.AF_INET6 if ipv6 else socket.AF_INET
        self.slots = ConnectionSlots(max_connections)
        super().__init__(address, handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        if self.ssl_context is not None:
            # The handshake happens in the connection's thread (_Handler.setup), under its timeout.
            sock = self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def process_request(self, request: Any, client_address: Any) -> None:
        if self.slots.acquire(request) is None:
            self.receiver.count("refused_connection")
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:  # the thread did not start: finish_request will not release the slot
            self.slots.release(request)
            raise

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            super().finish_request(request, client_address)
        finally:  # before the socket is closed (process_request_thread closes it after this)
            self.slots.release(request)

    def running(self) -> bool:
        """Whether the accept loop's thread is alive."""
        return self.thread is not None and self.thread.is_alive()

    def close(self, grace_s: float) -> bool:
        """Stop accepting, end the reads of every open connection (idle ones close; a request whose body
        was read is still answered), and wait up to ``grace_s`` for their threads to end. ``True`` when
        none is left."""
        self.shutdown()
        self.server_close()
        self.slots.close_all()
        return self.slots.wait_empty(grace_s)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Disconnects, timeouts and failed TLS handshakes land here: never a traceback on stderr.
        _log.debug("ctxutil serve: HTTP connection error", exc_info=True)
