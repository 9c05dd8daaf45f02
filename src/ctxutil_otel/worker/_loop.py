"""The worker thread's asyncio loop: run a coroutine to its end, then cancel and await what is left, and
wake a loop from another thread without failing when it has already closed."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Coroutine
from typing import Any

__all__ = ["call_soon", "run_loop"]

_log = logging.getLogger("ctxutil_otel.worker")


def run_loop(main: Coroutine[Any, Any, None], *, before_close: Callable[[], None]) -> None:
    """Run ``main`` on a new event loop in this thread until it ends or is cancelled; cancel and await the
    tasks still running, then call ``before_close()`` (the loop still open: it may remove readers) and
    close the loop. Never raises (an unexpected error is logged)."""
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(main)
    except asyncio.CancelledError:
        pass  # shutdown cancelled the dispatcher
    except BaseException:  # pragma: no cover - a bug in the engine; never crash silently
        _log.exception("ctxutil evaluator worker stopped unexpectedly")
    finally:
        try:
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            try:
                before_close()
            finally:
                loop.close()


def call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], object]) -> None:
    """``loop.call_soon_threadsafe(callback)``, a no-op once the loop is closed (the worker stopped)."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)
