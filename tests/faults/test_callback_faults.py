"""Fault injection on the callback path (issue 10): many threads and asyncio tasks run mixed LangChain
shapes through one handler while the judge server misbehaves and the run table evicts.

Real parts: LangChain runnables (LCEL, ``with_fallbacks``, ``ContextualCompressionRetriever``, a LangGraph
graph whose node hands the handler to its retriever explicitly, sync and async streams broken off
early), the real :class:`~ctxutil_otel.worker.Evaluator` and :class:`~ctxutil_otel.emit.Emitter` on
OpenTelemetry SDK providers with in-memory exporters and reader, and the real ``OpenAIJudge`` talking
HTTP to the local OpenAI-compatible server of ``tests/support``, which answers in turn 429, 500, a body
that is not JSON, a reply slower than the judge's timeout, and valid verdicts. ``max_pending_runs`` is
small, so roots are evicted before and after their first retrieval.

After the load: every root call is counted exactly once (``captured`` = calls = sum of outcomes), every
worker thread and task finished, the evaluator shuts down in time and leaves no thread behind, and no
query, answer or chunk text is in any span, log record or metric (content capture off).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor, wait
from itertools import count
from typing import Any, TypedDict
from uuid import UUID

import pytest
from langchain_classic.retrievers import ContextualCompressionRetriever
from langchain_core.callbacks import BaseCallbackHandler, Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxutil_otel import ContextualUtilization
from ctxutil_otel.capture import UtilizationCallbackHandler
from ctxutil_otel.emit import Emitter
from ctxutil_otel.judges import OpenAIJudge
from ctxutil_otel.worker._evaluator import Evaluator
from tests.capture.conftest import ANSWER, CHUNKS, FixedRetriever, rag_chain
from tests.support.openai_server import (
    OpenAICompatServer,
    RecordedRequest,
    Reply,
    error_reply,
    verdict_handler,
)

THREADS = 8
PER_THREAD = 12
TASKS = 48
WAIT_S = 60.0
SECRET_WORDS = "Zanzibar"  # in every query: must never reach telemetry without content capture


class _Broken(RuntimeError):
    pass


def _boom(_: Any) -> Any:
    raise _Broken("generation failed")


class _KeepTwo(BaseDocumentCompressor):
    def compress_documents(
        self, documents: Any, query: str, callbacks: Callbacks | None = None
    ) -> list[Document]:
        return list(documents)[:2]


class _RootEnded(BaseCallbackHandler):
    """Counts root runs that ended or failed (placed after our handler: we have seen them by then)."""

    run_inline = True

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.ended = 0
        self.all_ended = threading.Event()
        self.expected = -1

    def _root_done(self, parent_run_id: UUID | None) -> None:
        if parent_run_id is None:
            with self.lock:
                self.ended += 1
                if self.ended == self.expected:
                    self.all_ended.set()

    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self._root_done(parent_run_id)

    def on_chain_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self._root_done(parent_run_id)


def _faulty_judge_server() -> OpenAICompatServer:
    """Answers in turn: 429, 500, not JSON, slower than the judge timeout, then valid verdicts x2."""
    turn = count()
    valid = verdict_handler()

    def handler(request: RecordedRequest) -> Reply:
        step = next(turn) % 6
        if step == 0:
            return error_reply(429, f"slow down {SECRET_WORDS}", headers={"Retry-After": "0"})
        if step == 1:
            return error_reply(500, "internal error")
        if step == 2:
            return Reply(body="<html>not json</html>")
        if step == 3:
            return Reply(body=None, delay_s=2.0)
        return valid(request)

    return OpenAICompatServer(handler)


class _State(TypedDict, total=False):
    question: str
    context: list[Document]
    answer: str


def _graph(handler: UtilizationCallbackHandler) -> Runnable[Any, Any]:
    from langgraph.graph import END, START, StateGraph

    retriever = FixedRetriever()
    model = FakeListChatModel(responses=[ANSWER])

    def retrieve(state: _State) -> _State:
        return {"context": retriever.invoke(state["question"], config={"callbacks": [handler]})}

    def generate(state: _State) -> _State:
        return {"answer": str(model.invoke(f"{state['context']} {state['question']}").content)}

    graph = StateGraph(_State)
    graph.add_node("retrieve", retrieve)
    graph.add_node("generate", generate)
    graph.add_edge(START, "retrieve")
    graph.add_edge("retrieve", "generate")
    graph.add_edge("generate", END)
    return graph.compile()


def _streaming() -> Runnable[Any, str]:
    return rag_chain(model=GenericFakeChatModel(messages=iter([AIMessage(content=ANSWER)] * 1000)))


@pytest.fixture
def providers() -> Iterator[
    tuple[TracerProvider, InMemorySpanExporter, InMemoryLogRecordExporter, InMemoryMetricReader, Emitter]
]:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    logs = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]
    logger_provider = LoggerProvider()
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(logs))
    reader = InMemoryMetricReader()
    meter_provider = MeterProvider(metric_readers=[reader])
    emitter = Emitter(
        tracer_provider=tracer_provider, meter_provider=meter_provider, logger_provider=logger_provider
    )
    yield tracer_provider, spans, logs, reader, emitter
    for provider in (tracer_provider, meter_provider, logger_provider):
        provider.shutdown()


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield str(key)
            yield from _strings(item)
    elif value is not None:
        yield str(value)


def test_mixed_chains_under_judge_faults_and_evictions_keep_exact_accounting(providers: Any) -> None:
    _, spans, logs, reader, emitter = providers
    threads_before = set(threading.enumerate())
    with _faulty_judge_server() as server:
        judge = OpenAIJudge(
            model="judge-model",
            base_url=server.base_url,
            api_key="test-key",
            timeout_s=0.5,
            max_retries=1,
            deadline_s=3.0,
        )
        evaluator = Evaluator(
            ContextualUtilization(judge=judge),
            emitter=emitter,
            sample_rate=1.0,
            max_evaluations_per_second=0,
            max_queue_size=64,
        )
        handler = UtilizationCallbackHandler(evaluator, max_pending_runs=40)
        ended = _RootEnded()
        callbacks: list[BaseCallbackHandler] = [handler, ended]
        compression = ContextualCompressionRetriever(
            base_compressor=_KeepTwo(), base_retriever=FixedRetriever()
        )
        fallback = (
            {"context": FixedRetriever(), "question": RunnablePassthrough()} | RunnableLambda(_boom)
        ).with_fallbacks([rag_chain()])
        failing = {"context": FixedRetriever(), "question": RunnablePassthrough()} | RunnableLambda(_boom)
        graph = _graph(handler)

        def one_call(kind: int, question: str) -> None:
            config: Any = {"callbacks": callbacks}
            if kind == 0:
                assert rag_chain().invoke(question, config=config) == ANSWER
            elif kind == 1:
                with contextlib.suppress(_Broken):
                    failing.invoke(question, config=config)
            elif kind == 2:
                assert fallback.invoke(question, config=config) == ANSWER
            elif kind == 3:
                stream = _streaming().stream(question, config=config)
                next(stream)
                stream.close()
            elif kind == 4:
                assert rag_chain(compression).invoke(question, config=config) == ANSWER
            else:
                assert graph.invoke({"question": question}, config=config)["answer"] == ANSWER

        def work(thread: int) -> int:
            for i in range(PER_THREAD):
                one_call((thread + i) % 6, f"{SECRET_WORDS} question {thread}-{i} about green tea?")
            return PER_THREAD

        async def one_task(i: int) -> None:
            question = f"{SECRET_WORDS} async question {i} about green tea?"
            config: Any = {"callbacks": callbacks}
            kind = i % 4
            if kind == 0:
                assert await rag_chain().ainvoke(question, config=config) == ANSWER
            elif kind == 1:
                with contextlib.suppress(_Broken):
                    await failing.ainvoke(question, config=config)
            elif kind == 2:
                assert await fallback.ainvoke(question, config=config) == ANSWER
            else:
                stream = _streaming().astream(question, config=config)
                async for _ in stream:
                    break
                await stream.aclose()

        async def tasks() -> None:
            await asyncio.gather(*(one_task(i) for i in range(TASKS)))

        calls = THREADS * PER_THREAD + TASKS
        ended.expected = calls
        with ThreadPoolExecutor(THREADS + 1) as pool:
            futures = [pool.submit(work, thread) for thread in range(THREADS)]
            futures.append(pool.submit(asyncio.run, tasks()))
            done, not_done = wait(futures, timeout=WAIT_S)
            assert not not_done, "a thread or task is still blocked"
            for future in done:
                future.result()
        # An abandoned async stream's root ends in a task LangChain schedules after aclose().
        assert ended.all_ended.wait(WAIT_S), (ended.ended, calls)

        assert handler.force_flush(60_000), "evaluations did not finish"
        stats = handler.stats()
        assert stats.captured == calls, stats
        assert (
            stats.captured
            == stats.finished
            == (
                stats.sampled_out
                + sum(stats.dropped.values())
                + stats.evaluated
                + stats.not_applicable
                + sum(stats.failed.values())
            )
        ), stats
        # Failing chains and broken streams are chain_error, evictions pending_full; nothing else drops.
        assert set(stats.dropped) <= {"chain_error", "pending_full"}, stats
        broken = 2 * (THREADS * PER_THREAD // 6) + 2 * (TASKS // 4)  # failing chains and broken streams
        assert stats.dropped.get("chain_error", 0) + stats.dropped.get("pending_full", 0) >= broken, stats
        assert stats.failed, stats  # the judge faults were counted as failures
        assert stats.evaluated + stats.not_applicable > 0, stats
        assert handler.callback_errors == {}
        assert handler.pending_runs == 0
        assert handler.shutdown(10_000)
    # Our threads (the pool, the asyncio runner, the evaluator's worker) are gone; the test server's
    # request threads (daemon, released at its close) are not ours to check.
    left = [t for t in threading.enumerate() if t not in threads_before and "process_request" not in t.name]
    assert left == [], "threads left behind"

    texts = [SECRET_WORDS, ANSWER, *CHUNKS]
    telemetry: list[str] = []
    for span in spans.get_finished_spans():
        telemetry += [span.name, *_strings(dict(span.attributes or {}))]
        for event in span.events:
            telemetry += list(_strings(dict(event.attributes or {})))
    for record in logs.get_finished_logs():
        telemetry += [*_strings(record.log_record.body), *_strings(dict(record.log_record.attributes or {}))]
    data = reader.get_metrics_data()
    assert data is not None
    telemetry.append(json.dumps(json.loads(data.to_json())))
    assert telemetry
    leaked = [value for value in telemetry if any(text in value for text in texts)]
    assert leaked == []
