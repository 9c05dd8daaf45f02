"""Throttled warnings for dropped interactions and for interactions failed ``invalid_input`` (the
application handed the evaluator something it cannot evaluate): at most one message per reason per
interval, carrying the number not logged since (every one is still counted by the engine)."""

from __future__ import annotations

import logging

from .._throttled_log import ThrottledLog

__all__ = ["INVALID_INPUT", "DropLog"]

_log = logging.getLogger("ctxutil_otel.worker")


#: The key of :meth:`DropLog.due` for interactions failed ``invalid_input``.
INVALID_INPUT = "failed invalid_input"


class DropLog(ThrottledLog):
    """A :class:`~ctxutil_otel._throttled_log.ThrottledLog` keyed by drop reason (and
    :data:`INVALID_INPUT`): :meth:`due` runs under the engine's lock, :meth:`log` and
    :meth:`log_invalid` outside it."""

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

    @staticmethod
    def log_invalid(explanation: str, suppressed: int | None) -> None:
        """Log one interaction failed ``invalid_input`` when :meth:`due` said so: a WARNING with the
        result's explanation (it names the field and index, e.g. ``retrieved_content[1]``, never a text),
        no traceback."""
        if suppressed is None:
            return
        _log.warning(
            "ctxutil evaluator: an interaction failed invalid_input: %s (%d more since the last message)",
            explanation,
            suppressed,
        )
