"""Per-connection limits of the OTLP/HTTP listener: total read deadlines and connection slots.

* :class:`DeadlineReader`: a socket reader whose reads must all complete before one deadline. A socket
  timeout alone bounds each ``recv``, so a sender trickling a byte every few seconds (slow-loris) would
  hold a connection forever; the deadline bounds the request line and headers together
  (``header_timeout_s``), then the body (``request_timeout_s``), whatever the pace of the bytes.
* :class:`ConnectionSlots`: ``capacity`` connections for any request plus ``reserved`` ones that answer
  ``GET /healthz`` only, so that a full listener (a burst of senders, idle keep-alive connections) still
  answers its liveness probe. Same idea as PostgreSQL's ``superuser_reserved_connections``: the last few
  slots are kept for one kind of client, recognised after the connection is made (here: by the request
  line).
"""

from __future__ import annotations

import io
import math
import threading
import time
from typing import Any, Final, Literal

__all__ = ["HEALTH_RESERVED_CONNECTIONS", "ConnectionSlots", "DeadlineReader", "Slot"]

#: Connections kept, beyond ``max_connections``, for ``GET /healthz`` (one request each, then closed).
HEALTH_RESERVED_CONNECTIONS: Final = 2

Slot = Literal["any", "health"]


class DeadlineReader(io.RawIOBase):
    """A raw reader over a connected socket (plain or TLS) where every read since :meth:`start` must
    complete before ``start``'s deadline; past it a read raises ``TimeoutError``.

    Args:
        sock: The connection; its timeout is set to the time left before each ``recv_into``, and put back
            to ``write_timeout_s`` (seconds) after it, for the writes that follow.
        write_timeout_s: The socket timeout outside reads (sending the answer).

    Attributes:
        received: Bytes read since the last :meth:`start`.
        expired: Whether a read since the last :meth:`start` ran out of time.
    """

    def __init__(self, sock: Any, write_timeout_s: float) -> None:
        super().__init__()
        self._sock = sock
        self._write_timeout_s = write_timeout_s
        self._deadline = math.inf
        self.received = 0
        self.expired = False

    def start(self, seconds: float) -> None:
        """Reads from now on must complete within ``seconds``; resets ``received`` and ``expired``."""
        self._deadline = time.monotonic() + seconds
        self.received = 0
        self.expired = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0:
            self.expired = True
            raise TimeoutError("read deadline passed")
        self._sock.settimeout(remaining)
        try:
            count = int(self._sock.recv_into(buffer))
        except TimeoutError:
            self.expired = True
            raise
        finally:
            self._sock.settimeout(self._write_timeout_s)
        self.received += count
        return count


class ConnectionSlots:
    """``capacity`` slots for any request, then ``reserved`` slots for health probes only. Thread-safe.

    Raises:
        ValueError: when ``capacity < 1`` or ``reserved < 0``.
    """

    def __init__(self, capacity: int, reserved: int = HEALTH_RESERVED_CONNECTIONS) -> None:
        if capacity < 1 or reserved < 0:
            raise ValueError(f"capacity must be >= 1 and reserved >= 0, got {capacity} and {reserved}")
        self.capacity = capacity
        self.reserved = reserved
        self._lock = threading.Lock()
        self._any = 0
        self._health: set[int] = set()  # id() of the connections holding a reserved slot

    def acquire(self, connection: object) -> Slot | None:
        """A slot for a new connection: ``"any"`` while one is free, else ``"health"`` while a reserved
        one is free, else ``None`` (refuse the connection). Pair with :meth:`release`."""
        with self._lock:
            if self._any < self.capacity:
                self._any += 1
                return "any"
            if len(self._health) < self.reserved:
                self._health.add(id(connection))
                return "health"
            return None

    def release(self, connection: object) -> None:
        """Free the slot ``connection`` holds (call once, while the connection object is alive)."""
        with self._lock:
            if id(connection) in self._health:
                self._health.discard(id(connection))
            else:
                self._any -= 1

    def health_only(self, connection: object) -> bool:
        """Whether ``connection`` holds a reserved slot (it may answer ``GET /healthz`` only)."""
        with self._lock:
            return id(connection) in self._health
