"""The OTLP/HTTP listener's lobby: where a connection that found every slot taken waits for its request head.

Slow senders (slow-loris: a request head trickled a byte a second, re-opened when cut) hold slots while
they trickle: they are not idle, so a newcomer could not take their slot, and probes and well-behaved
senders were refused at accept (issue 24: ``/healthz`` answered 8 of 50 probes). A newcomer that finds
every slot taken (and none idle) waits here instead, in one thread for all of them (``selectors``), with no
slot: once its request head is in (the request line and header fields up to the empty line) it may take
the slot of a connection whose request comes below the minimum rate (:class:`._limits.RequestPace`), which
is cut, or of an idle one; then it is served as any connection, its head handed over as already read.
When there is none yet it keeps waiting, first in line, and is tried again every :data:`RETRY_S` (slow
senders re-opened all at once become slow together, within a second). A newcomer that sends its head no
faster than the slow senders never gets a slot this way.

Bounds: at most ``capacity`` connections wait (beyond it the oldest is closed, counted
``refused_connection``), each at most ``wait_s`` seconds (then closed: counted ``refused_connection`` when
its head was in, ``incomplete`` when it had sent part of it), each holding at most :data:`MAX_HEAD_BYTES`
read. Plain connections only: a TLS connection's head is encrypted, so one that finds every slot taken is
refused at accept, as before.
"""

from __future__ import annotations

import contextlib
import logging
import selectors
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from ._parsing import MAX_HEADER_BYTES

__all__ = ["MAX_HEAD_BYTES", "RETRY_S", "Lobby", "head_complete"]

_log = logging.getLogger("ctxutil_otel.serve")

#: Bytes a waiting connection may send before it is handed over (request line + header section limits).
MAX_HEAD_BYTES: Final = 65536 + MAX_HEADER_BYTES
#: Seconds between two tries to find a slot for a connection whose head is in.
RETRY_S: Final = 0.05


def head_complete(head: bytes) -> bool:
    """Whether ``head`` holds a whole request head: a request line and header fields up to the empty
    line (empty lines before the request line skipped)."""
    head = head.lstrip(b"\r\n")
    return b"\n\r\n" in head or b"\n\n" in head


@dataclass(slots=True, eq=False)
class _Waiting:
    sock: socket.socket
    address: Any
    deadline: float
    head: bytes = b""
    ready: bool = False  # the head is in: it waits for a slot
    ready_at: float = 0.0


