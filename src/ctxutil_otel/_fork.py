"""Fork safety: re-create an object's locks (and whatever else a child must not share) after ``os.fork()``.

A forked child has only the thread that called ``fork``; a lock another thread of the parent held at that
moment stays held in the child for ever, and the first ``with lock:`` there deadlocks (gunicorn and celery
prefork workers fork while the application's threads run). The OpenTelemetry SDK's batch processor answers
with ``os.register_at_fork(after_in_child=...)`` holding a weak reference to the processor, so that the hook
neither keeps it alive nor runs for a collected one; every component here does the same through
:func:`reinit_after_fork` (a module-level lock: :class:`ForkSafeLock`).
"""

from __future__ import annotations

import contextlib
import os
import threading
import weakref
from collections.abc import Callable
from types import TracebackType

__all__ = ["ForkSafeLock", "reinit_after_fork"]


def reinit_after_fork(method: Callable[[], object]) -> None:
    """Call the bound ``method`` (e.g. ``self._init_state``) in every forked child while its object lives.

    Holds a weak reference to the object; an exception from ``method`` is swallowed (a hook must not break
    the child's ``fork``). Does nothing on platforms without ``os.register_at_fork``.
    """
    if not hasattr(os, "register_at_fork"):
        return
    weak = weakref.WeakMethod(method)

    def _after_in_child() -> None:
        bound = weak()
        if bound is not None:
            # The child must still start; on an error its state stays as the parent left it.
            with contextlib.suppress(Exception):
                bound()

    os.register_at_fork(after_in_child=_after_in_child)


class ForkSafeLock:
    """A ``threading.Lock`` for module-level state, used as ``with lock:``; a forked child gets a new one
    (another thread of the parent may have held it at the fork)."""

    __slots__ = ("__weakref__", "_lock")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        reinit_after_fork(self._renew)

    def _renew(self) -> None:
        self._lock = threading.Lock()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._lock.release()
