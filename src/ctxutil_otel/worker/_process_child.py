"""The process worker's child as the application process sees it: its lifecycle, apart from the facade
that sends it evaluations and accounts for them (``_process.py``).

Spawn it (deaf to SIGINT and SIGTERM from its start: ``_child_entry.py``; without the application's main
module: ``_no_main.py``) and hand it its configuration;
watch its pipe, or stop watching between reads; detach from it when it is lost or closing; kill and reap
it; release its end of the pipe; keep it off ``multiprocessing``'s list of children (whose exit hook would
SIGTERM it, which it ignores, and join it without a deadline): the engine stops it itself, and it ends by
itself when this process dies (``_child.py``'s watchdog).

Writing down the pipe (:class:`Sender`): what the application process sends its child goes through its own
thread, never from the evaluator's event loop. A child whose event loop is blocked (a judge that never
yields) stops reading; once the pipe's buffer (about 200 KB) is full a send would block, and a send on the
evaluator's loop would keep that loop from firing the very timer that kills the hung child. So the loop
only pickles (its CPU stays the one the CPU budget measures) and hands the bytes to this thread; killing
the child breaks the pipe and ends any send still waiting. The queue is bounded by what is in flight: at
most ``max_concurrency`` evaluations, plus the configuration and the stop message.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import multiprocessing.process
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from multiprocessing.process import BaseProcess
from multiprocessing.reduction import ForkingPickler

from ._child_entry import blocked_while_spawning, run_child
from ._no_main import main_module_hidden
from ._pipe import ChildConfig, Request

__all__ = [
    "READ_INTERVAL_S",
    "Child",
    "Sender",
    "detach",
    "forget",
    "kill",
    "launch",
    "new_child",
    "release",
    "stop",
    "unwatch",
    "watch",
]

_log = logging.getLogger("ctxutil_otel.worker")

_KILL_JOIN_S = 1.0
#: While evaluations are in flight the pipe is not watched: what the child sends is read when the next
#: evaluations start (the wake-up the CPU budget paces anyway), or after this many seconds: results are
#: read several at a time, without a wake-up of the worker thread of their own. The result's duration is
#: measured in the child, so the wait is not in it; ``force_flush`` may wait this much longer.
READ_INTERVAL_S = 0.2


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


@dataclass(eq=False)
class Child:
    """One child process and its end of the pipe; ``on_readable(child)`` reads the pipe (the facade's)."""

    process: BaseProcess
    conn: Connection
    loop: asyncio.AbstractEventLoop
    ready: asyncio.Future[bool]  # True once it said hello; False when it died first
    on_readable: Callable[[Child], None]
    sender: Sender | None = None  # writes down the pipe from its own thread (:class:`Sender`)
    lost: bool = False
    outgoing: list[Request] = field(default_factory=list)  # sent together at the end of this loop turn
    reading: bool = False  # the loop watches the pipe (see :func:`unwatch`)
    rearm: asyncio.TimerHandle | None = None
    starting: int = 0  # evaluations waiting for its hello
    failure: str | None = None  # why it could not start, as it said


def new_child(
    context: SpawnContext | ForkServerContext,
    loop: asyncio.AbstractEventLoop,
    on_readable: Callable[[Child], None],
) -> tuple[Child, Connection]:
    """A child not yet started (its process object, our end of the pipe) and the child's end of the pipe,
    for :func:`launch`."""
    parent_conn, child_conn = context.Pipe(duplex=True)
    process = context.Process(
        target=run_child, args=(child_conn,), name="ctxutil-evaluator-child", daemon=True
    )
    return Child(process, parent_conn, loop, loop.create_future(), on_readable), child_conn


def launch(
    child: Child,
    child_conn: Connection,
    *,
    start_method: str,
    config: ChildConfig,
    on_lost: Callable[[Child], None],
) -> None:
    """Start ``child`` (``child_conn``: its end of the pipe, closed here once it has it), send it
    ``config`` and watch its pipe; ``on_lost(child)`` when that fails or, later, when a send finds the
    pipe broken."""
    try:
        with blocked_while_spawning(start_method), main_module_hidden():
            child.process.start()  # deaf to SIGINT and SIGTERM (``_child_entry.py``), without ``__main__``
        forget(child.process)  # ours to stop (close, kill); multiprocessing's exit hook must not join it
        child_conn.close()  # ours: the child's end must close here for its death to reach us as EOF
        child.sender = Sender(child.conn, child.loop, lambda: on_lost(child))
        child.sender.send(config)
        watch(child)
    except Exception:
        _log.exception("ctxutil evaluator: could not start the evaluation child process")
        child_conn.close()
        on_lost(child)


def watch(child: Child) -> None:
    """Watch the pipe (again): its results, its end (EOF when the child dies)."""
    if child.rearm is not None:
        child.rearm.cancel()
        child.rearm = None
    if not child.reading and not child.lost:
        child.loop.add_reader(child.conn.fileno(), child.on_readable, child)
        child.reading = True


def unwatch(child: Child, *, full: bool) -> None:
    """Stop watching the pipe for ``READ_INTERVAL_S`` from now at most (see there); not when the child is
    ``full`` (no evaluation can start before one of its results is read)."""
    if full:
        watch(child)
        return
    if child.reading:
        child.loop.remove_reader(child.conn.fileno())
        child.reading = False
    if child.rearm is not None:
        child.rearm.cancel()
    child.rearm = child.loop.call_later(READ_INTERVAL_S, watch, child)


def detach(child: Child) -> bool:
    """Mark ``child`` lost and stop listening to it (its read-timer, its pipe); ``False`` when it already
    was (the caller has nothing more to do)."""
    if child.lost:
        return False
    child.lost = True
    if child.rearm is not None:
        child.rearm.cancel()
    with contextlib.suppress(Exception):
        child.loop.remove_reader(child.conn.fileno())
    return True


def kill(child: Child, *, unresponsive: bool) -> bool:
    """Reap a detached ``child`` (killed if still alive: at once when ``unresponsive``, else after a
    short wait for its own exit) and release its pipe; whether it had to be killed."""
    process = child.process
    killed = False
    with contextlib.suppress(Exception):
        if not unresponsive:
            process.join(_KILL_JOIN_S)  # it is ending (the pipe closed): its own exit code
        if process.is_alive():
            process.kill()  # also ends a send blocked on its full pipe
            killed = True
        process.join(_KILL_JOIN_S)
    release(child)
    return killed


def stop(child: Child, timeout_s: float) -> None:
    """Ask a detached ``child`` to stop, wait up to ``timeout_s`` seconds, then kill it."""
    if child.sender is not None:
        child.sender.send(("stop",))
    process = child.process
    with contextlib.suppress(Exception):
        process.join(max(0.0, timeout_s))
        if process.is_alive():
            process.kill()
            process.join(_KILL_JOIN_S)
    release(child)
    if child.sender is not None:
        child.sender.join(_KILL_JOIN_S)


def release(child: Child) -> None:
    """Close the pipe: at once without a sender; else its thread closes it once what it holds is sent (or
    the pipe broke)."""
    if child.sender is None:
        with contextlib.suppress(Exception):
            child.conn.close()
    else:
        child.sender.finish()


def forget(process: BaseProcess) -> None:
    """Take ``process`` off ``multiprocessing``'s list of children, whose exit hook terminates (SIGTERM,
    which the child ignores) and joins them without a deadline: the engine stops its child itself, and the
    child ends by itself when this process dies."""
    children = getattr(multiprocessing.process, "_children", None)
    if isinstance(children, set):
        children.discard(process)
