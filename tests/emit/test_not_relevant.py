"""Why a chunk was not counted (issue 23 item 6): ``pretty()``, the evaluation span and its
``gen_ai.evaluation.result`` event name the chunks judged not relevant (index, document id; the judge's
reason and the text only with content capture), and the seed's ``chunk_breakdown`` stays relevant-only.

Before, ``chunk_breakdown`` and ``pretty()`` listed relevant chunks only, and the event carried no chunk at
all: a chunk left out of the score was invisible there. Real parts: the metric with a judge whose verdicts
the test dictates, the Emitter on SDK providers with in-memory exporters.
"""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from ctxutil_otel.capture import Interaction
from ctxutil_otel.emit import names as n

from .conftest import GREEN_TEA, GREEN_TEA_MARKS, Telemetry, evaluate, make_interaction

IDS = ("doc-catechins", "doc-inflammation", "doc-metabolism", "doc-history")


def _emit(telemetry: Telemetry, **emitter: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    documents = [
        Document(page_content=t, id=i) for t, i in zip(GREEN_TEA.retrieved_content, IDS, strict=True)
    ]
    interaction = make_interaction(parent=telemetry.evaluated_span(), documents=documents)
    telemetry.emitter(**emitter).emit(interaction, evaluate(GREEN_TEA, GREEN_TEA_MARKS), 0.1)
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    (log,) = telemetry.logs()
    return dict(span.attributes or {}), dict(log.log_record.attributes or {})


def test_pretty_names_the_chunks_left_out_and_the_breakdown_stays_relevant_only() -> None:
    result = evaluate(GREEN_TEA, GREEN_TEA_MARKS)
    assert [c.index for c in result.signals.chunk_breakdown] == [0, 1, 2]  # the seed's definition
    lines = result.pretty().splitlines()
    assert lines[-1] == "  [3] not relevant, not counted (verdict - on chunk 3)"
    assert sum("not relevant" in line for line in lines) == 1


def test_the_span_and_the_event_name_them_without_content(telemetry: Telemetry) -> None:
    for attributes in _emit(telemetry):
        assert attributes[n.ATTR_NOT_RELEVANT_INDEX] == (3,)
        assert attributes[n.ATTR_NOT_RELEVANT_ID] == ("doc-history",)
        assert n.ATTR_NOT_RELEVANT_REASON not in attributes
        assert n.ATTR_NOT_RELEVANT_TEXT not in attributes
        assert GREEN_TEA.retrieved_content[3] not in repr(attributes)


def test_with_content_capture_the_reason_and_the_text_too(telemetry: Telemetry) -> None:
    for attributes in _emit(telemetry, capture_content=True, max_content_chars=20):
        assert attributes[n.ATTR_NOT_RELEVANT_INDEX] == (3,)
        assert attributes[n.ATTR_NOT_RELEVANT_REASON] == ("verdict - on chunk 3",)
        assert attributes[n.ATTR_NOT_RELEVANT_TEXT] == (GREEN_TEA.retrieved_content[3][:19] + "…",)


def test_every_chunk_relevant_is_an_empty_list_and_no_ids_without_metadata_keys(telemetry: Telemetry) -> None:
    documents = list(GREEN_TEA.retrieved_content)
    interaction = Interaction(
        query=GREEN_TEA.query, answer=GREEN_TEA.actual_output, documents=documents, trace_id=1, id="r"
    )
    telemetry.emitter(chunk_metadata_keys=()).emit(
        interaction, evaluate(GREEN_TEA, ["RU", "R", "R", "R"]), 0.1
    )
    (span,) = telemetry.spans(n.SPAN_EVALUATION)
    assert span.attributes is not None
    assert span.attributes[n.ATTR_NOT_RELEVANT_INDEX] == ()
    assert n.ATTR_NOT_RELEVANT_ID not in span.attributes


def test_pretty_gives_every_retrieved_index_a_line_duplicates_included() -> None:
    # Chunks 2 and 4 repeat chunk 0 (4 after whitespace normalisation), chunk 5 repeats chunk 3, the one
    # judged not relevant. The judge sees the three distinct chunks; a duplicate takes its original's verdict
    # and is not counted. Before, pretty() printed no line for 2, 4 or 5: their indexes vanished.
    chunks = list(GREEN_TEA.retrieved_content)
    repeated = [chunks[0], chunks[1], chunks[0], chunks[3], f"  {chunks[0]} ", chunks[3]]
    item = GREEN_TEA.model_copy(update={"retrieved_content": repeated})
    result = evaluate(item, ["RU", "R", ""])
    lines = result.pretty().splitlines()
    indexes = [int(line.split("]")[0].split("[")[1]) for line in lines if line.startswith("  [")]
    assert sorted(indexes) == [0, 1, 2, 3, 4, 5]
    assert lines[-4:] == [  # what the score leaves out, in retrieval order
        "  [2] duplicate of [0], not counted",
        "  [3] not relevant, not counted (verdict - on chunk 2)",  # the judge saw it third
        "  [4] duplicate of [0], not counted",
        "  [5] duplicate of [3], not counted",
    ]
