"""Issue 9: the ``gen_ai.evaluation.result`` event carries every attribute the current GenAI conventions
define for it that we know (``model/gen-ai/events.yaml``): ``gen_ai.evaluation.name`` (required),
``gen_ai.evaluation.score.value`` / ``.label`` (if applicable), ``gen_ai.evaluation.explanation``,
``error.type`` (on failure) and ``gen_ai.response.id`` of the evaluated generation when capture saw one.

Real parts: a real LangChain chain whose chat model (LangChain's ``GenericFakeChatModel``, a real
``BaseChatModel``) answers with ``response_metadata["id"]`` as provider chat models do; GenAI-convention
spans through the real span processor; the real Evaluator and Emitter on SDK providers with in-memory
exporters.
"""

from __future__ import annotations

import json
from typing import Any

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage

from ctxutil_otel.capture import UtilizationCallbackHandler
from ctxutil_otel.capture.spans import UtilizationSpanProcessor
from ctxutil_otel.emit import names as n
from ctxutil_otel.worker import Evaluator
from tests.capture.conftest import ANSWER, CHUNKS, QUESTION, rag_chain

from .conftest import Telemetry

RESPONSE_ID = "chatcmpl-9xYzAbC123"


def _event(telemetry: Telemetry) -> dict[str, Any]:
    events = [r for r in telemetry.logs() if r.log_record.event_name == n.EVENT_EVALUATION_RESULT]
    assert len(events) == 1
    return dict(events[0].log_record.attributes or {})


def test_langchain_response_id_is_on_the_event_and_span(telemetry: Telemetry) -> None:
    model = GenericFakeChatModel(
        messages=iter([AIMessage(content=ANSWER, response_metadata={"id": RESPONSE_ID})])
    )
    evaluator = Evaluator(emitter=telemetry.emitter(), max_evaluations_per_second=0)
    handler = UtilizationCallbackHandler(evaluator)
    rag_chain(model=model).invoke(QUESTION, config={"callbacks": [handler]})
    assert handler.force_flush(10_000)
    evaluator.shutdown(5_000)
    event = _event(telemetry)
    assert event[n.ATTR_RESPONSE_ID] == RESPONSE_ID
    for key in (n.ATTR_EVALUATION_NAME, n.ATTR_EVALUATION_SCORE_LABEL, n.ATTR_EVALUATION_EXPLANATION):
        assert key in event
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    assert dict(span.attributes or {})[n.ATTR_RESPONSE_ID] == RESPONSE_ID


def test_no_response_id_means_no_attribute(telemetry: Telemetry) -> None:
    evaluator = Evaluator(emitter=telemetry.emitter(), max_evaluations_per_second=0)
    handler = UtilizationCallbackHandler(evaluator)
    rag_chain().invoke(QUESTION, config={"callbacks": [handler]})
    assert handler.force_flush(10_000)
    evaluator.shutdown(5_000)
    assert n.ATTR_RESPONSE_ID not in _event(telemetry)


def test_genai_span_response_id_is_on_the_event(telemetry: Telemetry) -> None:
    evaluator = Evaluator(emitter=telemetry.emitter(), max_evaluations_per_second=0)
    processor = UtilizationSpanProcessor(evaluator)
    telemetry.tracer_provider.add_span_processor(processor)
    tracer = telemetry.tracer_provider.get_tracer("tests.genai")
    documents = [{"id": f"doc-{i}", "score": 0.9, "content": text} for i, text in enumerate(CHUNKS)]
    with tracer.start_as_current_span(
        "invoke_workflow rag", attributes={"gen_ai.operation.name": "invoke_workflow"}
    ):
        with tracer.start_as_current_span(
            "retrieval tea-index",
            attributes={
                "gen_ai.operation.name": "retrieval",
                "gen_ai.retrieval.query.text": QUESTION,
                "gen_ai.retrieval.documents": json.dumps(documents),
            },
        ):
            pass
        output = [
            {"role": "assistant", "parts": [{"type": "text", "content": ANSWER}], "finish_reason": "stop"}
        ]
        with tracer.start_as_current_span(
            "chat gpt-4o-mini",
            attributes={
                "gen_ai.operation.name": "chat",
                "gen_ai.response.id": RESPONSE_ID,
                "gen_ai.output.messages": json.dumps(output),
            },
        ):
            pass
    assert processor.force_flush(10_000)
    evaluator.shutdown(5_000)
    assert evaluator.stats().evaluated == 1
    assert _event(telemetry)[n.ATTR_RESPONSE_ID] == RESPONSE_ID
