"""The :class:`~ctxutil_otel.emit.Emitter` the settings configure."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._emitter import Emitter

if TYPE_CHECKING:
    from opentelemetry import _logs, metrics, trace

    from .._settings import Settings

__all__ = ["build_emitter"]


def build_emitter(
    settings: Settings,
    *,
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    logger_provider: _logs.LoggerProvider | None = None,
) -> Emitter:
    """Build the :class:`~ctxutil_otel.emit.Emitter` the settings configure (every argument of
    ``_options.SETTINGS_ARGS``: ``capture_content``, ``application_name``, ``max_content_chars``,
    ``chunk_metadata_keys``, ``dimension_max_values``, ``dimension_max_chars``) on the given providers
    (``None``: the global ones). The environment is not read again."""
    return Emitter(
        tracer_provider=tracer_provider,
        meter_provider=meter_provider,
        logger_provider=logger_provider,
        settings=settings,
    )
