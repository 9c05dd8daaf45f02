"""The guard every :class:`~ctxutil_otel.capture.UtilizationCallbackHandler` callback runs under.

A callback never raises into the application (LangChain would log it, or with ``raise_error`` re-raise
it into the chain): :func:`stop_on_exception` catches any ``Exception`` and reports it to the handler's
``_failed(callback_name, exc)`` (counted per callback, logged once at debug level: its class and where,
never its message, which may quote the application's data), in the manner of
OpenInference's ``stop_on_exception``. :func:`on_tracked_run` adds the look-up most callbacks start with:
the root run that ``run_id`` belongs to, the callback being skipped (one lock-free ``dict.get``) when the
handler does not track that run.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast
from uuid import UUID

from .._error_origin import error_origin
from .._fork import reinit_after_fork
from ._runs import RootRun

__all__ = ["ErrorCounter", "Guarded", "on_tracked_run", "stop_on_exception"]

_log = logging.getLogger("ctxutil_otel.capture")
_F = TypeVar("_F", bound=Callable[..., None])


class ErrorCounter:
    """Unexpected errors by callback name; the first of each name is logged at debug level."""

    def __init__(self) -> None:
        self._errors: dict[str, int] = {}
        self._lock = threading.Lock()
        reinit_after_fork(self._new_lock)

    def _new_lock(self) -> None:
        self._lock = threading.Lock()

    def __call__(self, callback: str, exc: BaseException) -> None:
        with self._lock:
            first = callback not in self._errors
            self._errors[callback] = self._errors.get(callback, 0) + 1
        if first:  # the class and where, never the message: a user's object may have raised it
            _log.debug(
                "ctxutil-otel: error in %s: %s (further ones are only counted)", callback, error_origin(exc)
            )

    def snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self._errors)


class Guarded(Protocol):
    """What the decorators need of the handler."""

    def _failed(self, callback: str, exc: BaseException) -> None: ...

    def _root_of(self, run_id: UUID | None) -> RootRun | None: ...


def stop_on_exception(method: _F) -> _F:
    """Run the callback; an ``Exception`` from it is reported to ``self._failed`` under its name."""
    name = method.__name__

    @functools.wraps(method)
    def guarded(self: Guarded, *args: Any, **kwargs: Any) -> None:
        try:
            method(self, *args, **kwargs)
        except Exception as exc:
            self._failed(name, exc)

    return cast("_F", guarded)


def on_tracked_run(method: Callable[..., None]) -> Callable[..., None]:
    """As :func:`stop_on_exception`, for a callback about an existing run (LangChain passes its
    ``run_id`` by keyword): the method is called with the :class:`RootRun` that ``run_id`` belongs to
    after ``self``, and not at all when the handler does not track ``run_id``."""
    name = method.__name__

    @functools.wraps(method)
    def guarded(self: Guarded, *args: Any, **kwargs: Any) -> None:
        root = self._root_of(kwargs.get("run_id"))
        if root is None:
            return
        try:
            method(self, root, *args, **kwargs)
        except Exception as exc:
            self._failed(name, exc)

    return guarded
