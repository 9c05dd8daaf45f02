"""Issue 9 item 8: with content capture off (the default) an SRE can still tell WHICH document was ignored:
per chunk the document's id and the configured metadata keys (default ``source``), truncated, never the text.

Real parts: LangChain ``Document`` s through the real callback handler and a real chain; OpenInference-shaped
spans through the real span processor; the real Evaluator, metric, lexical judge and Emitter on SDK providers
with in-memory exporters.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever

from ctxutil_otel import Settings
from ctxutil_otel.capture import Interaction, UtilizationCallbackHandler
from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.emit import names as n
from ctxutil_otel.worker import Evaluator
from tests.capture.conftest import ANSWER, CHUNKS, QUESTION, rag_chain

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, Telemetry, evaluate, make_interaction

IDS = ("doc-catechins", "doc-inflammation", "doc-metabolism", "doc-history")
SOURCES = ("handbook.pdf", "review.html", "blog.md", "history.txt")


def _documents() -> list[Document]:
    return [
        Document(page_content=text, id=doc_id, metadata={"source": src, "author": "A. Writer", "page": i})
        for i, (doc_id, src, text) in enumerate(zip(IDS, SOURCES, CHUNKS, strict=True))
    ]


class DocumentRetriever(BaseRetriever):
    """A real retriever returning ``Document`` s with ids and metadata."""

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun, **kwargs: Any
    ) -> list[Document]:
        return _documents()


def _interaction(telemetry: Telemetry, documents: list[Document]) -> Interaction:
    return make_interaction(parent=telemetry.evaluated_span(), documents=documents)


def _evaluation_attributes(telemetry: Telemetry) -> dict[str, Any]:
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    return dict(span.attributes or {})


def _assert_ids_and_sources_without_text(attrs: dict[str, Any]) -> None:
    for i, (doc_id, source) in enumerate(zip(IDS, SOURCES, strict=True)):
        assert attrs[n.chunk_attribute(i, n.CHUNK_ID)] == doc_id
        assert attrs[f"{n.chunk_attribute(i, n.CHUNK_METADATA)}.source"] == source
        assert f"{n.chunk_attribute(i, n.CHUNK_METADATA)}.author" not in attrs  # not configured
    rendered = repr(attrs)
    for text in (QUESTION, ANSWER, *CHUNKS):
        assert text not in rendered


def test_langchain_documents_ids_and_source_leave_without_content_capture(telemetry: Telemetry) -> None:
    evaluator = Evaluator(emitter=telemetry.emitter(), max_evaluations_per_second=0)
    handler = UtilizationCallbackHandler(evaluator)
    rag_chain(DocumentRetriever()).invoke(QUESTION, config={"callbacks": [handler]})
    assert handler.force_flush(10_000)
    evaluator.shutdown(5_000)
    _assert_ids_and_sources_without_text(_evaluation_attributes(telemetry))


def test_configured_keys_and_their_types(telemetry: Telemetry) -> None:
    documents = _documents()
    documents[1].metadata["page"] = 2.5
    documents[2].metadata["page"] = {"nested": True}  # not a scalar: left out
    documents[3].metadata["source"] = "x" * 1000
    interaction = _interaction(telemetry, documents)
    telemetry.emitter(chunk_metadata_keys=("source", "page")).emit(
        interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1
    )
    attrs = _evaluation_attributes(telemetry)
    page = n.chunk_attribute(0, n.CHUNK_METADATA) + ".page"
    assert attrs[page] == 0 and type(attrs[page]) is int
    assert attrs[n.chunk_attribute(1, n.CHUNK_METADATA) + ".page"] == 2.5
    assert n.chunk_attribute(2, n.CHUNK_METADATA) + ".page" not in attrs
    long_source = attrs[n.chunk_attribute(3, n.CHUNK_METADATA) + ".source"]
    assert len(long_source) == n.CHUNK_LABEL_MAX_CHARS and long_source.endswith("…")


def test_a_metadata_value_that_is_the_chunk_text_is_never_emitted(telemetry: Telemetry) -> None:
    documents = _documents()
    documents[0].metadata["text"] = documents[0].page_content
    interaction = _interaction(telemetry, documents)
    telemetry.emitter(chunk_metadata_keys=("text",)).emit(
        interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1
    )
    assert CHUNKS[0] not in repr(_evaluation_attributes(telemetry))


def test_empty_keys_turn_ids_and_metadata_off(telemetry: Telemetry) -> None:
    interaction = _interaction(telemetry, _documents())
    telemetry.emitter(chunk_metadata_keys=()).emit(interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
    attrs = _evaluation_attributes(telemetry)
    chunk_keys = [k for k in attrs if k.startswith(n.ATTR_CHUNK_PREFIX + ".")]
    assert not [k for k in chunk_keys if k.endswith(f".{n.CHUNK_ID}") or f".{n.CHUNK_METADATA}." in k]
    assert attrs[n.chunk_attribute(0, n.CHUNK_INDEX)] == 0


def test_setting_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CTXUTIL_CHUNK_METADATA_KEYS", raising=False)
    assert Settings().chunk_metadata_keys == ("source",)
    assert Settings(chunk_metadata_keys=["title", "source", "title"]).chunk_metadata_keys == (
        "title",
        "source",
    )
    monkeypatch.setenv("CTXUTIL_CHUNK_METADATA_KEYS", "source, page")
    assert Settings().chunk_metadata_keys == ("source", "page")
    monkeypatch.setenv("CTXUTIL_CHUNK_METADATA_KEYS", "")
    assert Settings().chunk_metadata_keys == ()
    assert Settings(chunk_metadata_keys=["source"]).chunk_metadata_keys == ("source",)  # argument wins


def test_settings_reach_the_emitter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CTXUTIL_CHUNK_METADATA_KEYS", "title")
    evaluator = Evaluator()
    try:
        assert evaluator.emitter.chunk_metadata_keys == ("title",)  # type: ignore[attr-defined]
    finally:
        evaluator.shutdown(1_000)


def test_span_processor_reads_openinference_document_ids_and_metadata(telemetry: Telemetry) -> None:
    """OpenInference retriever spans carry ``retrieval.documents.{i}.document.id`` / ``.metadata`` (JSON)."""
    evaluator = Evaluator(emitter=telemetry.emitter(), max_evaluations_per_second=0)
    processor = UtilizationSpanProcessor(evaluator)
    telemetry.tracer_provider.add_span_processor(processor)
    tracer = telemetry.tracer_provider.get_tracer("tests.openinference")
    with tracer.start_as_current_span("RetrievalQA", attributes={"openinference.span.kind": "CHAIN"}):
        retriever_attrs: dict[str, Any] = {"openinference.span.kind": "RETRIEVER", "input.value": QUESTION}
        for i, (doc_id, source, text) in enumerate(zip(IDS, SOURCES, CHUNKS, strict=True)):
            prefix = f"retrieval.documents.{i}.document"
            retriever_attrs[f"{prefix}.content"] = text
            retriever_attrs[f"{prefix}.id"] = doc_id
            retriever_attrs[f"{prefix}.metadata"] = json.dumps({"source": source, "author": "A. Writer"})
        with tracer.start_as_current_span("retriever", attributes=retriever_attrs):
            pass
        llm_attrs = {
            "openinference.span.kind": "LLM",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": ANSWER,
        }
        with tracer.start_as_current_span("ChatModel", attributes=llm_attrs):
            pass
    assert processor.force_flush(10_000)
    evaluator.shutdown(5_000)
    assert evaluator.stats().evaluated == 1
    _assert_ids_and_sources_without_text(_evaluation_attributes(telemetry))
