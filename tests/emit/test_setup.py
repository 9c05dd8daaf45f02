"""configure_telemetry: exporter choice from the environment, Resource, globals, flush and shutdown.

OTLP cases only check which exporter class was built (and shut the handle down with nothing buffered):
no network is needed for that; delivery over OTLP is proven end to end elsewhere.
"""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk._logs.export import ConsoleLogRecordExporter
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, InMemoryMetricReader
from opentelemetry.sdk.trace.export import ConsoleSpanExporter

from ctxutil_otel.capture import Interaction
from ctxutil_otel.emit import Emitter, TelemetryHandle, configure_telemetry, exporter_destinations
from ctxutil_otel.emit import names as n

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, evaluate

ENDPOINT = "http://127.0.0.1:9"  # discard port; nothing is exported in these tests


@pytest.fixture
def handles() -> Iterator[list[TelemetryHandle]]:
    made: list[TelemetryHandle] = []
    yield made
    for handle in made:
        assert handle.shutdown(5000)


def _classes(handle: TelemetryHandle) -> tuple[list[type], list[type], list[type]]:
    return (
        [type(e) for e in handle.span_exporters],
        [type(e) for e in handle.metric_exporters],
        [type(e) for e in handle.log_exporters],
    )


def test_without_endpoint_everything_goes_to_the_console(handles: list[TelemetryHandle]) -> None:
    out = io.StringIO()
    handle = configure_telemetry(console_out=out)
    handles.append(handle)
    assert handle.destinations == {"traces": ("console",), "metrics": ("console",), "logs": ("console",)}
    assert _classes(handle) == ([ConsoleSpanExporter], [ConsoleMetricExporter], [ConsoleLogRecordExporter])

    emitter = Emitter(
        tracer_provider=handle.tracer_provider,
        meter_provider=handle.meter_provider,
        logger_provider=handle.logger_provider,
    )
    interaction = Interaction(query="q", answer="a", documents=["c"], trace_id=1)
    emitter.emit(interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
    assert handle.force_flush(5000)
    printed = out.getvalue()
    assert f'"name": "{n.SPAN_EVALUATION}"' in printed
    assert n.EVENT_EVALUATION_RESULT in printed
    assert n.METRIC_EVALUATION_SCORE in printed


def test_quiet_mode_exports_nowhere(handles: list[TelemetryHandle]) -> None:
    handle = configure_telemetry(console=False)
    handles.append(handle)
    assert handle.destinations == {"traces": (), "metrics": (), "logs": ()}
    assert _classes(handle) == ([], [], [])


@pytest.mark.parametrize(
    ("protocol", "expected"),
    [
        (None, ([GrpcSpanExporter], [GrpcMetricExporter], [GrpcLogExporter])),
        ("grpc", ([GrpcSpanExporter], [GrpcMetricExporter], [GrpcLogExporter])),
        ("http/protobuf", ([HttpSpanExporter], [HttpMetricExporter], [HttpLogExporter])),
    ],
)
def test_endpoint_selects_otlp_with_the_protocol_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
    handles: list[TelemetryHandle],
    protocol: str | None,
    expected: tuple[list[type], list[type], list[type]],
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", ENDPOINT)
    if protocol is not None:
        monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
    handle = configure_telemetry(console=False)
    handles.append(handle)
    assert _classes(handle) == expected
    kind = "otlp/http" if protocol == "http/protobuf" else "otlp/grpc"
    assert set(handle.destinations.values()) == {(kind,)}


def test_per_signal_endpoint_and_protocol(
    monkeypatch: pytest.MonkeyPatch, handles: list[TelemetryHandle]
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", ENDPOINT + "/v1/traces")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf")
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
    handle = configure_telemetry(console_out=io.StringIO())
    handles.append(handle)
    assert handle.destinations == {"traces": ("otlp/http",), "metrics": ("console",), "logs": ("console",)}
    assert _classes(handle) == ([HttpSpanExporter], [ConsoleMetricExporter], [ConsoleLogRecordExporter])


def test_signal_exporter_variables_are_honoured(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", ENDPOINT)
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    monkeypatch.setenv("OTEL_LOGS_EXPORTER", "console,otlp")
    assert exporter_destinations() == {
        "traces": ("otlp/grpc",),
        "metrics": (),
        "logs": ("console", "otlp/grpc"),
    }


@pytest.mark.parametrize(
    ("variable", "value"),
    [
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
        ("OTEL_EXPORTER_OTLP_LOGS_PROTOCOL", "carrier-pigeon"),
        ("OTEL_TRACES_EXPORTER", "zipkin"),
    ],
)
def test_unsupported_values_raise_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str, value: str
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", ENDPOINT)
    monkeypatch.setenv(variable, value)
    with pytest.raises(ValueError, match=variable):
        configure_telemetry()


def test_service_name_precedence(monkeypatch: pytest.MonkeyPatch, handles: list[TelemetryHandle]) -> None:
    default = configure_telemetry(console=False)
    monkeypatch.setenv("OTEL_RESOURCE_ATTRIBUTES", "service.name=from-attributes,deployment.environment=ci")
    from_attributes = configure_telemetry(console=False)
    monkeypatch.setenv("OTEL_SERVICE_NAME", "from-env")
    from_env = configure_telemetry(console=False)
    reader = InMemoryMetricReader()
    explicit = configure_telemetry(console=False, service_name="explicit", metric_readers=[reader])
    handles.extend([default, from_attributes, from_env, explicit])

    def name(h: TelemetryHandle) -> object:
        return h.tracer_provider.resource.attributes["service.name"]

    assert name(default) == "ctxutil-otel"
    assert name(from_attributes) == "from-attributes"
    assert from_attributes.tracer_provider.resource.attributes["deployment.environment"] == "ci"
    assert name(from_env) == "from-env"
    assert name(explicit) == "explicit"
    explicit.meter_provider.get_meter("tests").create_counter("c").add(1)
    metrics_data = reader.get_metrics_data()
    assert metrics_data is not None
    assert metrics_data.resource_metrics[0].resource.attributes["service.name"] == "explicit"
    assert explicit.logger_provider.resource.attributes["service.name"] == "explicit"


def test_globals_are_left_alone_by_default(handles: list[TelemetryHandle]) -> None:
    before = trace.get_tracer_provider()
    handle = configure_telemetry(console=False)
    handles.append(handle)
    assert handle.is_global is False
    assert trace.get_tracer_provider() is before
    assert trace.get_tracer_provider() is not handle.tracer_provider


def test_shutdown_flushes_and_is_idempotent() -> None:
    out = io.StringIO()
    handle = configure_telemetry(console_out=out, service_name="svc")
    tracer = handle.tracer_provider.get_tracer("tests")
    tracer.start_span("buffered").end()
    assert out.getvalue() == ""  # batched, not yet exported
    assert handle.shutdown(5000) is True
    assert '"name": "buffered"' in out.getvalue()
    assert handle.shutdown(5000) is True
