"""The Evaluator and Settings of a capture component, from ``evaluator`` or settings overrides.

Shared by :class:`~ctxutil_otel.capture.UtilizationCallbackHandler` and
:class:`~ctxutil_otel.capture.spans.UtilizationSpanProcessor`, which take the same arguments.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from .._settings import Settings
    from ..worker._evaluator import Evaluator

__all__ = ["CAPTURE_SETTINGS", "resolve_evaluator"]

#: The settings a capture component reads itself (its buffer bounds); all others configure the Evaluator.
CAPTURE_SETTINGS: Final = frozenset({"run_ttl_s", "max_pending_runs", "retrieval_tools", "excluded_tools"})
#: Where results go: passed to the Evaluator a capture component builds (as OpenTelemetry
#: instrumentations take them), never settings.
PROVIDERS: Final = ("tracer_provider", "meter_provider", "logger_provider")


def resolve_evaluator(
    evaluator: Evaluator | None, settings_overrides: Mapping[str, Any], *, owner: str
) -> tuple[Evaluator, Settings]:
    """``(evaluator, settings)`` for a capture component called ``owner`` (e.g. ``"the handler"``).

    Without ``evaluator``: a new Evaluator on ``Settings(**settings_overrides)`` (explicit overrides >
    CTXUTIL_* environment > defaults) emitting to the :data:`PROVIDERS` named in ``settings_overrides``
    (``tracer_provider=``, ``meter_provider=``, ``logger_provider=``; the global ones when absent,
    resolved when first used). With one: that evaluator, and its ``settings`` (or the defaults when it
    has none) with ``settings_overrides`` applied, which may then only name :data:`CAPTURE_SETTINGS`.

    Raises:
        ctxutil_otel._settings.SettingsError: (a ``ValueError``) for an unknown setting or an invalid
            value, naming it.
        TypeError: for evaluator settings or providers passed together with an explicit ``evaluator``.
    """
    from .._settings import Settings

    if evaluator is None:
        from ..worker._evaluator import Evaluator

        overrides = dict(settings_overrides)
        providers = {name: overrides.pop(name) for name in PROVIDERS if name in overrides}
        settings = Settings(**overrides)
        return Evaluator(settings=settings, **providers), settings
    misplaced = sorted(set(settings_overrides) - CAPTURE_SETTINGS)
    if misplaced:
        raise TypeError(
            f"settings {misplaced} configure the Evaluator: pass them to Evaluator(...), or omit "
            f"`evaluator` to let {owner} build one"
        )
    base: Settings | None = getattr(evaluator, "settings", None)
    settings = (base if isinstance(base, Settings) else Settings()).merged(**settings_overrides)
    return evaluator, settings