class Lobby:
    """Waiting connections (module docstring). Thread-safe :meth:`enter`; one daemon thread, started on
    first use.

    Args:
        capacity: Connections waiting at most (>= 1).
        wait_s: Seconds a connection may wait for its head to be complete.
        admit: ``admit(sock, address, head, waited_s)`` once the head is in (from the lobby's thread;
            ``waited_s``: seconds since): ``True`` when the listener found it a slot (it owns the socket
            from then on), ``False`` when there is none yet (it waits, and is tried again).
        count: ``count(outcome)``: the receiver's request counter.
    """

    def __init__(
        self,
        capacity: int,
        wait_s: float,
        admit: Callable[[socket.socket, Any, bytes, float], bool],
        count: Callable[[str], None],
    ) -> None:
        self._capacity = capacity
        self._wait_s = wait_s
        self._admit = admit
        self._count = count
        self._lock = threading.Lock()
        self._incoming: list[tuple[socket.socket, Any]] = []
        self._waiting: OrderedDict[socket.socket, _Waiting] = OrderedDict()  # oldest first
        self._thread: threading.Thread | None = None
        self._closed = False
        self._selector = selectors.DefaultSelector()
        self._wake_reader, self._wake_writer = socket.socketpair()
        self._wake_reader.setblocking(False)
        self._wake_writer.setblocking(False)
        self._selector.register(self._wake_reader, selectors.EVENT_READ)

    def enter(self, sock: socket.socket, address: Any) -> None:
        """Let ``sock`` wait for its head (it owns the socket from now on)."""
        with self._lock:
            if self._closed:
                _close(sock)
                return
            self._incoming.append((sock, address))
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="ctxutil-serve-lobby", daemon=True)
                self._thread.start()
        self._wake()

    def close(self) -> None:
        """Close every waiting connection and stop the thread."""
        with self._lock:
            self._closed = True
            thread = self._thread
        self._wake()
        if thread is not None:
            thread.join(5.0)
        else:
            self._shut()

    def _wake(self) -> None:
        with contextlib.suppress(OSError):  # full (it wakes anyway) or closed
            self._wake_writer.send(b"\0")

    def _run(self) -> None:
        while True:
            with self._lock:
                closed = self._closed
                incoming, self._incoming = self._incoming, []
            if closed:
                for sock, _ in incoming:
                    _close(sock)
                self._shut()
                return
            try:
                self._turn(incoming)
            except Exception:  # a bug here must not strand the connections entering later
                _log.warning("ctxutil serve: error in the HTTP lobby (ignored)", exc_info=True)

    def _turn(self, incoming: list[tuple[socket.socket, Any]]) -> None:
        """One pass: take the newcomers, close the expired, admit the ready, wait for bytes."""
        for sock, address in incoming:
            self._add(sock, address)
        now = time.monotonic()
        while self._waiting:  # deadlines are in entry order
            oldest = next(iter(self._waiting.values()))
            if oldest.deadline > now:
                break
            self._drop(
                oldest, "refused_connection" if oldest.ready else "incomplete" if oldest.head else None
            )
        ready = self._admit_ready()
        timeout = next(iter(self._waiting.values())).deadline - now if self._waiting else None
        if ready and timeout is not None:
            timeout = min(timeout, RETRY_S)
        for key, _ in self._selector.select(timeout):
            if key.fileobj is self._wake_reader:
                with contextlib.suppress(OSError):
                    self._wake_reader.recv(4096)
            else:
                self._read(key.data)

    def _add(self, sock: socket.socket, address: Any) -> None:
        try:
            sock.setblocking(False)
            waiting = _Waiting(sock, address, time.monotonic() + self._wait_s)
            self._selector.register(sock, selectors.EVENT_READ, waiting)
        except (OSError, ValueError):
            _close(sock)
            return
        self._waiting[sock] = waiting
        while len(self._waiting) > self._capacity:
            self._drop(next(iter(self._waiting.values())), "refused_connection")

    def _read(self, waiting: _Waiting) -> None:
        try:
            data = waiting.sock.recv(MAX_HEAD_BYTES - len(waiting.head))
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            data = b""
        if not data:  # the sender left before its head was in
            self._drop(waiting, "incomplete" if waiting.head else None)
            return
        waiting.head += data
        if head_complete(waiting.head) or len(waiting.head) >= MAX_HEAD_BYTES:
            waiting.ready = True
            waiting.ready_at = time.monotonic()
            with contextlib.suppress(KeyError, ValueError):
                self._selector.unregister(waiting.sock)  # nothing more is read here
            self._admit_ready()

    def _admit_ready(self) -> bool:
        """Find slots for the connections whose head is in, first come first; ``True`` when some are
        left waiting."""
        for waiting in [w for w in self._waiting.values() if w.ready]:
            try:
                waiting.sock.setblocking(True)
                waited_s = time.monotonic() - waiting.ready_at
                if not self._admit(waiting.sock, waiting.address, waiting.head, waited_s):
                    waiting.sock.setblocking(False)
                    return True
            except Exception:  # never kills the thread; the socket is closed
                _close(waiting.sock)
            self._waiting.pop(waiting.sock, None)
        return False

    def _forget(self, waiting: _Waiting) -> None:
        self._waiting.pop(waiting.sock, None)
        with contextlib.suppress(KeyError, ValueError):
            self._selector.unregister(waiting.sock)

    def _drop(self, waiting: _Waiting, outcome: str | None) -> None:
        self._forget(waiting)
        _close(waiting.sock)
        if outcome is not None:
            self._count(outcome)

    def _shut(self) -> None:
        for waiting in list(self._waiting.values()):
            self._drop(waiting, None)
        self._selector.close()
        self._wake_reader.close()
        self._wake_writer.close()


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.close()
