"""Per-connection limits of the OTLP/HTTP listener: total read deadlines and connection slots.

* :class:`DeadlineReader`: a socket reader whose reads must all complete before one deadline. A socket
  timeout alone bounds each ``recv``, so a sender trickling a byte every few seconds (slow-loris) would
  hold a connection forever; the deadline bounds the request line and headers together
  (``header_timeout_s``), then the body (``request_timeout_s``), whatever the pace of the bytes.
* :class:`CallDeadlines`: the same total deadline for gRPC calls, whose request message grpcio reads in the
  call's worker thread: past it the call is cancelled, so a call that sends its headers and then nothing
  frees its thread.
* :class:`ConnectionSlots`: ``capacity`` connections for any request plus ``reserved`` ones that answer
  ``GET /healthz`` only, so that a full listener (a burst of senders, idle keep-alive connections) still
  answers its liveness probe. Same idea as PostgreSQL's ``superuser_reserved_connections``: the last few
  slots are kept for one kind of client, recognised after the connection is made (here: by the request
  line). When all are taken, a newcomer takes the slot of the oldest idle connection, which is closed; a
  newcomer whose request head is already in (from the lobby, :mod:`._lobby`) may also take the slot of a
  connection whose request arrives below the minimum rate (:class:`RequestPace`), which is cut.
"""

from __future__ import annotations

import contextlib
import heapq
import io
import math
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Final, Literal

from .._poll import wait_readable

__all__ = [
    "HEALTH_RESERVED_CONNECTIONS",
    "IDLE_BETWEEN_REQUESTS",
    "IDLE_BUSY",
    "IDLE_NEVER_USED",
    "IDLE_SLOW",
    "SLOW_AFTER_S",
    "CallDeadlines",
    "ConnectionSlots",
    "DeadlineReader",
    "RequestPace",
    "Slot",
]

#: Connections kept, beyond ``max_connections``, for ``GET /healthz`` (one request each, then closed).
HEALTH_RESERVED_CONNECTIONS: Final = 2

Slot = Literal["any", "health"]

#: Seconds a request is read before its pace is judged (:meth:`RequestPace.too_slow`): an HTTP client sends
#: a request head in one write.
SLOW_AFTER_S: Final = 0.5


class RequestPace:
    """The pace of the request being read on a connection: bytes since its first byte, and when that came.

    Written by the connection's thread (:meth:`begin`, :meth:`add`, :meth:`end`); :meth:`too_slow` is read
    from others (plain attribute reads).
    """

    __slots__ = ("bytes", "first_at", "reading")

    def __init__(self) -> None:
        self.reading = False
        self.bytes = 0
        self.first_at: float | None = None

    def begin(self) -> None:
        """A request is awaited: its pace counts from its first byte."""
        self.first_at = None
        self.bytes = 0
        self.reading = True

    def add(self, count: int) -> None:
        if count and self.first_at is None:
            self.first_at = time.monotonic()
        self.bytes += count

    def end(self) -> None:
        """The request is read (its body too): no longer judged."""
        self.reading = False

    def too_slow(self, min_rate: float, now: float) -> bool:
        """Whether the request being read has come at fewer than ``min_rate`` bytes/s on average since its
        first byte, that being at least :data:`SLOW_AFTER_S` ago (``min_rate`` 0: never)."""
        first = self.first_at
        if not self.reading or first is None or min_rate <= 0:
            return False
        elapsed = now - first
        return elapsed >= SLOW_AFTER_S and self.bytes < min_rate * elapsed


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

    def __init__(self, sock: Any, write_timeout_s: float, prefix: bytes = b"") -> None:
        super().__init__()
        self._sock = sock
        self._write_timeout_s = write_timeout_s
        self._deadline = math.inf
        self._prefix = prefix  # read from the socket already (the lobby's): served first
        self._cut = False
        self.received = 0
        self.expired = False
        self.receiving = False
        self.pace = RequestPace()

    def cut(self) -> None:
        """Every read from now on fails as past the deadline (``TimeoutError``): the request was too slow
        and its slot went to a newcomer (which shuts the socket down, waking a read in progress)."""
        self._cut = True

    def start(self, seconds: float) -> None:
        """Reads from now on must complete within ``seconds``; resets ``received`` and ``expired``."""
        self._deadline = time.monotonic() + seconds
        self.received = 0
        self.expired = False

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        remaining = self._deadline - time.monotonic()
        if remaining <= 0 or self._cut:
            self.expired = True
            raise TimeoutError("read deadline passed")
        if self._prefix:
            count = min(len(buffer), len(self._prefix))
            buffer[:count] = self._prefix[:count]
            self._prefix = self._prefix[count:]
            self.received += count
            self.pace.add(count)
            return count
        # Wait until a byte can be read, and say so (``receiving``) before consuming it: bytes taken out of
        # the kernel but not yet counted in ``received`` would make a busy connection look idle to
        # ConnectionSlots, which may then close it for a newcomer.
        pending = getattr(self._sock, "pending", None)  # TLS: bytes already decrypted
        if not (pending is not None and pending()) and not wait_readable(self._sock, remaining):
            self.expired = True
            raise TimeoutError("read deadline passed")
        self.receiving = True
        self._sock.settimeout(max(self._deadline - time.monotonic(), 1e-3))
        try:
            count = int(self._sock.recv_into(buffer))
            if self._cut:
                raise TimeoutError("cut: the request came too slowly")
            self.received += count
            self.pace.add(count)
        except TimeoutError:
            self.expired = True
            raise
        finally:
            self.receiving = False
            self._sock.settimeout(self._write_timeout_s)
        return count


