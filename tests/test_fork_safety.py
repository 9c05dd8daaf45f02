"""Issue 10 item 2, the rest of its class: every lock a component takes is re-created in a forked child.

For each lock, another thread of the parent holds it at the moment of ``os.fork()`` (what happens when a
gunicorn or celery prefork worker forks while the application's threads run); the child then uses the
component. Before ``ctxutil_otel._fork`` was applied to it, each child below hung for ever on that lock.
"""

from __future__ import annotations

import os
import select
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from ctxutil_otel.capture._guard import ErrorCounter
from ctxutil_otel.emit import Emitter
from ctxutil_otel.emit._cardinality import CardinalityLimiter

_BOUND_S = 20.0


@contextmanager
def held(lock: Any) -> Iterator[None]:
    """Hold ``lock`` in another thread for the duration of the block."""
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            release.wait(_BOUND_S)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    assert taken.wait(_BOUND_S)
    try:
        yield
    finally:
        release.set()
        thread.join(_BOUND_S)


def child_finishes(use: Callable[[], object]) -> bool:
    """Fork; the child calls ``use()`` and reports; ``False`` when it did not finish within the bound."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - runs in the child
        status = 1
        try:
            os.close(read_fd)
            use()
            os.write(write_fd, b"ok")
            status = 0
        finally:
            os._exit(status)
    os.close(write_fd)
    ready, _, _ = select.select([read_fd], [], [], _BOUND_S)
    if not ready:
        os.kill(pid, 9)
    data = os.read(read_fd, 8) if ready else b""
    os.close(read_fd)
    os.waitpid(pid, 0)
    return data == b"ok"


def test_error_counter() -> None:
    counter = ErrorCounter()
    with held(counter._lock):  # the request path's error counter (LangChain callbacks)
        assert child_finishes(lambda: counter("on_chain_end", ValueError("x")))


def test_emitter_and_its_observables() -> None:
    reader = InMemoryMetricReader()
    emitter = Emitter(meter_provider=MeterProvider(metric_readers=[reader], shutdown_on_exit=False))
    emitter.observe(lambda: {}, lambda: 0)
    with held(emitter._lock):
        assert child_finishes(lambda: emitter.failures)
    with held(emitter._observables._lock):
        assert child_finishes(lambda: emitter.observe(lambda: {}, lambda: 0))
    with held(emitter._limiter._lock):
        assert child_finishes(
            lambda: emitter._limiter.bound_group("ctxutil.evaluated.service.name", {"x": "a"})
        )


def test_cardinality_limiter() -> None:
    limiter = CardinalityLimiter()
    with held(limiter._lock):
        assert child_finishes(lambda: limiter.bound({"model": "m"}))


@pytest.mark.parametrize("module", ["ctxutil_otel._warn_once"])
def test_module_level_locks(module: str) -> None:
    import importlib

    mod = importlib.import_module(module)
    with held(mod._warned_lock):
        assert child_finishes(lambda: mod.warn_once("fork-test", "a message"))


def test_secret_registry() -> None:
    from ctxutil_otel import _redact

    with held(_redact._lock):
        assert child_finishes(lambda: _redact.register_secret("sk-registered-in-a-forked-child"))


def test_judge_format_negotiation() -> None:
    from ctxutil_otel.judges import _negotiate

    negotiation = _negotiate.negotiation_for("http://127.0.0.1:1/v1", "m")
    with held(_negotiate._registry_lock):
        assert child_finishes(lambda: _negotiate.negotiation_for("http://127.0.0.1:1/v1", "m"))
    with held(negotiation._lock):
        refusal = _negotiate.FeatureRefused(500, "format", "json_schema unsupported")
        fmt = negotiation.format
        assert child_finishes(lambda: negotiation.on_refusal(refusal, fmt, "max_tokens") != "fail")
