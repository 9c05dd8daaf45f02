"""Fault injection on the span-processor path (issue 10, "a fault-injection suite").

Several threads trace RAG turns through a real ``TracerProvider`` into :class:`UtilizationSpanProcessor`
and the real Evaluator while faults are injected: the judge raises (a 5xx or timeout of a real judge
surfaces as a :class:`~ctxutil_otel.judges.JudgeError`), answers garbage (verdicts that do not match the
chunks), or answers slowly; traces whose root never ends fill the buffer and are evicted (``pending_full``,
then ``ttl_expired`` on a fake clock); and the process forks while a tracing thread is inside ``on_end``.
After every run: captured = sum of outcomes, nothing left buffered, no thread left blocked, the forked
children finished and accounted for their own turns.
"""

from __future__ import annotations

import asyncio
import json
import os
import select
import threading
from collections.abc import Sequence
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer, use_span

from ctxutil_otel import ContextualUtilization, LexicalJudge
from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.judges import ChunkVerdict, JudgeError, JudgeResult
from ctxutil_otel.worker import Evaluator

pytestmark = pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")

THREADS = 4
TURNS = 40  # per thread
_BOUND_S = 60.0  # a hang bound (join, child exit), not a speed assertion


class FaultyJudge:
    """The real LexicalJudge, with faults chosen by the query's turn number: every 3rd raises a
    JudgeError, every 5th answers verdicts that do not match the chunks, every 7th yields first."""

    name = "faulty"
    model: str | None = None

    def __init__(self) -> None:
        self.inner = LexicalJudge()

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        n = int(query.rsplit(" ", 1)[-1])
        if n % 7 == 0:
            await asyncio.sleep(0)
        if n % 3 == 0:
            raise JudgeError("injected: HTTP 503 from the judge server")
        if n % 5 == 0:
            return JudgeResult(verdicts=[ChunkVerdict(index=99, is_relevant=True, is_utilized=True)])
        return await self.inner.judge(query, answer, chunks, reasons=reasons)


class NullEmitter:
    def emit(self, interaction: Any, result: Any, duration_s: float) -> None:
        pass

    def observe(self, *args: Any) -> None:
        pass


class Clock:
    """A fake monotonic clock (seconds) shared by the buffer TTL."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def retrieval(query: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "retrieval",
        "gen_ai.retrieval.query.text": query,
        "gen_ai.retrieval.documents": json.dumps([{"content": f"{query} is answered here"}]),
    }


def chat(answer: str) -> dict[str, Any]:
    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.output.messages": json.dumps(
            [{"role": "assistant", "parts": [{"type": "text", "content": answer}]}]
        ),
    }


def rag_turn(tracer: Tracer, n: int, *, end_root: bool = True) -> None:
    root = tracer.start_span("request")
    with use_span(root, end_on_exit=False):
        with tracer.start_as_current_span("retrieve", attributes=retrieval(f"question {n}")):
            pass
        with tracer.start_as_current_span("generate", attributes=chat(f"question {n} is answered here")):
            pass
    if end_root:
        root.end()


def test_threads_faults_evictions_and_a_fork_keep_the_accounting() -> None:
    clock = Clock()
    evaluator = Evaluator(
        ContextualUtilization(judge=FaultyJudge()),
        emitter=NullEmitter(),
        max_evaluations_per_second=0,
        max_queue_size=64,
    )
    processor = UtilizationSpanProcessor(evaluator, clock=clock, max_pending_runs=8, run_ttl_s=30)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("faults")
    start = threading.Barrier(THREADS + 1)
    midway = threading.Event()
    children: list[tuple[int, int]] = []

    def work(worker: int) -> None:
        start.wait()
        for i in range(TURNS):
            n = worker * 1000 + i
            rag_turn(tracer, n, end_root=i % 4 != 3)  # every 4th root never ends: evicted later
            if worker == 0 and i == TURNS // 2:
                midway.set()

    threads = [
        threading.Thread(target=work, args=(w,), name=f"tracer-{w}", daemon=True) for w in range(THREADS)
    ]
    for thread in threads:
        thread.start()
    start.wait()
    assert midway.wait(_BOUND_S)
    # fork while the other threads are tracing (some of them inside on_end)
    for _ in range(3):
        read_fd, write_fd = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child
            status = 1
            try:
                os.close(read_fd)
                rag_turn(tracer, 999_001)
                os.write(write_fd, str(processor.stats().captured).encode())
                status = 0
            finally:
                os._exit(status)
        os.close(write_fd)
        children.append((pid, read_fd))
    for pid, read_fd in children:
        ready, _, _ = select.select([read_fd], [], [], _BOUND_S)
        if not ready:
            os.kill(pid, 9)
        data = os.read(read_fd, 64) if ready else b""
        os.close(read_fd)
        _, status = os.waitpid(pid, 0)
        assert ready, "a forked child hung"
        assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0 and data == b"1"
    for thread in threads:
        thread.join(_BOUND_S)
    assert not any(thread.is_alive() for thread in threads), "a tracing thread is blocked"

    clock.now += 31  # the never-ended roots still buffered pass the TTL
    assert processor.force_flush(int(_BOUND_S * 1000))
    stats = processor.stats()
    # every turn counted (none vanished in an eviction), each with exactly one outcome
    assert stats.captured == THREADS * TURNS and stats.captured == stats.finished, stats
    assert processor.pending_traces == 0 and processor.errors == 0
    dropped = dict(stats.dropped)
    assert dropped.get("pending_full", 0) > 0 and dropped.get("ttl_expired", 0) > 0, dropped
    assert stats.failed_total > 0 and stats.evaluated + stats.not_applicable > 0, stats
    provider.shutdown()
    assert not evaluator.stats().pending
