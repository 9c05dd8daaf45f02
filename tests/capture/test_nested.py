"""Nested retrievers: judge the documents of the OUTERMOST retrieval step that feeds the generation.

Real composite retrievers of ``langchain-classic`` (contextual compression with a real document compressor
and with ``LLMChainFilter`` over a fake chat model, multi-query with a fake chat model writing the queries,
ensemble, parent-document over LangChain's ``InMemoryVectorStore``) inside the LCEL RAG chain of the
conftest. The shapes and the rule are in docs/capture.md.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from langchain_classic.retrievers import (
    ContextualCompressionRetriever,
    EnsembleRetriever,
    MultiQueryRetriever,
    ParentDocumentRetriever,
)
from langchain_classic.retrievers.document_compressors import LLMChainFilter
from langchain_core.callbacks import Callbacks
from langchain_core.documents import BaseDocumentCompressor, Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import FakeListChatModel
from langchain_core.runnables import RunnableLambda, RunnablePassthrough
from langchain_core.stores import InMemoryStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_text_splitters import CharacterTextSplitter

from .conftest import ANSWER, CHUNKS, QUESTION, FixedRetriever, Rig, assert_accounted, rag_chain

MakeRig = Callable[..., Rig]

A_CHUNKS = ["Green tea contains antioxidants called catechins.", "Catechins are antioxidants."]
B_CHUNKS = ["The antioxidants in green tea reduce inflammation.", "Green tea may boost metabolism."]


class KeepFirst(BaseDocumentCompressor):
    """A document compressor (the reranker's interface) that keeps the first ``n`` documents."""

    n: int = 2

    def compress_documents(
        self, documents: Sequence[Document], query: str, callbacks: Callbacks | None = None
    ) -> Sequence[Document]:
        return list(documents)[: self.n]


def _texts(documents: Sequence[object]) -> list[str]:
    return [document.page_content for document in documents]  # type: ignore[attr-defined]


def test_contextual_compression_is_judged_on_the_kept_documents(make_rig: MakeRig) -> None:
    rig = make_rig()
    retriever = ContextualCompressionRetriever(
        base_compressor=KeepFirst(n=2), base_retriever=FixedRetriever()
    )
    assert rag_chain(retriever).invoke(QUESTION, config={"callbacks": [rig.handler]}) == ANSWER
    interaction, _ = rig.only()
    # The base retriever returned 4, the compressor kept 2: only those reached the prompt.
    assert _texts(interaction.documents) == list(CHUNKS[:2])
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS[:2]))]
    assert_accounted(rig)


async def test_contextual_compression_async(make_rig: MakeRig) -> None:
    rig = make_rig()
    retriever = ContextualCompressionRetriever(
        base_compressor=KeepFirst(n=2), base_retriever=FixedRetriever()
    )
    assert await rag_chain(retriever).ainvoke(QUESTION, config={"callbacks": [rig.handler]}) == ANSWER
    interaction, _ = rig.only()
    assert _texts(interaction.documents) == list(CHUNKS[:2])
    assert rig.judge.calls == [(QUESTION, ANSWER, list(CHUNKS[:2]))]
    assert_accounted(rig)


def test_llm_filter_inside_the_retriever_is_neither_chunks_nor_answer(make_rig: MakeRig) -> None:
    """``LLMChainFilter`` asks a chat model YES/NO per document (a batch: which two it keeps depends on
    thread order, that it keeps two does not). Its model runs are part of the retrieval: the answer is
    still the generation's."""
    rig = make_rig()
    verdicts = FakeListChatModel(responses=["YES", "NO"])
    retriever = ContextualCompressionRetriever(
        base_compressor=LLMChainFilter.from_llm(verdicts), base_retriever=FixedRetriever()
    )
    kept = retriever.invoke(QUESTION)
    assert len(kept) == 2
    rag_chain(retriever).invoke(QUESTION, config={"callbacks": [rig.handler]})
    interaction, _ = rig.only()
    [(query, answer, chunks)] = rig.judge.calls
    assert _texts(interaction.documents) == chunks
    assert (query, answer, len(chunks)) == (QUESTION, ANSWER, 2)
    assert set(chunks) <= set(CHUNKS)
    assert_accounted(rig)


def test_multi_query_is_judged_on_the_unique_union_once(make_rig: MakeRig) -> None:
    rig = make_rig()
    base = FixedRetriever(
        by_query={"tea antioxidants": A_CHUNKS, "tea inflammation": B_CHUNKS + A_CHUNKS[:1]}
    )
    writer = FakeListChatModel(responses=["tea antioxidants\ntea inflammation"])
    retriever = MultiQueryRetriever.from_llm(retriever=base, llm=writer)
    union = _texts(retriever.invoke(QUESTION))  # the writer replays its one response on every call
    assert sorted(set(union)) == sorted(A_CHUNKS + B_CHUNKS)
    rag_chain(retriever).invoke(QUESTION, config={"callbacks": [rig.handler]})
    interaction, _ = rig.only()
    # Inner retrievals returned 2 + 3 documents; the outer retriever's union is what reached the prompt.
    assert _texts(interaction.documents) == union
    assert rig.judge.calls == [(QUESTION, ANSWER, list(dict.fromkeys(union)))]  # identical ones judged once
    assert_accounted(rig)


