"""The OTLP/HTTP listener's server object: connection slots, the lobby for newcomers that find them all
taken (:mod:`._lobby`), TLS wrapping at accept, and closing.

The request handling (routes, answers, deadlines) is :mod:`._http`; see its docstring for the whole.
"""

from __future__ import annotations

import logging
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from ._limits import SLOW_AFTER_S, ConnectionSlots
from ._lobby import Lobby

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
    lobby: Lobby | None = None  # set by start_http_server (plain connections only)

    def __init__(
        self,
        address: tuple[str, int],
        handler: type[BaseHTTPRequestHandler],
        ipv6: bool,
        max_connections: int,
    ) -> None:
        self.address_family = socket.AF_INET6 if ipv6 else socket.AF_INET
        self.slots = ConnectionSlots(max_connections)
        self._heads: dict[int, bytes] = {}  # id(connection) -> its request head, read in the lobby
        super().__init__(address, handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = self.socket.accept()
        if self.ssl_context is not None:
            # The handshake happens in the connection's thread (_Handler.setup), under its timeout.
            sock = self.ssl_context.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, address

    def process_request(self, request: Any, client_address: Any) -> None:
        lobby = self.lobby if self.ssl_context is None else None
        # With a lobby, a connection that just came or a keep-alive sender between exports is closed only
        # for a newcomer whose head is in: connections that never send one (slow-loris re-opening) must not
        # cut them.
        if self.slots.acquire(request, lobby=lobby is not None) is None:
            if lobby is not None:
                lobby.enter(request, client_address)  # it waits there for its head, without a slot
                return
            self.receiver.count("refused_connection")
            self.shutdown_request(request)
            return
        self._serve(request, client_address)

    def admit_from_lobby(
        self, request: Any, client_address: Any, head: bytes, *, probe: bool, waited_s: float
    ) -> bool:
        """A connection whose request ``head`` is in (read in the lobby ``waited_s`` seconds ago;
        ``probe``: a health probe): the slot of a slow or idle connection (of a keep-alive sender between
        exports once it has waited ``SLOW_AFTER_S``: a slow one may appear first), and served; ``False``
        when there is none (the lobby's thread)."""
        kept_alive = waited_s >= SLOW_AFTER_S
        if self.slots.acquire(request, head_in=True, lobby=True, probe=probe, kept_alive=kept_alive) is None:
            return False
        self._heads[id(request)] = head
        self._serve(request, client_address)
        return True

    def take_head(self, request: Any) -> bytes:
        """The bytes the lobby read from ``request`` (empty when it did not wait there)."""
        return self._heads.pop(id(request), b"")

    def _serve(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request(request, client_address)
        except BaseException:  # the thread did not start: finish_request will not release the slot
            self._heads.pop(id(request), None)
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
        if self.lobby is not None:
            self.lobby.close()
        self.slots.close_all()
        return self.slots.wait_empty(grace_s)

    def handle_error(self, request: Any, client_address: Any) -> None:
        # Disconnects, timeouts and failed TLS handshakes land here: never a traceback on stderr.
        _log.debug("ctxutil serve: HTTP connection error", exc_info=True)
