"""Fixtures for the instrumentor tests: real SDK providers with in-memory exporters (not global), and a
guard that every test leaves LangChain's configure hooks as it found them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.tracers import context as tracer_context

from ctxutil_otel.capture import CtxutilInstrumentor
from tests.support.telemetry import Telemetry, make_telemetry
from tests.support.telemetry import telemetry as telemetry  # re-exported fixture

__all__ = ["Telemetry", "make_telemetry"]


@pytest.fixture(autouse=True)
def _hooks_left_as_found() -> Iterator[None]:
    """Every test leaves LangChain's configure hooks as it found them (the environment is cleaned
    suite-wide by tests/conftest.py)."""
    hooks_before = list(tracer_context._configure_hooks)
    yield
    CtxutilInstrumentor().uninstrument()  # a no-op when the test already did
    assert tracer_context._configure_hooks == hooks_before, "the instrumentor left a configure hook behind"
