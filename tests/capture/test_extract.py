"""The extractors on the payload shapes LangChain hands to callbacks (real LangChain message and
output classes)."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.documents import Document
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, SystemMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, Generation, LLMResult

from ctxutil_otel.capture._extract import (
    answer_from_llm_result,
    answer_from_output,
    answer_from_tokens,
    documents_from_output,
    merge_documents,
    query_from_inputs,
    text_of_content,
)


@pytest.mark.parametrize(
    ("inputs", "expected"),
    [
        ("why?", "why?"),
        ({"question": "why?", "query": "other"}, "why?"),
        ({"query": "why?"}, "why?"),
        ({"input": "why?", "chat_history": []}, "why?"),
        ({"q": "why?", "k": 3}, "why?"),
        ({"question": HumanMessage(content="why?")}, "why?"),
        (
            {
                "messages": [
                    SystemMessage(content="be nice"),
                    HumanMessage(content="why?"),
                    AIMessage(content="x"),
                ]
            },
            "why?",
        ),
        ([HumanMessage(content="first"), HumanMessage(content="why?")], "why?"),
        ({"topic": "why?"}, "why?"),  # a single string value
        ({"input": ""}, None),  # the placeholder of a streamed run's start
        ({"topic": "a", "style": "b"}, None),  # ambiguous: no known key
        ("   ", None),
        (42, None),
    ],
)
def test_query_from_inputs(inputs: Any, expected: str | None) -> None:
    assert query_from_inputs(inputs) == expected


def test_text_of_content_keeps_text_parts_only() -> None:
    blocks = ["a", {"type": "text", "text": "b"}, {"type": "image_url", "image_url": {}}, {"text": "c"}]
    assert text_of_content(blocks) == "abc"
    assert text_of_content([{"type": "tool_use", "id": "1"}]) is None
    assert text_of_content("plain") == "plain"
    assert text_of_content(None) is None


def test_answer_from_llm_result_shapes() -> None:
    assert answer_from_llm_result(LLMResult(generations=[[Generation(text="legacy llm")]])) == "legacy llm"
    chat = ChatGeneration(message=AIMessage(content=[{"type": "text", "text": "block text"}]))
    assert answer_from_llm_result(LLMResult(generations=[[chat]])) == "block text"
    chunk = ChatGenerationChunk(message=AIMessageChunk(content="streamed"))
    assert answer_from_llm_result(LLMResult(generations=[[chunk]])) == "streamed"
    empty = ChatGeneration(message=AIMessage(content=""))
    assert answer_from_llm_result(LLMResult(generations=[[empty]])) is None
    assert answer_from_llm_result(LLMResult(generations=[[]])) is None
    assert answer_from_llm_result(LLMResult(generations=[])) is None


def test_answer_from_tokens() -> None:
    assert answer_from_tokens(["Hel", "lo", [{"type": "text", "text": "!"}]]) == "Hello!"
    assert answer_from_tokens(["", [{"type": "tool_call_chunk"}]]) is None


@pytest.mark.parametrize(
    ("outputs", "expected"),
    [
        ("text", "text"),
        (AIMessage(content="message"), "message"),
        ({"answer": "a", "output": "o"}, "a"),
        ({"result": "r", "source_documents": []}, "r"),
        ({"output_text": "t"}, "t"),
        ({"messages": [HumanMessage(content="q"), AIMessage(content="final")]}, "final"),
        ({"context": [], "question": "q"}, None),
        (None, None),
    ],
)
def test_answer_from_output(outputs: Any, expected: str | None) -> None:
    assert answer_from_output(outputs) == expected


def test_documents_from_output_only_takes_documents() -> None:
    docs = [Document(page_content="one"), Document(page_content="two")]
    assert documents_from_output({"result": "r", "source_documents": docs}) == docs
    assert documents_from_output({"context": docs}) == docs
    assert documents_from_output({"context": "a string is not a chunk list"}) is None
    assert documents_from_output({"documents": ["plain", "strings"]}) is None
    assert documents_from_output({"documents": []}) is None
    assert documents_from_output(docs) is None


def test_merge_documents_keeps_slot_order_and_skips_unfinished() -> None:
    a, b, c = (Document(page_content=t) for t in "abc")
    assert merge_documents([[a, b], None, [c], []]) == [a, b, c]
