"""Reader for OpenInference spans (Arize ``openinference-semantic-conventions``, checked against 0.1.42).

Recognised by ``openinference.span.kind``:

* ``RETRIEVER``: query from ``input.value`` (plain text, or a JSON object's ``query``/``input``/
  ``question``); chunks from ``retrieval.documents.{i}.document.content`` with ``.id``, ``.score`` and
  ``.metadata`` (a JSON object string).
* ``RERANKER``: ``reranker.query`` and ``reranker.output_documents.{i}.document.*``; its output replaces
  the retrievals before it in the turn (those documents are what reached the model).
* ``LLM``: the answer from ``llm.output_messages.{i}.message.content``, or the text parts
  ``message.contents.{j}.message_content.text`` (``message_content.type`` ``text``); when no output
  message was recorded, from ``output.value`` (plain text, or LangChain's ``{"generations": [[{"text":
  ...}]]}`` JSON). The query from the last ``user`` message of ``llm.input_messages``.
* ``CHAIN`` and ``AGENT``: the :data:`~._model.CHAIN` marker.

OpenInference writes ``__REDACTED__`` for hidden content (``OPENINFERENCE_HIDE_INPUTS``/``_OUTPUTS``...):
such values count as not captured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from ._model import (
    CHAIN,
    CONTENT_NOT_CAPTURED,
    INVALID,
    MALFORMED,
    REDACTED,
    TRUNCATED,
    Chunk,
    Generation,
    Part,
    Retrieval,
    as_float,
    as_id,
    as_mapping,
    as_text,
    contiguous,
    first_text,
    indexed,
    load_json,
)

__all__ = ["CONVENTION", "SPAN_KIND", "read"]

CONVENTION: Final = "openinference"
#: The attribute that marks an OpenInference span.
SPAN_KIND: Final = "openinference.span.kind"

_JSON = "application/json"
_QUERY_KEYS = ("query", "input", "question", "text")


def read(attributes: Mapping[str, object]) -> Part | None:
    """Map an OpenInference span's attributes to a record (see the module docstring); never raises
    on bad attribute values."""
    kind = attributes.get(SPAN_KIND)
    if kind == "RETRIEVER":
        return _documents(attributes, "retrieval.documents.", _query(attributes), reranked=False)
    if kind == "LLM":
        return _generation(attributes)
    if kind == "CHAIN" or kind == "AGENT":
        return CHAIN
    if kind == "RERANKER":
        return _documents(
            attributes, "reranker.output_documents.", as_text(attributes.get("reranker.query")), reranked=True
        )
    return None


def _query(attributes: Mapping[str, object]) -> str | None:
    value = attributes.get("input.value")
    if attributes.get("input.mime_type") != _JSON:
        return as_text(value)
    loaded = load_json(value)
    if isinstance(loaded, str):
        return as_text(loaded)
    if isinstance(loaded, Mapping):
        return first_text(loaded, _QUERY_KEYS)
    return None


def _documents(
    attributes: Mapping[str, object], prefix: str, query: str | None, *, reranked: bool
) -> Retrieval:
    groups = indexed(attributes, prefix)
    if not groups:
        output = attributes.get("output.value")
        if output is None or as_text(output) is None:
            # No document attributes and no readable output: we cannot tell "nothing retrieved" from
            # "not recorded".
            return Retrieval(query, None, CONVENTION, CONTENT_NOT_CAPTURED, reranked)
        return Retrieval(query, (), CONVENTION, None, reranked)
    if not contiguous(groups):
        return Retrieval(query, None, CONVENTION, TRUNCATED, reranked)
    chunks: list[Chunk] = []
    for _, fields in groups:
        content = fields.get("document.content")
        text = as_text(content)
        if text is None:
            problem = CONTENT_NOT_CAPTURED if content is None or content == REDACTED else MALFORMED
            return Retrieval(query, None, CONVENTION, problem, reranked)
        chunks.append(
            Chunk(
                text,
                id=as_id(fields.get("document.id")),
                score=as_float(fields.get("document.score")),
                metadata=as_mapping(fields.get("document.metadata")),
            )
        )
    return Retrieval(query, tuple(chunks), CONVENTION, None, reranked)


def _message_text(fields: Mapping[str, object]) -> str | None:
    text = as_text(fields.get("message.content"))
    if text is not None:
        return text
    parts = [
        part_text
        for _, part in indexed(fields, "message.contents.")
        if part.get("message_content.type", "text") == "text"
        and (part_text := as_text(part.get("message_content.text"))) is not None
    ]
    return "".join(parts) if parts else None


def _generation(attributes: Mapping[str, object]) -> Generation:
    query = None
    for _, fields in reversed(indexed(attributes, "llm.input_messages.")):
        if fields.get("message.role") == "user":
            query = _message_text(fields)
            break
    outputs = indexed(attributes, "llm.output_messages.")
    for _, fields in outputs:
        if fields.get("message.role", "assistant") == "assistant":
            answer = _message_text(fields)
            if answer is not None:
                return Generation(answer, CONVENTION, query)
    return _from_output_value(attributes, query)


def _from_output_value(attributes: Mapping[str, object], query: str | None) -> Generation:
    value = attributes.get("output.value")
    if attributes.get("output.mime_type") != _JSON:
        text = as_text(value)
        problem = None if text is not None else CONTENT_NOT_CAPTURED
        return Generation(text, CONVENTION, query, problem)
    loaded = load_json(value)
    if loaded is INVALID:
        return Generation(None, CONVENTION, query, MALFORMED)
    # LangChain's LLMResult: {"generations": [[{"text": ...}, ...], ...]}
    try:
        text = as_text(loaded["generations"][0][0]["text"])  # type: ignore[index]
    except (KeyError, IndexError, TypeError):
        text = None
    return Generation(text, CONVENTION, query, None if text is not None else CONTENT_NOT_CAPTURED)
