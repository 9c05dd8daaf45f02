"""Emission: evaluation results as OpenTelemetry spans, ``gen_ai.evaluation.result`` log records and metrics.

* :class:`Emitter`: one result -> evaluation span (child of and linked to the evaluated span), log record,
  metrics with bounded attributes (DESIGN.md, "Emission (OpenTelemetry)").
* :func:`configure_telemetry`: providers with OTLP (gRPC or HTTP) or console exporters chosen from the
  environment, for the CLI, the demo and examples.
* ``names`` (``from ctxutil_otel.emit import names``): every span, attribute, event and metric name as a
  constant with its source, and the Prometheus form of each metric (``PROMETHEUS_NAMES``, module docstring).

Everything but ``names`` is imported on first access: a capture path that needs only telemetry names
(the span processor skips the evaluator's own spans by name) does not load the SDK's exporters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes
from . import _names as names

if TYPE_CHECKING:
    from ._emitter import Emitter, OutcomeCounts
    from ._exporter_choice import exporter_destinations
    from ._setup import DEFAULT_SERVICE_NAME, TelemetryHandle, configure_telemetry

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "Emitter",
    "OutcomeCounts",
    "TelemetryHandle",
    "configure_telemetry",
    "exporter_destinations",
    "names",
]

_LAZY = {
    "Emitter": "._emitter",
    "OutcomeCounts": "._emitter",
    "DEFAULT_SERVICE_NAME": "._setup",
    "TelemetryHandle": "._setup",
    "configure_telemetry": "._setup",
    "exporter_destinations": "._exporter_choice",
}

__getattr__ = lazy_attributes(__name__, _LAZY)
