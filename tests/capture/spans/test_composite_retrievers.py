"""The outermost retrieval step is judged (issue 15 item 1, span side).

Real parts: LangChain's composite retrievers from ``langchain-classic`` (contextual compression with a
real ``LLMChainFilter``, multi-query with a fake chat model writing the queries, ensemble, parent-document
over a real ``InMemoryVectorStore``), OpenInference's real ``LangChainInstrumentor`` making the spans, the
real SDK ``TracerProvider`` feeding :class:`UtilizationSpanProcessor`, the real Evaluator and metric.
Rerankers: no LangChain instrumentation emits OpenInference ``RERANKER`` spans (LlamaIndex's does), so
those spans are made by the real SDK tracer with the attribute names of
``openinference-semantic-conventions`` (``SpanAttributes``, ``DocumentAttributes``).

Each test fails before the outermost-step rule: the inner retrievers' chunks were judged next to the
outer retriever's, and model calls inside a retriever (a filter's YES/NO, the multi-query writer) paired
with an inner retrieval into turns of their own.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import pytest
from langchain_classic.retrievers import (
    ContextualCompressionRetriever,
    EnsembleRetriever,
    MultiQueryRetriever,
    ParentDocumentRetriever,
)
from langchain_classic.retrievers.document_compressors import LLMChainFilter
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel, FakeListChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.retrievers import BaseRetriever
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import CharacterTextSplitter
from openinference.instrumentation.langchain import LangChainInstrumentor
from openinference.semconv.trace import (
    DocumentAttributes,
    OpenInferenceSpanKindValues,
    SpanAttributes,
)
from opentelemetry.sdk.trace import TracerProvider

from ctxutil_otel.demo import build_rag_chain
from ctxutil_otel.demo._replay import ReplayChatModel

from ..conftest import FixedRetriever
from .conftest import Harness, play

pytestmark = pytest.mark.filterwarnings("ignore:Calling .text\\(\\) as a method is deprecated")

Make = Callable[..., Harness]
QUESTION = "What are the benefits of green tea?"
ANSWER = "Green tea contains antioxidants called catechins, and these antioxidants reduce inflammation."
BASE = (
    "Green tea contains antioxidants called catechins.",
    "Tea originated in China thousands of years ago.",
    "The antioxidants in green tea reduce inflammation.",
    "Porcelain teapots were first made in Jingdezhen.",
)


@pytest.fixture
def instrument() -> Iterator[Callable[[TracerProvider], None]]:
    instrumentor = LangChainInstrumentor()
    yield lambda provider: instrumentor.instrument(tracer_provider=provider)
    instrumentor.uninstrument()


class KeepIfGreen(BaseChatModel):
    """A real chat model that answers ``YES`` when the document in the prompt mentions green tea, else
    ``NO`` (``LLMChainFilter`` asks it once per document, in parallel, so a replay list would not do)."""

    @property
    def _llm_type(self) -> str:
        return "keep-if-green"

    def _generate(self, messages: list[BaseMessage], stop: Any = None, **kwargs: Any) -> ChatResult:
        prompt = str(messages[-1].content)
        document = prompt.split("> Context:", 1)[-1].split("> Relevant", 1)[0]
        verdict = "YES" if "green tea" in document.lower() else "NO"
        return ChatResult(generations=[ChatGeneration(message=AIMessage(content=verdict))])


def _rag(retriever: BaseRetriever) -> None:
    """Run the demo's LCEL chain (retriever | prompt | model | parser) over ``retriever``."""
    chain = build_rag_chain(retriever, ReplayChatModel(answers={QUESTION: ANSWER}))
    assert chain.invoke(QUESTION) == ANSWER


def _judged(h: Harness) -> list[tuple[str, str, list[str]]]:
    """The one turn's (query, answer, chunks) as the judge got them; also checks that the interaction
    holds exactly those chunks (the metric judges identical chunks once, so the judge's view alone
    would not show an inner retriever's copies)."""
    stats = h.flush()
    assert stats.captured == 1 and stats.evaluated + stats.not_applicable == 1, stats
    assert h.processor.pending_traces == 0 and h.processor.errors == 0
    ((_, _, chunks),) = h.judge.calls
    (interaction,) = h.interactions
    assert [c.page_content for c in interaction.documents] == chunks  # type: ignore[attr-defined]
    return h.judge.calls


def _texts(documents: Sequence[Document]) -> list[str]:
    return [d.page_content for d in documents]


def test_contextual_compression_judges_the_compressed_documents(
    make_harness: Make, instrument: Callable[[TracerProvider], None]
) -> None:
    retriever = ContextualCompressionRetriever(
        base_compressor=LLMChainFilter.from_llm(KeepIfGreen()), base_retriever=FixedRetriever(texts=BASE)
    )
    kept = _texts(retriever.invoke(QUESTION))  # uninstrumented: what the prompt will get
    assert kept == [BASE[0], BASE[2]]
    h = make_harness()
    instrument(h.provider)
    _rag(retriever)
    assert _judged(h) == [(QUESTION, ANSWER, kept)]  # not the base retriever's four, no filter turns


def test_multi_query_judges_the_unique_union(
    make_harness: Make, instrument: Callable[[TracerProvider], None]
) -> None:
    base = FixedRetriever(
        by_query={"What does green tea contain?": BASE[:2], "How does green tea affect health?": BASE[2:3]}
    )
    writer = FakeListChatModel(responses=["What does green tea contain?\nHow does green tea affect health?"])
    retriever = MultiQueryRetriever.from_llm(retriever=base, llm=writer)
    union = _texts(retriever.invoke(QUESTION))
    assert union == list(BASE[:3])
    h = make_harness()
    instrument(h.provider)
    _rag(retriever)
    assert _judged(h) == [(QUESTION, ANSWER, union)]


