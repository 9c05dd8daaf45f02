"""Fixtures for the instrumentor tests: real SDK providers with in-memory exporters (not global), and a
guard that every test leaves LangChain's configure hooks as it found them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from langchain_core.tracers import context as tracer_context

from ctxutil_otel.capture import CtxutilInstrumentor
from tests.conftest import unlimited_worker_cpu
from tests.emit.conftest import Telemetry
from tests.emit.conftest import telemetry as telemetry  # re-exported fixture

__all__ = ["Telemetry"]


@pytest.fixture(autouse=True)
def _clean_env_and_hooks(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in list(os.environ):
        if (
            name.upper().startswith("CTXUTIL_")
            or name == "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
        ):
            monkeypatch.delenv(name, raising=False)
    unlimited_worker_cpu(monkeypatch)
    hooks_before = list(tracer_context._configure_hooks)
    yield
    CtxutilInstrumentor().uninstrument()  # a no-op when the test already did
    assert tracer_context._configure_hooks == hooks_before, "the instrumentor left a configure hook behind"
