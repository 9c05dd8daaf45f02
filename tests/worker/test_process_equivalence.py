"""The same interaction gives the same result in both workers, also where the process worker's pipe or
JSON could change it (runs once per mode through the conftest's ``worker_mode``)."""

from __future__ import annotations

from collections.abc import Sequence

from ctxutil_otel.judges import ChunkVerdict, JudgeResult
from ctxutil_otel.metric import ContextualUtilization
from tests.support.doubles import RecordingEmitter

from .conftest import MakeEvaluator, interaction


class QuotingJudge:
    """Every chunk relevant and used, each reason quoting the query (as an LLM judge's reasons may)."""

    name = "quoting"
    model: str | None = None

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        verdicts = [
            ChunkVerdict(index=i, is_relevant=True, is_utilized=True, reason=f"q={query}")
            for i in range(len(chunks))
        ]
        return JudgeResult(verdicts=verdicts)


def test_a_reason_holding_a_lone_surrogate_is_kept(make_evaluator: MakeEvaluator) -> None:
    # A lone surrogate is a valid Python str: the thread worker emits it as is. The process worker's
    # result came back as JSON that pydantic's parser refused (json_invalid): counted internal_error.
    emitter = RecordingEmitter()
    evaluator = make_evaluator(ContextualUtilization(judge=QuotingJudge()), emitter=emitter)
    query = "what is \ud800 python"
    item = interaction(query=query)
    assert evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(60_000)
    assert evaluator.stats().evaluated == 1 and evaluator.stats().failed == {}
    [(_, result, _)] = emitter.emitted
    assert [entry.reason for entry in result.signals.chunk_breakdown] == [f"q={query}"] * 3
    assert [entry.chunk_text for entry in result.signals.chunk_breakdown] == list(item.documents)


def test_an_unsupported_chunk_is_explained_alike(make_evaluator: MakeEvaluator) -> None:
    # The process worker converts chunks itself (without pydantic) and dropped pydantic's wording.
    emitter = RecordingEmitter()
    evaluator = make_evaluator(ContextualUtilization(judge=QuotingJudge()), emitter=emitter)
    item = interaction(documents=["Python is a language.", None])
    assert evaluator.admit(item.trace_id).submit(item)
    assert evaluator.force_flush(60_000)
    assert evaluator.stats().failed == {"invalid_input": 1}
    [(_, result, _)] = emitter.emitted
    assert result.explanation == (
        "retrieved_content: Value error, retrieved_content[1]: expected str, LangChain Document or a "
        "mapping with 'page_content'/'content'/'text', got NoneType"
    )
