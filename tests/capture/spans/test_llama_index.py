"""LlamaIndex through OpenInference (issue 23 item 3): a query engine and a context chat engine, traced by
the real ``openinference-instrumentation-llama-index`` on a non-global provider, evaluated by the span
processor on the chunks that reached the prompt.

Real parts: ``llama-index-core`` (its ``VectorStoreIndex`` over an in-memory store, its ``MockLLM``, which
answers by echoing its prompt, and ``MockEmbedding``: no network, no model), OpenInference's instrumentor,
the SDK with in-memory exporters, the real span processor and Evaluator with the lexical judge behind a
recorder. Nothing is set on LlamaIndex's global ``Settings``: the models are passed to the index and the
engines, so other tests see none of it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from llama_index.core import Document, VectorStoreIndex
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from openinference.instrumentation.llama_index import LlamaIndexInstrumentor
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ctxutil_otel import ContextualUtilization, UtilizationSpanProcessor
from ctxutil_otel.emit import names as n
from ctxutil_otel.worker import Evaluator
from tests.capture.conftest import RecordingJudge

TEXTS = (
    "Green tea contains antioxidants called catechins.",
    "Paris is the capital of France.",
    "The antioxidants in green tea reduce inflammation.",
)
QUESTION = "What are the benefits of green tea?"


@dataclass
class Rig:
    index: VectorStoreIndex
    processor: UtilizationSpanProcessor
    judge: RecordingJudge
    spans: InMemorySpanExporter

    def judged(self) -> list[tuple[str, str, list[str]]]:
        assert self.processor.force_flush(30_000)
        return self.judge.calls


@pytest.fixture
def rig() -> Iterator[Rig]:
    spans = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    judge = RecordingJudge()
    evaluator = Evaluator(
        ContextualUtilization(judge=judge),
        tracer_provider=provider,
        meter_provider=MeterProvider(),
        logger_provider=LoggerProvider(),
        sample_rate=1.0,
        max_evaluations_per_second=0,
    )
    processor = UtilizationSpanProcessor(evaluator)
    provider.add_span_processor(processor)
    instrumentor = LlamaIndexInstrumentor()
    instrumentor.instrument(tracer_provider=provider)  # OpenInference's own pattern: not the global one
    try:
        documents = [Document(text=text, id_=f"doc-{i}") for i, text in enumerate(TEXTS)]
        index = VectorStoreIndex.from_documents(documents, embed_model=MockEmbedding(embed_dim=8))
        yield Rig(index, processor, judge, spans)
    finally:
        instrumentor.uninstrument()
        processor.shutdown(5_000)
        provider.shutdown()


def _evaluations_in_the_app_trace(rig: Rig) -> int:
    finished = rig.spans.get_finished_spans()
    app_traces = {s.context.trace_id for s in finished if s.name != n.SPAN_EVALUATION}  # type: ignore[union-attr]
    evaluations = [s for s in finished if s.name == n.SPAN_EVALUATION]
    assert all(s.context.trace_id in app_traces for s in evaluations)  # type: ignore[union-attr]
    return len(evaluations)


def test_a_query_engine_is_evaluated_on_the_nodes_in_its_prompt(rig: Rig) -> None:
    engine = rig.index.as_query_engine(llm=MockLLM(), similarity_top_k=2)
    response = engine.query(QUESTION)
    sources = [node.node.get_content() for node in response.source_nodes]
    (call,) = rig.judged()
    query, answer, chunks = call
    assert query == QUESTION
    assert chunks == sources  # the retrieved nodes, in order: what the response synthesizer put in the prompt
    assert all(chunk in answer for chunk in chunks)  # MockLLM echoes its prompt: they reached it
    assert _evaluations_in_the_app_trace(rig) == 1
    assert rig.processor.stats().evaluated == 1


def test_a_context_chat_engine_is_evaluated_once_per_turn(rig: Rig) -> None:
    engine = rig.index.as_chat_engine(chat_mode="context", llm=MockLLM(), similarity_top_k=2)
    first = engine.chat(QUESTION)
    second = engine.chat("And what reduces inflammation?")
    calls = rig.judged()
    assert [query for query, _, _ in calls] == [QUESTION, "And what reduces inflammation?"]
    for (_, answer, chunks), response in zip(calls, (first, second), strict=True):
        assert chunks == [node.node.get_content() for node in response.source_nodes]
        assert all(chunk in answer for chunk in chunks)
    assert _evaluations_in_the_app_trace(rig) == 2
    stats = rig.processor.stats()
    assert (stats.captured, stats.evaluated) == (2, 2)
