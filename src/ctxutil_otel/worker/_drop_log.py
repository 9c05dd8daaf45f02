"""Throttled warnings for dropped interactions: at most one message per reason per interval, carrying
the number of drops not logged since (every drop is still counted by the engine)."""

from __future__ import annotations

import logging

from .._throttled_log import ThrottledLog

__all__ = ["DropLog"]

_log = logging.getLogger("ctxutil_otel.worker")


class DropLog(ThrottledLog):
    """A :class:`~ctxutil_otel._throttled_log.ThrottledLog` keyed by drop reason: :meth:`due` runs under
    the engine's lock and :meth:`log` outside it."""

    __slots__ = ()

    @staticmethod
    def log(reason: str, suppressed: int | None) -> None:
        """Log one drop of ``reason`` when :meth:`due` said so (``suppressed`` not ``None``); a rate-cap
        refusal is INFO (working as configured), the others WARNING."""
        if suppressed is None:
            return
        level = logging.INFO if reason == "rate_limited" else logging.WARNING
        _log.log(
            level,
            "ctxutil evaluator dropped an interaction (reason %s; %d more since the last message)",
            reason,
            suppressed,
        )
