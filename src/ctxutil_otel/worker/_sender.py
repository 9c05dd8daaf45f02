"""The process worker's sending side: what the application process writes down the pipe to its child goes
through its own thread, never from the evaluator's event loop.

A child whose event loop is blocked (a judge that never yields) stops reading; once the pipe's buffer
(about 200 KB) is full a send would block, and a send on the evaluator's loop would keep that loop from
firing the very timer that kills the hung child. So the loop only pickles (its CPU stays the one the CPU
budget measures) and hands the bytes to this thread; killing the child breaks the pipe and ends any send
still waiting. The queue is bounded by what is in flight: at most ``max_concurrency`` evaluations, plus
the configuration and the stop message.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler

__all__ = ["Sender"]


class Sender:
    """Sends messages on ``conn`` from a daemon thread; the thread owns ``conn`` from :meth:`finish` on
    and closes it when it ends. ``on_broken`` runs on ``loop`` when a send fails (the child is gone)."""

    def __init__(
        self, conn: Connection, loop: asyncio.AbstractEventLoop, on_broken: Callable[[], None]
    ) -> None:
        self._conn = conn
        self._loop = loop
        self._on_broken = on_broken
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name="ctxutil-evaluator-sender", daemon=True)
        self._thread.start()

    def send(self, message: object) -> None:
        """Pickle ``message`` here (the caller's thread) and queue it; never blocks."""
        self._outbox.put(bytes(ForkingPickler.dumps(message)))

    def finish(self) -> None:
        """Send nothing more: the thread ends after what is queued (at once when the pipe broke) and closes
        the connection."""
        self._outbox.put(None)

    def join(self, timeout_s: float) -> None:
        self._thread.join(max(0.0, timeout_s))

    def _run(self) -> None:
        try:
            while (data := self._outbox.get()) is not None:
                try:
                    self._conn.send_bytes(data)
                except (OSError, ValueError):  # the child died or was killed: the pipe is broken
                    with contextlib.suppress(RuntimeError):  # the loop has closed
                        self._loop.call_soon_threadsafe(self._on_broken)
                    while self._outbox.get() is not None:  # drop the rest until finish()
                        pass
                    return
        finally:
            with contextlib.suppress(OSError):
                self._conn.close()
