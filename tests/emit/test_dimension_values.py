"""Dimension values that must not break or mislead the exposition (issue 12, tester's findings): a lone
surrogate or a control character in a value (LangChain metadata is arbitrary user data) is replaced, so
prometheus_client's ``generate_latest`` still renders the page; the evaluated service's identity follows
``dimension_max_chars``; a number too long for ``dimension_max_chars`` becomes ``_OTHER`` (never a
different, cut number)."""

from __future__ import annotations

import json

import numpy
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families

from ctxutil_otel.capture import Interaction
from ctxutil_otel.emit import Emitter
from ctxutil_otel.emit import names as n
from ctxutil_otel.emit._cardinality import CardinalityLimiter

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, Telemetry, evaluate, make_interaction

TENANT = "ctxutil.metadata.tenant"


def test_a_lone_surrogate_does_not_break_the_prometheus_page() -> None:
    registry = CollectorRegistry()
    provider = MeterProvider(
        metric_readers=[PrometheusMetricReader(registry=registry)], shutdown_on_exit=False
    )
    try:
        emitter = Emitter(meter_provider=provider)
        bad = json.loads('"bad\\ud800"')  # what json.loads makes of user metadata with a lone surrogate
        interaction = Interaction(
            query="q", answer="a", documents=["c"], trace_id=3, dimensions={TENANT: bad}
        )
        emitter.emit(interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
        text = generate_latest(registry).decode()  # raised UnicodeEncodeError before the fix
        samples = [s for f in text_string_to_metric_families(text) for s in f.samples]
        tenants = {s.labels.get("ctxutil_metadata_tenant") for s in samples} - {None}
        assert tenants == {"bad\ufffd"}
    finally:
        provider.shutdown()


def test_control_characters_become_spaces() -> None:
    limiter = CardinalityLimiter()
    out = limiter.bound({"a": "line1\nline2\x00x\x7f\x85y", "b": "t\ud800\udfffz"})
    assert out == {"a": "line1 line2 x  y", "b": "t\ufffd\ufffdz"}
    for value in out.values():
        value.encode("utf-8")  # encodable


def test_a_number_too_long_is_other_not_a_different_number() -> None:
    limiter = CardinalityLimiter(max_chars=16)
    out = limiter.bound({"big": 10**30, "small": 12345, "ratio": 0.5, "flag": True, "text": "x" * 20})
    assert out == {
        "big": n.DIMENSION_OTHER,
        "small": "12345",
        "ratio": "0.5",
        "flag": "True",
        "text": "x" * 16,
    }
    assert limiter.overflowed() == {"big": 1}


def test_the_evaluated_service_follows_dimension_max_chars(telemetry: Telemetry) -> None:
    emitter = telemetry.emitter(dimension_max_chars=10)
    service = {"service.name": "checkout-service-eu-west", "service.namespace": "shop\nfront"}
    interaction = make_interaction(GREEN_TEA, None, service=service)
    emitter.emit(interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
    (point,) = telemetry.points(n.METRIC_CHUNKS_RELEVANT)
    assert point.attributes[n.ATTR_EVALUATED_SERVICE_NAME] == "checkout-s"
    assert point.attributes["ctxutil.evaluated.service.namespace"] == "shop front"


def test_a_nan_or_infinite_number_is_no_value() -> None:
    # float("nan") (a pandas row's missing value) became the dimension value "nan", one series of its own
    # that read as a real tenant; inf became "inf". Not a number is no value: the dimension is absent.
    limiter = CardinalityLimiter()
    values: dict[str, object] = {
        "nan": float("nan"),
        "numpy_nan": numpy.nan,
        "numpy_float32_nan": numpy.float32("nan"),
        "inf": float("inf"),
        "minus_inf": -numpy.inf,
        "ratio": 0.25,
    }
    assert limiter.bound(values) == {"ratio": "0.25"}
    assert limiter.overflowed() == {}
