"""A WARNING logged once per key and process, on the ``ctxutil_otel`` logger: for what a setting or the
application's data gets wrong repeatedly (a provider that drops everything, a dimension value of the wrong
type), said once rather than per call. Its lock is fork-safe (a forked child gets a new one: a prefork server
may fork while a request thread holds it)."""

from __future__ import annotations

import logging

from ._fork import ForkSafeLock

__all__ = ["warn_once"]

_log = logging.getLogger("ctxutil_otel")
_warned: set[str] = set()
_warned_lock = ForkSafeLock()


def warn_once(key: str, message: str, *args: object) -> None:
    """Log ``message % args`` at WARNING the first time ``key`` is seen in this process."""
    with _warned_lock:
        if key in _warned:
            return
        _warned.add(key)
    _log.warning(message, *args)