def test_ensemble_judges_the_fused_list(
    make_harness: Make, instrument: Callable[[TracerProvider], None]
) -> None:
    retriever = EnsembleRetriever(
        retrievers=[FixedRetriever(texts=BASE[:2]), FixedRetriever(texts=BASE[2:])], weights=[0.5, 0.5]
    )
    fused = _texts(retriever.invoke(QUESTION))
    assert sorted(fused) == sorted(BASE)
    h = make_harness()
    instrument(h.provider)
    _rag(retriever)
    assert _judged(h) == [(QUESTION, ANSWER, fused)]


def test_parent_document_judges_the_parent_documents(
    make_harness: Make, instrument: Callable[[TracerProvider], None]
) -> None:
    retriever = ParentDocumentRetriever(
        vectorstore=InMemoryVectorStore(DeterministicFakeEmbedding(size=32)),
        docstore=InMemoryStore(),
        child_splitter=CharacterTextSplitter(separator=". ", chunk_size=30, chunk_overlap=0),
        search_kwargs={"k": 2},
    )
    retriever.add_documents(
        [Document(page_content=". ".join(BASE[:2])), Document(page_content=". ".join(BASE[2:]))]
    )
    parents = _texts(retriever.invoke(QUESTION))
    assert parents and all(p in {". ".join(BASE[:2]), ". ".join(BASE[2:])} for p in parents)
    h = make_harness()
    instrument(h.provider)
    _rag(retriever)
    assert _judged(h) == [(QUESTION, ANSWER, parents)]


# --- rerankers (OpenInference RERANKER spans) -----------------------------------------------------------


def _documents(prefix: str, texts: Sequence[str]) -> dict[str, Any]:
    return {f"{prefix}.{i}.{DocumentAttributes.DOCUMENT_CONTENT}": t for i, t in enumerate(texts)}


def _retriever(texts: Sequence[str]) -> dict[str, Any]:
    return {
        SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.RETRIEVER.value,
        SpanAttributes.INPUT_VALUE: QUESTION,
        **_documents(SpanAttributes.RETRIEVAL_DOCUMENTS, texts),
    }


def _reranker(inputs: Sequence[str], outputs: Sequence[str]) -> dict[str, Any]:
    return {
        SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.RERANKER.value,
        "reranker.query": QUESTION,
        "reranker.model_name": "cross-encoder/ms-marco-MiniLM-L-6-v2",
        "reranker.top_k": len(outputs),
        **_documents("reranker.input_documents", inputs),
        **_documents("reranker.output_documents", outputs),
    }


def _llm(answer: str) -> dict[str, Any]:
    return {
        SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.LLM.value,
        "llm.input_messages.0.message.role": "user",
        "llm.input_messages.0.message.content": QUESTION,
        "llm.output_messages.0.message.role": "assistant",
        "llm.output_messages.0.message.content": answer,
        SpanAttributes.OUTPUT_VALUE: json.dumps({"generations": [[{"text": answer}]]}),
    }


def _chain() -> dict[str, Any]:
    return {SpanAttributes.OPENINFERENCE_SPAN_KIND: OpenInferenceSpanKindValues.CHAIN.value}


def node(name: str, attributes: dict[str, Any], *children: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "attributes": attributes, "children": children}


def rag(step: dict[str, Any]) -> dict[str, Any]:
    """``rag`` chain span: ``step`` (the retrieval step), then the LLM span."""
    return node("rag", _chain(), step, node("llm", _llm(ANSWER)))


@pytest.mark.parametrize(
    ("tree", "judged"),
    [
        pytest.param(  # CHAIN{RETRIEVER, RERANKER, LLM}: the reranker replaces the retriever's documents
            node(
                "rag",
                _chain(),
                node("retrieve", _retriever(BASE)),
                node("rerank", _reranker(BASE, [BASE[2], BASE[0]])),
                node("llm", _llm(ANSWER)),
            ),
            [BASE[2], BASE[0]],
            id="reranker-after-retriever",
        ),
        pytest.param(  # a compression retriever whose compressor is an instrumented reranker
            rag(
                node(
                    "compression",
                    _retriever([BASE[2]]),
                    node("base", _retriever(BASE)),
                    node("rerank", _reranker(BASE, [BASE[2], BASE[0]])),
                )
            ),
            [BASE[2]],
            id="reranker-inside-retriever",
        ),
        pytest.param(  # a reranking step that runs its own retrievers
            rag(
                node(
                    "rerank",
                    _reranker(BASE, [BASE[0]]),
                    node("a", _retriever(BASE[:2])),
                    node("b", _retriever(BASE[2:])),
                )
            ),
            [BASE[0]],
            id="retrievers-inside-reranker",
        ),
        pytest.param(  # parallel retrievers under a chain still merge
            rag(node("parallel", _chain(), node("a", _retriever(BASE[:2])), node("b", _retriever(BASE[2:])))),
            list(BASE),
            id="parallel-retrievers-merge",
        ),
    ],
)
def test_reranker_and_nested_shapes(make_harness: Make, tree: dict[str, Any], judged: list[str]) -> None:
    h = make_harness()
    play(h.tracer, tree)
    assert _judged(h) == [(QUESTION, ANSWER, judged)]