class ConnectionSlots:
    """``capacity`` slots for any request, then ``reserved`` slots for health probes only. Thread-safe.

    When every slot is taken, a new connection takes the slot of an *idle* one (attached with
    :meth:`attach` and waiting for a request with no byte of it received), which is closed: connections
    that say nothing never starve a health probe or a sender (issue 10: re-opening idle connections held
    the reserved slots, and every probe was refused at accept); or, once the newcomer's request head is
    in, of a *slow* one (issue 24: slow-loris senders held every slot): see :meth:`acquire`.

    Raises:
        ValueError: when ``capacity < 1`` or ``reserved < 0``.
    """

    def __init__(self, capacity: int, reserved: int = HEALTH_RESERVED_CONNECTIONS) -> None:
        if capacity < 1 or reserved < 0:
            raise ValueError(f"capacity must be >= 1 and reserved >= 0, got {capacity} and {reserved}")
        self.capacity = capacity
        self.reserved = reserved
        self._lock = threading.Condition()
        self._any = 0
        self._health = 0
        # id(connection) -> [slot, the socket, its idle test (None until attached)]; insertion order = age
        self._held: dict[int, list[Any]] = {}

    def acquire(
        self,
        connection: Any,
        *,
        head_in: bool = False,
        lobby: bool = False,
        probe: bool = True,
        kept_alive: bool = True,
    ) -> Slot | None:
        """A slot for a new connection: ``"any"`` while one is free, else ``"health"`` while a reserved
        one is free, else the slot of another connection (closed here), else ``None``. Pair with
        :meth:`release`. Whose slot:

        * ``head_in`` (the newcomer's request head is in, read in the lobby: it is not slow itself): the
          oldest connection reading a request too slowly (:data:`IDLE_SLOW`, cut), else the oldest idle
          one that never completed a request, else (``kept_alive``: the newcomer has waited long enough
          for one of those) the oldest idle keep-alive one (a well-behaved sender between exports: it
          reconnects, but only when nothing else is idle);
        * else, with ``lobby`` (the newcomer can wait there for its head): only the oldest idle connection
          that never completed a request and has been silent :data:`SLOW_AFTER_S` at least (a connection
          that never sends a head cannot cut one that just came, nor a keep-alive sender);
        * else: as with ``head_in``, slow ones excepted.

        A newcomer whose head is in and is no health probe (``probe=False``) takes no reserved slot from
        another connection (it would only be answered 503 there).
        """
        victim = None
        with self._lock:
            if self._any < self.capacity:
                self._any += 1
                slot: Slot = "any"
            elif self._health < self.reserved:
                self._health += 1
                slot = "health"
            else:
                victim = self._victim(head_in, lobby, probe, kept_alive)
                if victim is None:
                    return None
                slot = victim[0]
            self._held[id(connection)] = [slot, connection, None, None, time.monotonic()]
        if victim is not None:
            if victim[3] is not None:
                victim[3]()  # cut: its reads fail as past their deadline (counted incomplete)
            with contextlib.suppress(OSError):  # its thread sees end-of-file and ends
                victim[1].shutdown(socket.SHUT_RDWR)
        return slot

    def _victim(self, head_in: bool, lobby: bool, probe: bool, kept_alive: bool) -> list[Any] | None:
        """The connection whose slot goes to a newcomer (see :meth:`acquire`), removed from ``_held``
        (``release`` skips it), or ``None``."""
        patient = lobby and not head_in
        unused_before = time.monotonic() - SLOW_AFTER_S if patient else math.inf
        fallback = unused = None
        for key, held in self._held.items():
            if held[0] == "health" and head_in and not probe:
                continue
            idleness = _idleness(held[1], held[2])
            if idleness == IDLE_SLOW and head_in:
                return self._held.pop(key)
            if idleness == _NEVER_USED and unused is None and held[4] <= unused_before:
                if not head_in:
                    return self._held.pop(key)
                unused = key
            if idleness == _BETWEEN_REQUESTS and fallback is None and kept_alive and not patient:
                fallback = key
        chosen = unused if unused is not None else fallback
        return None if chosen is None else self._held.pop(chosen)

    def attach(
        self, connection: object, is_idle: Callable[[], int], cut: Callable[[], None] | None = None
    ) -> None:
        """Tell when ``connection`` may be closed for a newcomer: while ``is_idle()`` (called under this
        object's lock: keep it a cheap read) says it waits for a request and has read nothing of it
        (:data:`IDLE_NEVER_USED` or :data:`IDLE_BETWEEN_REQUESTS`, else :data:`IDLE_BUSY`), and no byte
        waits unread on its socket; or, for a newcomer whose request head is in, while it says the
        request comes too slowly (:data:`IDLE_SLOW`: ``cut()`` is called before its socket is shut
        down). Before ``attach`` (its thread not yet running) only the socket is checked."""
        with self._lock:
            held = self._held.get(id(connection))
            if held is not None:
                held[2] = is_idle
                held[3] = cut

    def levels(self) -> list[int]:
        """The idleness of each connection holding a slot, oldest first (``IDLE_*``; diagnostics)."""
        with self._lock:
            return [_idleness(held[1], held[2]) for held in self._held.values()]

    def release(self, connection: object) -> None:
        """Free the slot ``connection`` holds (call once, while the connection object is alive); nothing
        when its slot went to a newcomer."""
        with self._lock:
            held = self._held.pop(id(connection), None)
            if held is None:
                return
            if held[0] == "health":
                self._health -= 1
            else:
                self._any -= 1
            if not self._held:
                self._lock.notify_all()

    def wait_empty(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` until no connection holds a slot; ``True`` when none does."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._held, timeout_s)

    def health_only(self, connection: object) -> bool:
        """Whether ``connection`` holds a reserved slot (it may answer ``GET /healthz`` only)."""
        with self._lock:
            held = self._held.get(id(connection))
            return held is not None and held[0] == "health"

    def close_all(self) -> None:
        """Shut down every connection holding a slot (reads end; the stop of the listener)."""
        with self._lock:
            connections = [held[1] for held in self._held.values()]
        for connection in connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RD)


#: Idleness of a connection (what ``attach``'s callable returns): busy, idle between requests, idle and
#: never used for a request.
IDLE_BUSY: Final = 0
_BETWEEN_REQUESTS: Final = 1
_NEVER_USED: Final = 2
IDLE_BETWEEN_REQUESTS: Final = _BETWEEN_REQUESTS
IDLE_NEVER_USED: Final = _NEVER_USED
#: Reading a request below the minimum rate (:meth:`RequestPace.too_slow`): cut for a newcomer whose
#: request head is in.
IDLE_SLOW: Final = 3


def _idleness(connection: Any, idleness: Callable[[], int] | None) -> int:
    """The connection's idleness (before ``attach``: never used), busy when a byte waits on its socket
    (a slow one stays slow: its bytes trickle)."""
    level = _NEVER_USED if idleness is None else idleness()
    if level in (IDLE_BUSY, IDLE_SLOW):
        return level
    try:
        readable = wait_readable(connection, 0.0)
    except (OSError, ValueError):  # already closed
        return level
    return IDLE_BUSY if readable else level


class CallDeadlines:
    """Runs ``cancel`` callbacks whose deadline passed, from one daemon thread (started on first use).

    :meth:`arm` returns a handle for :meth:`disarm`; a callback runs at most once, never after
    ``disarm`` returned ``True``. :meth:`close` runs the armed ones at once and stops the thread.
    """

    def __init__(self, name: str = "ctxutil-serve-deadlines") -> None:
        self._name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Callable[[], None]]] = []
        self._armed: set[int] = set()
        self._next = 0
        self._thread: threading.Thread | None = None
        self._closed = False

    def arm(self, cancel: Callable[[], None], seconds: float) -> int:
        with self._cond:
            handle = self._next
            self._next += 1
            heapq.heappush(self._heap, (time.monotonic() + seconds, handle, cancel))
            self._armed.add(handle)
            if self._thread is None and not self._closed:
                self._thread = threading.Thread(target=self._run, name=self._name, daemon=True)
                self._thread.start()
            self._cond.notify()
        return handle

    def disarm(self, handle: int) -> bool:
        """``True`` when the deadline had not fired."""
        with self._cond:
            if handle in self._armed:
                self._armed.discard(handle)
                return True
            return False

    def close(self) -> None:
        """Run every armed callback now (the calls still waiting are cancelled: a thread blocked in one
        would otherwise hold the process's exit), then stop the thread."""
        with self._cond:
            self._closed = True
            pending = [cancel for _, handle, cancel in self._heap if handle in self._armed]
            self._armed.clear()
            self._heap.clear()
            self._cond.notify()
        for cancel in pending:
            with contextlib.suppress(Exception):
                cancel()
        thread = self._thread
        if thread is not None:
            thread.join(5.0)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    while self._heap and self._heap[0][1] not in self._armed:
                        heapq.heappop(self._heap)  # disarmed
                    now = time.monotonic()
                    if self._heap and self._heap[0][0] <= now:
                        _, handle, cancel = heapq.heappop(self._heap)
                        self._armed.discard(handle)
                        break
                    self._cond.wait(self._heap[0][0] - now if self._heap else None)
                else:
                    return
            with contextlib.suppress(Exception):  # grpcio's cancel; never kills the thread
                cancel()
