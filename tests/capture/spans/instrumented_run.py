"""Run a real LangChain RAG chain under one real third-party instrumentation, feeding
:class:`UtilizationSpanProcessor` through a real ``TracerProvider``, and print what the processor made of
it as one JSON line. Run in a subprocess by test_instrumentations.py: the instrumentations patch
LangChain's callback manager process-wide, and their patching must not leak into other tests.

    python -m tests.capture.spans.instrumented_run INSTRUMENTATION [--no-content] [--compression]

INSTRUMENTATION: ``traceloop`` (``opentelemetry-instrumentation-langchain``, OpenLLMetry) or
``otel-genai`` (``opentelemetry-instrumentation-genai-langchain``, OpenTelemetry's own). ``--no-content``
turns the instrumentation's content capture off; ``--compression`` puts a contextual-compression
retriever (a nested retriever) in front of the chain's model.

Output keys: ``stats`` (captured, evaluated, not_applicable, failed, dropped), ``calls`` (the judge's
(query, answer, chunks)), ``expected`` (the same, from the replayed rows), ``causes`` (the processor's
not-evaluable causes), ``errors``, ``pending``, ``versions``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Sequence
from importlib.metadata import version
from typing import Any

from ctxutil_otel import ContextualUtilization, LexicalJudge
from ctxutil_otel.judges import JudgeResult

DISTRIBUTIONS = {
    "traceloop": "opentelemetry-instrumentation-langchain",
    "otel-genai": "opentelemetry-instrumentation-genai-langchain",
}


class _Judge:
    """The real LexicalJudge, recording what reached it."""

    name = "lexical"
    model: str | None = None

    def __init__(self) -> None:
        self.inner = LexicalJudge()
        self.calls: list[tuple[str, str, list[str]]] = []

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        self.calls.append((query, answer, list(chunks)))
        return await self.inner.judge(query, answer, chunks, reasons=reasons)


class _Emitter:
    def emit(self, interaction: Any, result: Any, duration_s: float) -> None:
        pass

    def observe(self, *args: Any) -> None:
        pass


def _instrument(which: str, provider: Any, content: bool) -> None:
    if which == "traceloop":
        os.environ["TRACELOOP_TRACE_CONTENT"] = "true" if content else "false"
        from opentelemetry.instrumentation.langchain import LangchainInstrumentor

        LangchainInstrumentor().instrument(tracer_provider=provider)
    elif which == "otel-genai":
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = (
            "SPAN_ONLY" if content else "NO_CONTENT"
        )
        from opentelemetry.instrumentation.genai.langchain import LangChainInstrumentor

        # It declares `langchain` (the meta package) as what it instruments; the chain here is built
        # from langchain-core, which is what it hooks: skip that dependency check.
        LangChainInstrumentor().instrument(tracer_provider=provider, skip_dep_check=True)
    else:
        raise SystemExit(f"unknown instrumentation {which!r}")


def main(argv: Sequence[str]) -> int:
    which, flags = argv[0], set(argv[1:])
    content = "--no-content" not in flags
    from langchain_classic.retrievers import ContextualCompressionRetriever
    from langchain_core.documents import BaseDocumentCompressor
    from opentelemetry.sdk.trace import TracerProvider

    from ctxutil_otel.capture.spans import UtilizationSpanProcessor
    from ctxutil_otel.data import load_sample
    from ctxutil_otel.demo import build_rag_chain, replay_parts
    from ctxutil_otel.demo._replay import ReplayChatModel
    from ctxutil_otel.worker import Evaluator

    class NamedReplayModel(ReplayChatModel):
        """The demo's replaying chat model with a model name, as every provider's model has
        (OpenTelemetry's GenAI instrumentation makes no chat span for a model without one)."""

        model_name: str = "replay-1"

        @property
        def _identifying_params(self) -> dict[str, Any]:
            return {"model_name": self.model_name}

    judge = _Judge()
    evaluator = Evaluator(
        ContextualUtilization(judge=judge), emitter=_Emitter(), max_evaluations_per_second=0
    )
    processor = UtilizationSpanProcessor(evaluator)
    provider = TracerProvider()
    provider.add_span_processor(processor)
    _instrument(which, provider, content)

    rows = load_sample(3)
    retriever, model = replay_parts(rows)
    named = NamedReplayModel(answers=dict(model.answers))
    expected = []
    if "--compression" in flags:

        class FirstTwo(BaseDocumentCompressor):
            """Keeps the first two documents (a reranker's top-k, deterministic)."""

            def compress_documents(self, documents: Any, query: str, callbacks: Any = None) -> Any:
                return list(documents)[:2]

        outer = ContextualCompressionRetriever(base_compressor=FirstTwo(), base_retriever=retriever)
        chain = build_rag_chain(outer, named)
        for row in rows:
            expected.append([row["query"], row["actual_output"], list(row["retrieved_content"][:2])])
    else:
        chain = build_rag_chain(retriever, named)
        for row in rows:
            expected.append([row["query"], row["actual_output"], list(row["retrieved_content"])])
    for row in rows:
        assert chain.invoke(row["query"]) == row["actual_output"]
    assert processor.force_flush(30_000)
    stats = processor.stats()
    result = {
        "stats": {
            "captured": stats.captured,
            "evaluated": stats.evaluated,
            "not_applicable": stats.not_applicable,
            "failed": stats.failed_total,
            "dropped": dict(stats.dropped),
        },
        "calls": sorted([list(c) for c in judge.calls]),
        "expected": sorted(expected),
        "causes": sorted([[*k, v] for k, v in processor.not_evaluable_causes.items()]),
        "errors": processor.errors,
        "pending": processor.pending_traces,
        "versions": {which: version(DISTRIBUTIONS[which])},
    }
    provider.shutdown()
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