def test_ensemble_is_judged_on_the_fused_list(make_rig: MakeRig) -> None:
    rig = make_rig()
    retriever = EnsembleRetriever(
        retrievers=[FixedRetriever(texts=A_CHUNKS), FixedRetriever(texts=B_CHUNKS + A_CHUNKS[:1])],
        weights=[0.3, 0.7],
    )
    fused = _texts(retriever.invoke(QUESTION))
    assert sorted(fused) == sorted(A_CHUNKS + B_CHUNKS)
    rag_chain(retriever).invoke(QUESTION, config={"callbacks": [rig.handler]})
    interaction, _ = rig.only()
    assert _texts(interaction.documents) == fused
    assert rig.judge.calls == [(QUESTION, ANSWER, fused)]
    assert_accounted(rig)


def test_parent_document_retriever_is_judged_on_the_parents(make_rig: MakeRig) -> None:
    rig = make_rig()
    parents = [Document(page_content=" ".join(A_CHUNKS)), Document(page_content=" ".join(B_CHUNKS))]
    retriever = ParentDocumentRetriever(
        vectorstore=InMemoryVectorStore(DeterministicFakeEmbedding(size=16)),
        docstore=InMemoryStore(),
        child_splitter=CharacterTextSplitter(separator=". ", chunk_size=20, chunk_overlap=0),
    )
    retriever.add_documents(parents)
    found = _texts(retriever.invoke(QUESTION))
    assert found and set(found) <= {parent.page_content for parent in parents}
    rag_chain(retriever).invoke(QUESTION, config={"callbacks": [rig.handler]})
    interaction, _ = rig.only()
    assert _texts(interaction.documents) == found
    assert rig.judge.calls == [(QUESTION, ANSWER, found)]
    assert_accounted(rig)


def test_a_reranking_step_in_lcel_is_what_reached_the_prompt(make_rig: MakeRig) -> None:
    """``retriever | rerank`` where the rerank step is a plain runnable returning documents: the step's
    output documents are judged, not the retriever's."""
    rig = make_rig()
    rerank = RunnableLambda(lambda documents: list(reversed(documents))[:2])
    rag_chain(FixedRetriever() | rerank).invoke(QUESTION, config={"callbacks": [rig.handler]})
    interaction, _ = rig.only()
    assert _texts(interaction.documents) == [CHUNKS[3], CHUNKS[2]]
    assert rig.judge.calls == [(QUESTION, ANSWER, [CHUNKS[3], CHUNKS[2]])]
    assert_accounted(rig)


def test_parallel_nested_retrievers_still_merge_their_outermost_steps(make_rig: MakeRig) -> None:
    """Two compression retrievers side by side under one chain: each judged on what it kept, merged."""
    rig = make_rig()
    first = ContextualCompressionRetriever(
        base_compressor=KeepFirst(n=1), base_retriever=FixedRetriever(texts=A_CHUNKS)
    )
    second = ContextualCompressionRetriever(
        base_compressor=KeepFirst(n=1), base_retriever=FixedRetriever(texts=B_CHUNKS)
    )
    prompt_chain = (
        {"context": first, "also": second, "question": RunnablePassthrough()}
        | RunnableLambda(lambda x: f"{x['context']} {x['also']} {x['question']}")
        | FakeListChatModel(responses=[ANSWER])
    )
    prompt_chain.invoke(QUESTION, config={"callbacks": [rig.handler]})
    interaction, _ = rig.only()
    [(query, answer, chunks)] = rig.judge.calls
    assert _texts(interaction.documents) == chunks
    assert (query, answer) == (QUESTION, ANSWER)
    assert sorted(chunks) == sorted([A_CHUNKS[0], B_CHUNKS[0]])
    assert_accounted(rig)


def test_a_multi_query_retriever_invoked_on_its_own_is_not_an_interaction(make_rig: MakeRig) -> None:
    """Its query-writing model run is part of the retrieval, never an answer: a retriever run as the root
    is a standalone retrieval (not evaluated, not counted; see docs/capture.md)."""
    rig = make_rig()
    writer = FakeListChatModel(responses=["tea antioxidants\ntea inflammation"])
    retriever = MultiQueryRetriever.from_llm(retriever=FixedRetriever(), llm=writer)
    retriever.invoke(QUESTION, config={"callbacks": [rig.handler]})
    rig.flush()
    assert rig.judge.calls == []
    stats = rig.handler.stats()
    assert (stats.captured, stats.finished) == (0, 0)
    assert rig.handler.standalone_retrievals == 1
    assert_accounted(rig)
