"""An error inside ``UtilizationSpanProcessor.on_end`` is counted and logged by its class and where it was
raised, never its message or traceback: a span-like object's own code may quote the application's data.

Real parts: the real processor and Evaluator (a recording judge and emitter from the harness); the span is a
real SDK ``ReadableSpan`` subclass whose ``attributes`` raise, as a lazily built span of another library may.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanContext, TraceFlags
from opentelemetry.util.types import Attributes

from .conftest import Harness

MARKER = "Patient Jane Roe zq9w"


class _LazySpan(ReadableSpan):
    @property
    def attributes(self) -> Attributes:
        raise RuntimeError(MARKER)


def test_an_error_in_on_end_is_counted_and_logged_without_its_message(
    make_harness: Callable[..., Harness], caplog: pytest.LogCaptureFixture
) -> None:
    harness = make_harness()
    span = _LazySpan(name="lazy", context=SpanContext(7, 9, is_remote=False, trace_flags=TraceFlags(1)))
    with caplog.at_level(logging.DEBUG, logger="ctxutil_otel"):
        harness.processor.on_end(span)
        harness.processor.on_end(span)
    assert harness.processor.errors == 2
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # once; then DEBUG
    assert "RuntimeError at " in warnings[0].getMessage() and "_processor.py" in warnings[0].getMessage()
    for record in caplog.records:
        assert "zq9w" not in record.getMessage() and record.exc_info is None
