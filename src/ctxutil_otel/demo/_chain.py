"""The demo's RAG chain: a real LCEL pipeline ``retriever | prompt | model | parser`` over recorded data."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.documents import Document
from langchain_core.language_models import BaseChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnableLambda, RunnablePassthrough

from ._replay import QUESTION_MARKER, RecordedRetriever, ReplayChatModel

__all__ = ["build_rag_chain", "replay_parts"]

PROMPT = ChatPromptTemplate.from_messages(
    [
        ("system", "Answer the question using only the context."),
        ("human", "Context:\n{context}\n\n" + QUESTION_MARKER + "{question}"),
    ]
)


def _join(documents: list[Document]) -> str:
    return "\n\n".join(d.page_content for d in documents)


def build_rag_chain(retriever: BaseRetriever, model: BaseChatModel) -> Runnable[str, str]:
    """Return ``{"context": retriever | join, "question": passthrough} | prompt | model | StrOutputParser()``.

    Input: the question (``str``); output: the answer (``str``).
    """
    return (
        {"context": retriever | RunnableLambda(_join), "question": RunnablePassthrough()}
        | PROMPT
        | model
        | StrOutputParser()
    )


def replay_parts(rows: Sequence[Mapping[str, Any]]) -> tuple[RecordedRetriever, ReplayChatModel]:
    """Build the retriever and model that replay ``rows`` (dicts with ``query``, ``retrieved_content``,
    ``actual_output``, as in the bundled sample)."""
    retriever = RecordedRetriever(recorded={r["query"]: list(r["retrieved_content"]) for r in rows})
    model = ReplayChatModel(answers={r["query"]: r["actual_output"] for r in rows})
    return retriever, model
