"""A child forked while other threads are inside ``on_end`` finishes its spans (issue 10 item 2).

Real parts: the SDK ``TracerProvider`` with :class:`UtilizationSpanProcessor` (no exporter: the SDK's
in-memory exporter has a lock of its own that a fork could catch), the real Evaluator, real ``os.fork``.

To fork at the worst moment every time (not by luck), the processor's clock, which it reads under its
lock, parks a tracing thread there: when armed, the first call made under the lock (any call not made
directly by ``on_end``'s lock-free TTL check) blocks until the parent has forked. The other tracing thread
is then typically waiting for that lock inside ``on_end`` too. Before the fix 12 of 12 children hung in
``span.end()`` on the lock copied locked into them.
"""

from __future__ import annotations

import json
import os
import select
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer

from ctxutil_otel import ContextualUtilization
from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.worker import Evaluator

from ..conftest import RecordingEmitter, RecordingJudge
from .test_processor import chat_attrs, retrieval_attrs

pytestmark = [
    pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork"),
    pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning"),
]

FORKS = 12
_HANG_BOUND_S = 30.0  # a child still running after this is hung (the fixed child needs milliseconds)


class ParkingClock:
    """A monotonic clock (fixed time) that, when armed, parks the first tracing thread calling it under
    the processor's lock until :attr:`release` is set."""

    def __init__(self) -> None:
        self.armed = threading.Event()
        self.parked = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> float:
        if (
            self.armed.is_set()
            and threading.current_thread().name.startswith("tracer")
            and sys._getframe(1).f_code.co_name != "on_end"  # every other caller holds the lock
        ):
            self.armed.clear()
            self.parked.set()
            self.release.wait()
        return 1000.0


def rag_turn(tracer: Tracer, n: int) -> None:
    with tracer.start_as_current_span("request"):
        with tracer.start_as_current_span("retrieval kb", attributes=retrieval_attrs(f"q{n}", f"c{n}")):
            pass
        with tracer.start_as_current_span("chat m", attributes=chat_attrs(f"a{n}")):
            pass


@pytest.fixture
def rig() -> Iterator[tuple[UtilizationSpanProcessor, Tracer, ParkingClock]]:
    clock = ParkingClock()
    evaluator = Evaluator(
        ContextualUtilization(judge=RecordingJudge()),
        emitter=RecordingEmitter(),
        max_evaluations_per_second=0,
    )
    processor = UtilizationSpanProcessor(evaluator, clock=clock)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    yield processor, provider.get_tracer("fork-test"), clock
    clock.release.set()
    provider.shutdown()


def _child(write_fd: int, processor: UtilizationSpanProcessor, tracer: Tracer) -> None:
    """In the forked child: trace two RAG turns, report, exit without running the parent's cleanup."""
    status = 1
    try:
        rag_turn(tracer, -1)
        rag_turn(tracer, -2)
        stats = processor.stats()
        report = {"captured": stats.captured, "pending": processor.pending_traces, "errors": processor.errors}
        os.write(write_fd, json.dumps(report).encode())
        status = 0
    finally:
        os._exit(status)


def _wait_child(pid: int, read_fd: int) -> dict[str, Any]:
    ready, _, _ = select.select([read_fd], [], [], _HANG_BOUND_S)
    if not ready:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        pytest.fail(f"the forked child hung in span.end() for {_HANG_BOUND_S} s")
    data = os.read(read_fd, 4096)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    result: dict[str, Any] = json.loads(data)
    return result


def test_children_forked_while_threads_are_in_on_end_finish_span_end(
    rig: tuple[UtilizationSpanProcessor, Tracer, ParkingClock],
) -> None:
    processor, tracer, clock = rig
    stop = threading.Event()
    turns = [0, 0]

    def trace(worker: int) -> None:
        while not stop.is_set():
            rag_turn(tracer, worker * 1_000_000 + turns[worker])
            turns[worker] += 1

    threads = [threading.Thread(target=trace, args=(w,), name=f"tracer-{w}", daemon=True) for w in (0, 1)]
    for thread in threads:
        thread.start()
    try:
        for _ in range(FORKS):
            clock.release.clear()
            clock.parked.clear()
            clock.armed.set()
            assert clock.parked.wait(_HANG_BOUND_S), "no tracing thread reached the processor's lock"
            read_fd, write_fd = os.pipe()
            pid = os.fork()
            if pid == 0:
                os.close(read_fd)
                _child(write_fd, processor, tracer)
            os.close(write_fd)
            clock.release.set()
            try:
                report = _wait_child(pid, read_fd)
            finally:
                os.close(read_fd)
            # the child's own accounting: its two turns, nothing of the parent's buffered traces
            assert report == {"captured": 2, "pending": 0, "errors": 0}
    finally:
        stop.set()
        clock.release.set()
        for thread in threads:
            thread.join(_HANG_BOUND_S)
    assert not any(thread.is_alive() for thread in threads)
    assert processor.force_flush(30_000)
    stats = processor.stats()
    assert stats.captured == sum(turns) and stats.captured == stats.finished, stats
    assert processor.pending_traces == 0 and processor.errors == 0
