"""Run a :class:`~ctxutil_otel.serve.TraceReceiver` until SIGTERM or SIGINT, then stop it gracefully (the
process lifecycle of ``ctxutil-otel serve``)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._server import TraceReceiver

__all__ = ["serve_until_signal"]


class _Stop(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def serve_until_signal(
    receiver: TraceReceiver, timeout_s: float | None = None, *, ready: Callable[[], None] | None = None
) -> int:
    """Block the main thread until SIGTERM or SIGINT, then :meth:`TraceReceiver.stop` it gracefully.

    ``ready`` is called once the signal handlers are installed (e.g. to announce the listening ports, so
    that a supervisor that reads the announcement can signal safely). A second signal during the
    shutdown exits the process at once (status ``128 + signal``). Returns ``0`` when the shutdown
    flushed everything in time, ``1`` when the deadline (``timeout_s``, default the
    ``shutdown_timeout_s`` setting) passed first or an export of the results failed: the CLI's exit
    status. Must run in the main thread.
    """
    watched = (signal.SIGTERM, signal.SIGINT)

    def hurry(signum: int, frame: FrameType | None) -> None:
        print(f"ctxutil-otel serve: second signal {signum}: exiting now", file=sys.stderr, flush=True)
        os._exit(128 + signum)

    def first(signum: int, frame: FrameType | None) -> None:
        for sig in watched:
            signal.signal(sig, hurry)
        raise _Stop(signum)

    previous: dict[int, Any] = {}
    try:
        try:
            for sig in watched:
                previous[sig] = signal.signal(sig, first)
            if ready is not None:
                ready()
            threading.Event().wait()
        except _Stop as stop:
            name = signal.Signals(stop.signum).name
            print(f"ctxutil-otel serve: {name}: stopping (flushing evaluations)", file=sys.stderr, flush=True)
        ok = receiver.stop(timeout_s)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return 0 if ok else 1
