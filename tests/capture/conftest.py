"""Fixtures for the LangChain capture tests: real runnables, the real Evaluator, a recording judge.

Real parts: LangChain runnables (a ``BaseRetriever`` subclass, prompt templates, the fake chat models of
``langchain_core.language_models``, which are real ``BaseChatModel`` implementations replaying text),
the real :class:`~ctxutil_otel.worker.Evaluator` with :class:`~ctxutil_otel.ContextualUtilization` and
the offline :class:`~ctxutil_otel.LexicalJudge`. Two recorders stand where we need to look inside:
``RecordingJudge`` delegates every call to the real LexicalJudge and keeps the (query, answer, chunks)
that reached the metric; the shared ``RecordingEmitter`` (tests/support/doubles.py) implements the emitter
contract and keeps what it is handed (the real Emitter is covered by its own tests and by test_otel.py
here). The environment is cleaned for every test by tests/conftest.py.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from langchain_core.callbacks import CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import Runnable, RunnablePassthrough

from ctxutil_otel import ContextualUtilization, LexicalJudge, MetricEvaluationResult
from ctxutil_otel.capture import Interaction, UtilizationCallbackHandler
from ctxutil_otel.judges import JudgeResult
from ctxutil_otel.worker import Evaluator
from tests.support.accounting import assert_accounted as shared_assert_accounted
from tests.support.doubles import RecordingEmitter

QUESTION = "What are the benefits of green tea?"
CHUNKS = (
    "Green tea contains antioxidants called catechins.",
    "The antioxidants in green tea reduce inflammation.",
    "Green tea may boost metabolism.",
    "Tea originated in China thousands of years ago.",
)
ANSWER = "Green tea contains antioxidants called catechins, and these antioxidants reduce inflammation."


class FixedRetriever(BaseRetriever):
    """Returns ``Document`` s for ``texts`` (or, when ``by_query`` has the query, for those texts)."""

    texts: Sequence[str] = CHUNKS
    by_query: Mapping[str, Sequence[str]] = {}

    def _get_relevant_documents(
        self, query: str, *, run_manager: CallbackManagerForRetrieverRun
    ) -> list[Document]:
        texts = self.by_query.get(query, self.texts) if isinstance(query, str) else self.texts
        return [Document(page_content=text, metadata={"i": i}) for i, text in enumerate(texts)]


class RecordingJudge:
    """The real LexicalJudge, plus a record of what reached it: ``calls`` of (query, answer, chunks)."""

    name = "lexical"
    model: str | None = None

    def __init__(self) -> None:
        self.inner = LexicalJudge()
        self.calls: list[tuple[str, str, list[str]]] = []
        self._lock = threading.Lock()

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        with self._lock:
            self.calls.append((query, answer, list(chunks)))
        return await self.inner.judge(query, answer, chunks, reasons=reasons)


@dataclass
class Rig:
    """One handler on one real Evaluator, and the recorders behind it."""

    handler: UtilizationCallbackHandler
    evaluator: Evaluator
    judge: RecordingJudge
    emitter: RecordingEmitter

    def flush(self) -> None:
        assert self.handler.force_flush(10_000), "evaluations did not finish within 10 s"

    def interactions(self) -> list[Interaction]:
        return self.emitter.interactions

    def only(self) -> tuple[Interaction, MetricEvaluationResult]:
        self.flush()
        assert len(self.emitter.emitted) == 1, self.emitter.emitted
        interaction, result, _ = self.emitter.emitted[0]
        return interaction, result


@pytest.fixture
def make_rig() -> Iterator[Callable[..., Rig]]:
    """``make_rig(**settings)``: a handler on a real Evaluator (sample rate 1, no rate cap unless
    overridden). Capture settings (``run_ttl_s``, ``max_pending_runs``, ``retrieval_tools``,
    ``excluded_tools``) and ``clock`` go to the handler."""
    rigs: list[Rig] = []

    def make(*, clock: Callable[[], float] | None = None, **settings: Any) -> Rig:
        capture_keys = ("run_ttl_s", "max_pending_runs", "retrieval_tools", "excluded_tools")
        capture = {k: settings.pop(k) for k in capture_keys if k in settings}
        settings.setdefault("sample_rate", 1.0)
        settings.setdefault("max_evaluations_per_second", 0)
        judge = RecordingJudge()
        emitter = RecordingEmitter()
        evaluator = Evaluator(ContextualUtilization(judge=judge), emitter=emitter, **settings)
        handler = UtilizationCallbackHandler(evaluator, clock=clock, **capture)
        rig = Rig(handler, evaluator, judge, emitter)
        rigs.append(rig)
        return rig

    yield make
    for rig in rigs:
        rig.evaluator.shutdown(5_000)


def rag_chain(
    retriever: BaseRetriever | None = None, model: Runnable[Any, Any] | None = None
) -> Runnable[Any, str]:
    """The LCEL RAG chain: ``{"context": retriever, "question": passthrough} | prompt | model | parser``."""
    prompt = ChatPromptTemplate.from_template(
        "Answer from the context.\nContext: {context}\nQuestion: {question}"
    )
    return (
        {"context": retriever or FixedRetriever(), "question": RunnablePassthrough()}
        | prompt
        | (model or FakeListChatModel(responses=[ANSWER]))
        | StrOutputParser()
    )


def assert_accounted(rig: Rig) -> None:
    """After a flush: the shared accounting invariant (tests/support/accounting.py) on the handler's stats,
    and nothing left in the handler (no pending run, no callback error)."""
    shared_assert_accounted(rig.handler.stats())
    assert rig.handler.pending_runs == 0
    assert rig.handler.callback_errors == {}
