"""Which exporters each signal (traces, metrics, logs) gets under the current environment, for
``configure_telemetry`` (``_setup.py``):

1. ``OTEL_{TRACES,METRICS,LOGS}_EXPORTER`` when set: a comma list of ``otlp``, ``console``, ``none``
   (OpenTelemetry SDK environment variables; other values raise ``ValueError``).
2. Otherwise OTLP when ``OTEL_EXPORTER_OTLP_{TRACES,METRICS,LOGS}_ENDPOINT`` or
   ``OTEL_EXPORTER_OTLP_ENDPOINT`` is set; else the console (``console=True``) or nothing
   (``console=False``, quiet mode). This differs from the SDK's own auto-configuration, whose default is
   OTLP to ``localhost``: a demo without a Collector should print, not retry against a closed port.

OTLP transport: ``OTEL_EXPORTER_OTLP_{SIGNAL}_PROTOCOL``, else ``OTEL_EXPORTER_OTLP_PROTOCOL``, else ``grpc``.
``grpc`` selects ``opentelemetry.exporter.otlp.proto.grpc`` (port 4317), ``http/protobuf`` selects
``opentelemetry.exporter.otlp.proto.http`` (port 4318); ``http/json`` is not implemented by the Python
exporters and raises ``ValueError``. The specification (``protocol/exporter.md``, since v1.28) says SDKs
SHOULD default to ``http/protobuf`` unless they already shipped ``grpc`` as the default; the Python SDK did,
and its auto-configuration (``opentelemetry.sdk._configuration``) still maps a bare ``otlp`` to gRPC, so
``grpc`` is the default here too. Endpoint, headers, timeout, compression and certificates are read by the
exporters themselves from the standard ``OTEL_EXPORTER_OTLP_*`` variables.
"""

from __future__ import annotations

import os
from typing import Any

__all__ = [
    "SIGNALS",
    "env_value",
    "exporter_destinations",
    "otlp_exporters",
    "otlp_timeout_from_env",
]

SIGNALS = ("traces", "metrics", "logs")
_PROTOCOLS = {"grpc": "otlp/grpc", "http/protobuf": "otlp/http"}
_KNOWN_EXPORTERS = ("otlp", "console", "none")


def env_value(name: str) -> str | None:
    """The environment variable ``name``, stripped; ``None`` when unset or blank."""
    value = os.environ.get(name, "").strip()
    return value or None


def exporter_destinations(console: bool = True) -> dict[str, tuple[str, ...]]:
    """Where each signal goes under the current environment (rules in the module docstring).

    Returns:
        ``{"traces": (...), "metrics": (...), "logs": (...)}`` with values from ``"otlp/grpc"``,
        ``"otlp/http"``, ``"console"``; an empty tuple for a signal exported nowhere.

    Raises:
        ValueError: naming the variable, for an unknown ``OTEL_*_EXPORTER`` entry or an unsupported
            ``OTEL_EXPORTER_OTLP_*PROTOCOL``.
    """
    out: dict[str, tuple[str, ...]] = {}
    for signal in SIGNALS:
        upper = signal.upper()
        selector = f"OTEL_{upper}_EXPORTER"
        names: list[str]
        configured = env_value(selector)
        if configured is not None:
            names = [n.strip().lower() for n in configured.split(",") if n.strip()]
            unknown = [n for n in names if n not in _KNOWN_EXPORTERS]
            if unknown:
                supported = ", ".join(_KNOWN_EXPORTERS)
                raise ValueError(f"{selector}: unsupported exporter {unknown[0]!r} (supported: {supported})")
            names = [n for n in names if n != "none"]
        elif env_value(f"OTEL_EXPORTER_OTLP_{upper}_ENDPOINT") or env_value("OTEL_EXPORTER_OTLP_ENDPOINT"):
            names = ["otlp"]
        else:
            names = ["console"] if console else []
        destinations: list[str] = []
        for name in dict.fromkeys(names):  # de-duplicate, keep order
            destinations.append(_otlp_destination(upper) if name == "otlp" else name)
        out[signal] = tuple(destinations)
    return out


def otlp_timeout_from_env(signal: str) -> float | None:
    """The user's export timeout for ``signal`` in seconds (``OTEL_EXPORTER_OTLP_{SIGNAL}_TIMEOUT``, else
    ``OTEL_EXPORTER_OTLP_TIMEOUT``); ``None`` when neither is set to a positive number."""
    for variable in (f"OTEL_EXPORTER_OTLP_{signal.upper()}_TIMEOUT", "OTEL_EXPORTER_OTLP_TIMEOUT"):
        raw = env_value(variable)
        if raw is not None:
            try:
                value = float(raw)
            except ValueError:
                return None  # the exporter warns about it and uses its default
            return value if value > 0 else None
    return None


def _otlp_destination(upper_signal: str) -> str:
    for variable in (f"OTEL_EXPORTER_OTLP_{upper_signal}_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"):
        protocol = env_value(variable)
        if protocol is not None:
            if protocol not in _PROTOCOLS:
                raise ValueError(
                    f"{variable}: unsupported OTLP protocol {protocol!r} (supported: grpc, http/protobuf)"
                )
            return _PROTOCOLS[protocol]
    return _PROTOCOLS["grpc"]


def otlp_exporters(destination: str) -> tuple[type[Any], type[Any], type[Any]]:
    """(span, metric, log) exporter classes for ``otlp/grpc`` or ``otlp/http``, imported on demand."""
    try:
        if destination == "otlp/grpc":
            from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter
            from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter
        else:
            from opentelemetry.exporter.otlp.proto.http._log_exporter import (  # type: ignore[assignment]
                OTLPLogExporter,
            )
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import (  # type: ignore[assignment]
                OTLPMetricExporter,
            )
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (  # type: ignore[assignment]
                OTLPSpanExporter,
            )
    except ImportError as exc:  # pragma: no cover - a dependency of the package
        raise ImportError(
            f"{destination} export needs the 'opentelemetry-exporter-otlp' package "
            "(a dependency of ctxutil-otel)"
        ) from exc
    return OTLPSpanExporter, OTLPMetricExporter, OTLPLogExporter
