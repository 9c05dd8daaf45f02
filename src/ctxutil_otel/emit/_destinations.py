"""Where results go, and saying so when that is nowhere ("never a silent nowhere", issue 9).

The OpenTelemetry API hands out no-op providers until the application sets its own (the global
``ProxyTracerProvider`` / ``_ProxyMeterProvider`` / ``ProxyLoggerProvider`` delegate to no-op ones),
and ``OTEL_SDK_DISABLED=true`` makes even the SDK's providers no-ops. Results sent there vanish with
every counter saying ``evaluated``; these helpers find that out and warn once per process.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterable

from opentelemetry import _logs, metrics, trace
from opentelemetry._logs import NoOpLoggerProvider
from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.sdk.environment_variables import OTEL_SDK_DISABLED
from opentelemetry.sdk.trace import SpanLimits
from opentelemetry.trace import NoOpTracerProvider, ProxyTracerProvider

from .._warn_once import warn_once

__all__ = [
    "flush_providers",
    "nowhere",
    "resolved_providers",
    "sdk_disabled",
    "span_attribute_limit",
]

_log = logging.getLogger("ctxutil_otel")

# The API's proxy meter and logger providers (what the globals are until set) are private classes;
# without them only the public no-op providers are recognised.
_NOOP_METER_PROVIDERS: tuple[type, ...] = (NoOpMeterProvider,)
_NOOP_LOGGER_PROVIDERS: tuple[type, ...] = (NoOpLoggerProvider,)
try:
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    _NOOP_METER_PROVIDERS += (_ProxyMeterProvider,)
except ImportError:  # pragma: no cover - a future API without the class
    pass
try:
    from opentelemetry._logs._internal import ProxyLoggerProvider

    _NOOP_LOGGER_PROVIDERS += (ProxyLoggerProvider,)
except ImportError:  # pragma: no cover - a future API without the class
    pass


def sdk_disabled() -> bool:
    """``OTEL_SDK_DISABLED`` is ``true`` (case-insensitive), the SDK's own reading of it."""
    return os.environ.get(OTEL_SDK_DISABLED, "").strip().lower() == "true"


def resolved_providers(
    tracer_provider: trace.TracerProvider | None,
    meter_provider: metrics.MeterProvider | None,
    logger_provider: _logs.LoggerProvider | None,
) -> tuple[trace.TracerProvider, metrics.MeterProvider, _logs.LoggerProvider]:
    """The given providers, the global ones where ``None`` (read now)."""
    return (
        tracer_provider or trace.get_tracer_provider(),
        meter_provider or metrics.get_meter_provider(),
        logger_provider or _logs.get_logger_provider(),
    )


def flush_providers(
    providers: Iterable[object], timeout_millis: int, on_error: Callable[[str, BaseException], None]
) -> bool:
    """``force_flush`` each provider that has one, all within ``timeout_millis``; ``True`` when every one
    flushed in time. A provider that raises is reported as ``force_flush`` and counts as not flushed."""
    deadline = time.monotonic() + timeout_millis / 1000
    ok = True
    for provider in providers:
        flush = getattr(provider, "force_flush", None)
        if flush is None:
            continue
        remaining = max(0, int((deadline - time.monotonic()) * 1000))
        try:
            ok = bool(flush(remaining)) and ok
        except Exception as exc:
            on_error("force_flush", exc)
            ok = False
    return ok


def span_attribute_limit(provider: object) -> int | None:
    """The span attribute count limit of an SDK ``TracerProvider`` (``None``: unlimited); the environment's
    (``OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT`` / ``OTEL_ATTRIBUTE_COUNT_LIMIT``) for any other provider."""
    limits = getattr(provider, "_span_limits", None)  # SDK TracerProvider; not part of the API
    if not isinstance(limits, SpanLimits):
        limits = SpanLimits()
    return limits.max_span_attributes


def nowhere(
    tracer_provider: trace.TracerProvider | None,
    meter_provider: metrics.MeterProvider | None,
    logger_provider: _logs.LoggerProvider | None,
) -> list[str]:
    """The signals (``traces``, ``metrics``, ``logs``) whose provider, given or global, drops everything."""
    tracer, meter, logger = resolved_providers(tracer_provider, meter_provider, logger_provider)
    lost = []
    if isinstance(tracer, (NoOpTracerProvider, ProxyTracerProvider)):
        lost.append("traces")
    if isinstance(meter, _NOOP_METER_PROVIDERS):
        lost.append("metrics")
    if isinstance(logger, _NOOP_LOGGER_PROVIDERS):
        lost.append("logs")
    return lost


def warn_if_nowhere(
    tracer_provider: trace.TracerProvider | None,
    meter_provider: metrics.MeterProvider | None,
    logger_provider: _logs.LoggerProvider | None,
) -> None:
    """Warn once per process when results would go to no-op providers, saying how to fix it."""
    if sdk_disabled():
        warn_once(
            "sdk_disabled",
            "ctxutil-otel: OTEL_SDK_DISABLED=true: evaluation results would go nowhere, so nothing is "
            "evaluated (each captured interaction is counted dropped, reason sdk_disabled). Unset "
            "OTEL_SDK_DISABLED to evaluate.",
        )
        return
    lost = nowhere(tracer_provider, meter_provider, logger_provider)
    if lost:
        warn_once(
            "nowhere:" + ",".join(lost),
            "ctxutil-otel: evaluation results for %s go nowhere: no OpenTelemetry SDK provider was passed "
            "and none is set globally (the API's no-op providers drop everything). Pass tracer_provider=, "
            "meter_provider=, logger_provider= to the handler, span processor or Evaluator, set the global "
            "providers (trace.set_tracer_provider(...), ...) before the first result, or call "
            "ctxutil_otel.configure_telemetry().",
            " and ".join(lost),
        )
