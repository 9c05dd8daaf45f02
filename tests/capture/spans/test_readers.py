"""Convention readers: attributes of one finished span -> Retrieval / Generation / CHAIN / None.

Attribute dicts are the recorded fixtures (fixtures/*.json, each naming its convention version) or the
conventions' documented shapes written inline; the OpenInference shapes are also produced by the real
instrumentation in test_openinference.py.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from ctxutil_otel.capture.spans._model import (
    CHAIN,
    CONTENT_NOT_CAPTURED,
    MALFORMED,
    REDACTED,
    TRUNCATED,
    Generation,
    Retrieval,
)
from ctxutil_otel.capture.spans._route import read_part

from .conftest import load_fixture

GREEN = "Green tea contains antioxidants called catechins."


def _nodes(node: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    yield node
    for child in node.get("children", ()):
        yield from _nodes(child)


def _span(fixture: str, name: str) -> dict[str, Any]:
    for node in _nodes(load_fixture(fixture)["root"]):
        if node["name"] == name:
            return dict(node["attributes"])
    raise KeyError(name)


# --- OpenInference ----------------------------------------------------------------------------------


def test_openinference_retriever_reads_documents_with_id_score_metadata() -> None:
    record = read_part(
        {
            "openinference.span.kind": "RETRIEVER",
            "input.value": "green tea?",
            "retrieval.documents.1.document.content": "second",
            "retrieval.documents.0.document.content": GREEN,
            "retrieval.documents.0.document.id": 7,
            "retrieval.documents.0.document.score": 0.5,
            "retrieval.documents.0.document.metadata": '{"source": "tea.md"}',
            "retrieval.documents.1.document.metadata": "{not json",
        }
    )
    assert isinstance(record, Retrieval) and record.problem is None
    assert record.query == "green tea?"
    assert record.chunks is not None
    assert [c.page_content for c in record.chunks] == [GREEN, "second"]
    first, second = record.chunks
    assert (first.id, first.score, first.metadata) == ("7", 0.5, {"source": "tea.md"})
    assert (second.id, second.score, second.metadata) == (None, None, None)  # bad metadata: chunk kept


def test_openinference_json_input_query_and_empty_retrieval() -> None:
    record = read_part(
        {
            "openinference.span.kind": "RETRIEVER",
            "input.value": '{"query": "green tea?"}',
            "input.mime_type": "application/json",
            "output.value": '{"documents": []}',
        }
    )
    assert isinstance(record, Retrieval)
    assert (record.query, record.chunks, record.problem) == ("green tea?", (), None)


@pytest.mark.parametrize(
    ("attributes", "problem"),
    [
        # OPENINFERENCE_HIDE_OUTPUTS: the instrumentation writes __REDACTED__
        (
            {"retrieval.documents.0.document.content": REDACTED, "output.value": REDACTED},
            CONTENT_NOT_CAPTURED,
        ),
        # documents not recorded at all: cannot tell "nothing retrieved" from "not captured"
        ({}, CONTENT_NOT_CAPTURED),
        # document 0 lost to the attribute count limit
        (
            {"retrieval.documents.1.document.content": "b", "retrieval.documents.2.document.content": "c"},
            TRUNCATED,
        ),
        ({"retrieval.documents.0.document.content": 42}, MALFORMED),
    ],
)
def test_openinference_retriever_content_problems(attributes: dict[str, object], problem: str) -> None:
    record = read_part({"openinference.span.kind": "RETRIEVER", "input.value": "q", **attributes})
    assert isinstance(record, Retrieval)
    assert (record.chunks, record.problem) == (None, problem)


def test_openinference_llm_message_content_and_contents_forms() -> None:
    plain = read_part(
        {
            "openinference.span.kind": "LLM",
            "llm.input_messages.0.message.role": "system",
            "llm.input_messages.0.message.content": "be brief",
            "llm.input_messages.1.message.role": "user",
            "llm.input_messages.1.message.content": "green tea?",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": "It has catechins.",
        }
    )
    assert plain == Generation("It has catechins.", "openinference", query="green tea?")
    parts = read_part(
        {
            "openinference.span.kind": "LLM",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.contents.0.message_content.type": "text",
            "llm.output_messages.0.message.contents.0.message_content.text": "It has ",
            "llm.output_messages.0.message.contents.1.message_content.type": "image",
            "llm.output_messages.0.message.contents.1.message_content.image.image.url": "http://x/y.png",
            "llm.output_messages.0.message.contents.2.message_content.type": "text",
            "llm.output_messages.0.message.contents.2.message_content.text": "catechins.",
        }
    )
    assert isinstance(parts, Generation) and parts.answer == "It has catechins."


def test_openinference_llm_output_value_fallbacks() -> None:
    langchain = read_part(
        {
            "openinference.span.kind": "LLM",
            "output.value": json.dumps({"generations": [[{"text": "From the LLMResult."}]]}),
            "output.mime_type": "application/json",
        }
    )
    assert isinstance(langchain, Generation) and langchain.answer == "From the LLMResult."
    text = read_part({"openinference.span.kind": "LLM", "output.value": "Plain text answer."})
    assert isinstance(text, Generation) and text.answer == "Plain text answer."
    hidden = read_part({"openinference.span.kind": "LLM", "output.value": REDACTED})
    assert isinstance(hidden, Generation) and (hidden.answer, hidden.problem) == (None, CONTENT_NOT_CAPTURED)
    broken = read_part(
        {
            "openinference.span.kind": "LLM",
            "output.value": '{"generations": [[',
            "output.mime_type": "application/json",
        }
    )
    assert isinstance(broken, Generation) and (broken.answer, broken.problem) == (None, MALFORMED)


def test_openinference_reranker_chain_and_other_kinds() -> None:
    reranker = read_part(
        {
            "openinference.span.kind": "RERANKER",
            "reranker.query": "green tea?",
            "reranker.input_documents.0.document.content": "dropped by the reranker",
            "reranker.output_documents.0.document.content": GREEN,
            "reranker.output_documents.0.document.score": 3.5,
        }
    )
    assert isinstance(reranker, Retrieval) and reranker.reranked
    assert reranker.chunks is not None and [c.page_content for c in reranker.chunks] == [GREEN]
    assert read_part({"openinference.span.kind": "CHAIN"}) is CHAIN
    assert read_part({"openinference.span.kind": "AGENT"}) is CHAIN
    for kind in ("EMBEDDING", "TOOL", "PROMPT", "EVALUATOR", "GUARDRAIL", "nonsense", 3):
        assert read_part({"openinference.span.kind": kind}) is None


# --- OpenTelemetry GenAI ------------------------------------------------------------------------------


def test_genai_fixture_retrieval_and_chat() -> None:
    expected = load_fixture("genai_rag_turn.json")["expected"]
    retrieval = read_part(_span("genai_rag_turn.json", "retrieval tea-knowledge-base"))
    assert isinstance(retrieval, Retrieval) and retrieval.problem is None and retrieval.chunks is not None
    assert retrieval.query == expected["query"]
    assert [c.page_content for c in retrieval.chunks] == expected["chunks"]
    assert [c.id for c in retrieval.chunks] == expected["ids"]
    assert [c.score for c in retrieval.chunks] == expected["scores"]
    assert retrieval.chunks[3].metadata == {"source": "history.md"}
    chat = read_part(_span("genai_rag_turn.json", "chat gpt-4o-mini"))
    assert chat == Generation(expected["answer"], "genai", query=expected["query"])


def test_genai_legacy_flattened_prompt_and_completion() -> None:
    expected = load_fixture("genai_legacy_completion.json")["expected"]
    chat = read_part(_span("genai_legacy_completion.json", "chat gpt-3.5-turbo"))
    assert chat == Generation(expected["answer"], "genai", query=expected["query"])
    retrieval = read_part(_span("genai_legacy_completion.json", "retrieval tea-knowledge-base"))
    assert isinstance(retrieval, Retrieval) and retrieval.query is None and retrieval.chunks is not None


@pytest.mark.parametrize(
    ("documents", "problem"),
    [
        ('[{"id": "a", "score": 0.9, "content": "x"}, {"id": "b", "sc', MALFORMED),  # truncated JSON
        ("not json at all", MALFORMED),
        ('{"content": "an object, not an array"}', MALFORMED),
        ('[{"id": "a", "score": 0.9}]', CONTENT_NOT_CAPTURED),  # the convention's minimal documents
        ('[{"id": "a", "content": 42}]', MALFORMED),  # content there, not text: as OpenInference reads it
        ('[{"id": "a", "content": {"text": "x"}}]', MALFORMED),
        ('[{"id": "a", "content": "__REDACTED__"}]', CONTENT_NOT_CAPTURED),
        ("[1, 2]", MALFORMED),
        (None, CONTENT_NOT_CAPTURED),  # opt-in attribute not recorded
    ],
)
def test_genai_retrieval_documents_problems(documents: str | None, problem: str) -> None:
    attributes: dict[str, object] = {"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.query.text": "q"}
    if documents is not None:
        attributes["gen_ai.retrieval.documents"] = documents
    record = read_part(attributes)
    assert isinstance(record, Retrieval)
    assert (record.query, record.chunks, record.problem) == ("q", None, problem)


def test_genai_documents_as_string_array_and_text_keys() -> None:
    strings = read_part({"gen_ai.operation.name": "retrieval", "gen_ai.retrieval.documents": ("a", "b")})
    assert isinstance(strings, Retrieval) and strings.chunks is not None
    assert [c.page_content for c in strings.chunks] == ["a", "b"]
    keyed = read_part(
        {
            "gen_ai.operation.name": "retrieval",
            "gen_ai.retrieval.documents": '[{"id": 1, "text": "t"}, {"id": "2", "page_content": "p"}]',
        }
    )
    assert isinstance(keyed, Retrieval) and keyed.chunks is not None
    assert [(c.id, c.page_content) for c in keyed.chunks] == [("1", "t"), ("2", "p")]


def test_genai_generation_problems_and_other_operations() -> None:
    missing = read_part({"gen_ai.operation.name": "chat", "gen_ai.request.model": "m"})
    assert isinstance(missing, Generation) and (missing.answer, missing.problem) == (
        None,
        CONTENT_NOT_CAPTURED,
    )
    malformed = read_part({"gen_ai.operation.name": "text_completion", "gen_ai.output.messages": "[{"})
    assert isinstance(malformed, Generation) and (malformed.answer, malformed.problem) == (None, MALFORMED)
    older_shape = read_part(
        {
            "gen_ai.operation.name": "generate_content",
            "gen_ai.output.messages": '[{"role": "assistant", "content": "x"}]',
        }
    )
    assert isinstance(older_shape, Generation) and older_shape.answer == "x"
    assert read_part({"gen_ai.operation.name": "invoke_workflow"}) is CHAIN
    assert read_part({"gen_ai.operation.name": "invoke_agent"}) is CHAIN
    for operation in ("embeddings", "execute_tool", "create_agent", None, 7):
        assert read_part({"gen_ai.operation.name": operation}) is None


# --- OpenLLMetry ---------------------------------------------------------------------------------------


def test_openllmetry_fixture() -> None:
    expected = load_fixture("openllmetry_rag.json")["expected"]
    retrieval = read_part(_span("openllmetry_rag.json", "retrieve.task"))
    assert isinstance(retrieval, Retrieval) and retrieval.chunks is not None
    assert retrieval.query == expected["query"]
    assert [c.page_content for c in retrieval.chunks] == expected["chunks"]
    assert [c.score for c in retrieval.chunks] == expected["scores"]
    llm = read_part(_span("openllmetry_rag.json", "openai.chat"))
    assert isinstance(llm, Generation) and llm.answer == expected["answer"]
    assert read_part(_span("openllmetry_rag.json", "rag_pipeline.workflow")) is CHAIN
    assert read_part(_span("openllmetry_rag.json", "generate.task")) is CHAIN


def test_openllmetry_langchain_shapes_and_content_off() -> None:
    # The LangChain handler's chain output {"outputs": [...], "kwargs": {...}} with lc-serialised Documents.
    serialised = {
        "lc": 1,
        "type": "constructor",
        "id": ["langchain", "schema", "document", "Document"],
        "kwargs": {"page_content": GREEN, "metadata": {"i": 0}},
    }
    record = read_part(
        {
            "traceloop.span.kind": "task",
            "traceloop.entity.name": "VectorStoreRetriever",
            "traceloop.entity.input": json.dumps(
                {"inputs": {"question": "green tea?"}, "tags": [], "kwargs": {}}
            ),
            "traceloop.entity.output": json.dumps({"outputs": [serialised], "kwargs": {}}),
        }
    )
    assert isinstance(record, Retrieval) and record.chunks is not None
    assert (record.query, [c.page_content for c in record.chunks]) == ("green tea?", [GREEN])
    off = read_part({"traceloop.span.kind": "task", "traceloop.entity.name": "VectorStoreRetriever"})
    assert isinstance(off, Retrieval) and (off.chunks, off.problem) == (None, CONTENT_NOT_CAPTURED)
    truncated = read_part(
        {"traceloop.span.kind": "task", "traceloop.entity.output": '{"documents": [{"page_content": "abc'}
    )
    assert isinstance(truncated, Retrieval) and truncated.problem == MALFORMED
    assert read_part({"traceloop.span.kind": "tool", "traceloop.entity.output": '"x"'}) is None
    assert read_part({"llm.request.type": "embedding"}) is None
    completion = read_part({"llm.request.type": "completion", "llm.completions.0.content": "older key"})
    assert isinstance(completion, Generation) and completion.answer == "older key"


# --- tolerance -----------------------------------------------------------------------------------------


def _every_fixture_span() -> Iterator[dict[str, Any]]:
    for name in ("genai_rag_turn.json", "genai_legacy_completion.json", "openllmetry_rag.json"):
        for node in _nodes(load_fixture(name)["root"]):
            yield dict(node["attributes"])


def test_readers_never_raise_on_truncated_or_retyped_values() -> None:
    """Every string attribute of every fixture cut at several lengths (as an attribute length limit
    does), and every value replaced by odd types: readers return a record or None, never raise."""
    odd_values: list[object] = [
        None,
        0,
        -1,
        1.5,
        True,
        (),
        ("a", 1),
        b"bytes",
        "{",
        "[",
        "null",
        "__REDACTED__",
    ]
    readings = 0
    for attributes in _every_fixture_span():
        for key, value in attributes.items():
            variants: list[object] = list(odd_values)
            if isinstance(value, str):
                variants += [value[:cut] for cut in (0, 1, 7, len(value) // 2, len(value) - 1)]
            for variant in variants:
                record = read_part({**attributes, key: variant})
                assert record is None or record is CHAIN or isinstance(record, (Retrieval, Generation))
                readings += 1
    assert readings > 500
