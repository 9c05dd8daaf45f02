"""Fixtures for the instrumentor tests: real SDK providers with in-memory exporters (not global), and guards
that every test leaves LangChain's configure hooks, and every module LangChain's classes, as it found them."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.callbacks import BaseCallbackManager
from langchain_core.runnables import Runnable
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


@pytest.fixture(autouse=True, scope="module")
def _langchain_classes_left_as_found() -> Iterator[None]:
    """Every module leaves LangChain's classes unpatched once its fixtures are torn down: an instrumentation
    whose ``uninstrument()`` leaves a wrapper behind (OpenLLMetry's does) makes the tests that run after it
    in the same process (tests/capture, tests/worker) fail or pass by order."""
    classes = (BaseCallbackManager, Runnable)
    before = [dict(vars(cls)) for cls in classes]
    yield
    for cls, was in zip(classes, before, strict=True):
        changed = sorted(k for k in {*was, *vars(cls)} if vars(cls).get(k) is not was.get(k))
        assert not changed, f"{cls.__name__}: {changed} left patched by an instrumentation"
