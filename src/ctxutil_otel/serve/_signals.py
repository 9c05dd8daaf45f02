"""Run a :class:`~ctxutil_otel.serve.TraceReceiver` until SIGTERM or SIGINT, then stop it gracefully (the
process lifecycle of ``ctxutil-otel serve``).

Why a wake-up socket and not a wait on an event: a process-directed signal is delivered to any one thread
that does not block it (POSIX), and Python runs its signal handlers on the main thread only, when that
thread next executes bytecode. A main thread blocked in an untimed wait (``threading.Event().wait()``) is
not interrupted when the signal lands on a listener thread, so the handler never runs and the process
ignores SIGTERM. Here the C-level handler, on whatever thread it runs, writes the signal number to a
socket (:func:`signal.set_wakeup_fd`) that the main thread waits on with ``poll``: the main thread wakes
whichever thread the kernel picked. The graceful stop then runs in a helper thread while the main thread
keeps waiting on the same socket, so a second signal exits at once however long the stop takes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any, Final

from .._poll import wait_readable

if TYPE_CHECKING:
    from ._server import TraceReceiver

__all__ = ["serve_until_signal"]

_WATCHED: Final = (signal.SIGTERM, signal.SIGINT)
_STOPPED: Final = b"\0"  # written by the stop thread when done (no signal has number 0)


class _Wakeup:
    """A socket pair: the write end is the signal wake-up fd (and the stop thread's "done"), the main
    thread reads the other end."""

    def __init__(self) -> None:
        self.reader, self.writer = socket.socketpair()
        self.reader.setblocking(False)
        self.writer.setblocking(False)

    def poke(self) -> None:
        with contextlib.suppress(OSError):  # full (the reader wakes anyway) or closed
            self.writer.send(_STOPPED)

    def wait(self) -> bytes:
        """Block until something was written; returns what was (signal numbers, or ``_STOPPED``)."""
        while True:
            wait_readable(self.reader, None)
            try:
                data = self.reader.recv(4096)
            except BlockingIOError:
                continue
            if data:
                return data

    def close(self) -> None:
        self.reader.close()
        self.writer.close()


def serve_until_signal(
    receiver: TraceReceiver, timeout_s: float | None = None, *, ready: Callable[[], None] | None = None
) -> int:
    """Block the main thread until SIGTERM or SIGINT (delivered to any thread of the process), then
    :meth:`TraceReceiver.stop` the receiver gracefully.

    ``ready`` is called once the signal handlers are installed (e.g. to announce the listening ports, so
    that a supervisor that reads the announcement can signal safely). A second signal during the
    shutdown exits the process at once (status ``128 + signal``). Returns ``0`` when the shutdown
    flushed everything in time, ``1`` when the deadline (``timeout_s``, default the
    ``shutdown_timeout_s`` setting) passed first or the final export of the results did not finish: the
    CLI's exit status.

    Raises:
        ValueError: when not called from the main thread (signal handlers can only be set there).
    """
    signals_seen = 0

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal signals_seen
        signals_seen += 1
        if signals_seen >= 2:
            print(f"ctxutil-otel serve: second signal {signum}: exiting now", file=sys.stderr, flush=True)
            os._exit(128 + signum)

    wakeup = _Wakeup()
    previous: dict[int, Any] = {}
    previous_fd = signal.set_wakeup_fd(wakeup.writer.fileno(), warn_on_full_buffer=False)
    try:
        for watched in _WATCHED:
            previous[watched] = signal.signal(watched, on_signal)
        if ready is not None:
            ready()
        signum = _first_watched_signal(wakeup)
        name = signal.Signals(signum).name
        print(f"ctxutil-otel serve: {name}: stopping (flushing evaluations)", file=sys.stderr, flush=True)
        ok = _stop_while_watching(receiver, timeout_s, wakeup)
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        signal.set_wakeup_fd(previous_fd)
        wakeup.close()
    return 0 if ok else 1


def _first_watched_signal(wakeup: _Wakeup) -> int:
    while True:
        for number in wakeup.wait():
            if number in _WATCHED:
                return number


def _stop_while_watching(receiver: TraceReceiver, timeout_s: float | None, wakeup: _Wakeup) -> bool:
    """``receiver.stop(timeout_s)`` in a helper thread; the main thread keeps waking on signals (a second
    one runs the exit-now handler) until the stop is done. Re-raises what ``stop`` raised."""
    outcome: list[bool] = []
    failure: list[BaseException] = []
    done = threading.Event()

    def stop() -> None:
        try:
            outcome.append(receiver.stop(timeout_s))
        except BaseException as exc:  # handed to the main thread
            failure.append(exc)
        finally:
            done.set()
            wakeup.poke()

    threading.Thread(target=stop, name="ctxutil-serve-stop", daemon=True).start()
    while not done.is_set():
        wakeup.wait()
    if failure:
        raise failure[0]
    return outcome[0]
