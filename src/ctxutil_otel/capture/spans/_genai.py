"""Reader for OpenTelemetry GenAI spans (semantic conventions, development status; the retrieval operation
and ``gen_ai.retrieval.*`` as in semconv 1.38+ / ``opentelemetry-semantic-conventions`` 0.66b0; message
JSON shapes from ``docs/gen-ai/gen-ai-input-messages.json`` / ``-output-messages.json``).

Recognised by ``gen_ai.operation.name``:

* ``retrieval``: query from ``gen_ai.retrieval.query.text``; chunks from ``gen_ai.retrieval.documents``, a
  JSON array (or a structured value) of objects. The convention requires only ``id`` and ``score`` per
  document; the text is taken from ``content`` (the conventions' examples), else ``text`` or
  ``page_content``. Documents without any text count as content not captured. Plain strings in the
  array are taken as chunk texts.
* ``chat``, ``text_completion``, ``generate_content``: the answer from ``gen_ai.output.messages`` (JSON
  array of ``{"role", "parts": [{"type": "text", "content": ...}], "finish_reason"}``; the first message,
  its ``text`` parts joined), else the older flattened ``gen_ai.completion.0.content``; the query from
  the last ``user`` message of ``gen_ai.input.messages``, else of ``gen_ai.prompt.{i}.role``/``.content``.
* ``invoke_workflow``, ``invoke_agent``: the :data:`~._model.CHAIN` marker.

Both opt-in attributes are absent unless the instrumentation captures content
(``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT``): then the record says content not captured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from ._model import (
    CHAIN,
    CONTENT_NOT_CAPTURED,
    MALFORMED,
    REDACTED,
    Chunk,
    Generation,
    Part,
    Retrieval,
    as_float,
    as_id,
    as_mapping,
    as_text,
    first_text,
    indexed,
    load_json,
)

__all__ = ["CONVENTION", "OPERATION_NAME", "read", "read_generation"]

CONVENTION: Final = "genai"
#: The attribute that marks an OpenTelemetry GenAI span.
OPERATION_NAME: Final = "gen_ai.operation.name"

_GENERATION_OPERATIONS = frozenset({"chat", "text_completion", "generate_content"})
_CHAIN_OPERATIONS = frozenset({"invoke_workflow", "invoke_agent"})
_TEXT_KEYS = ("content", "text", "page_content")


def read(attributes: Mapping[str, object]) -> Part | None:
    """Map a GenAI span's attributes to a record (see the module docstring); never raises on bad
    attribute values."""
    operation = attributes.get(OPERATION_NAME)
    if operation == "retrieval":
        return _retrieval(attributes)
    if operation in _GENERATION_OPERATIONS:
        return read_generation(attributes, CONVENTION)
    if operation in _CHAIN_OPERATIONS:
        return CHAIN
    return None


def _retrieval(attributes: Mapping[str, object]) -> Retrieval:
    query = as_text(attributes.get("gen_ai.retrieval.query.text"))
    raw = attributes.get("gen_ai.retrieval.documents")
    if raw is None:
        return Retrieval(query, None, CONVENTION, CONTENT_NOT_CAPTURED)
    loaded = load_json(raw)
    if not isinstance(loaded, Sequence) or isinstance(loaded, str):
        return Retrieval(query, None, CONVENTION, MALFORMED)
    chunks: list[Chunk] = []
    for item in loaded:
        document = load_json(item) if isinstance(item, str) and item.startswith("{") else item
        if isinstance(document, str):
            chunks.append(Chunk(document))
            continue
        if not isinstance(document, Mapping):
            return Retrieval(query, None, CONVENTION, MALFORMED)
        text = first_text(document, _TEXT_KEYS)
        if text is None:  # no text key (or redacted): not captured; one of another type: malformed
            given = [document.get(key) for key in _TEXT_KEYS]
            unreadable = any(value is not None and value != REDACTED for value in given)
            return Retrieval(query, None, CONVENTION, MALFORMED if unreadable else CONTENT_NOT_CAPTURED)
        chunks.append(
            Chunk(
                text,
                id=as_id(document.get("id")),
                score=as_float(document.get("score")),
                metadata=as_mapping(document.get("metadata")),
            )
        )
    return Retrieval(query, tuple(chunks), CONVENTION)


def read_generation(attributes: Mapping[str, object], convention: str) -> Generation:
    """The answer and query of a model-call span in the GenAI forms (also used for OpenLLMetry's LLM
    spans, which write the flattened ``gen_ai.prompt.*``/``gen_ai.completion.*``)."""
    query = _input_query(attributes)
    problem = CONTENT_NOT_CAPTURED
    raw = attributes.get("gen_ai.output.messages")
    if raw is not None:
        answer = _first_message_text(load_json(raw), role=None)
        if answer is not None:
            return Generation(answer, convention, query)
        problem = MALFORMED
    for key in ("gen_ai.completion.0.content", "llm.completions.0.content"):
        answer = as_text(attributes.get(key))
        if answer is not None:
            return Generation(answer, convention, query)
    return Generation(None, convention, query, problem)


def _input_query(attributes: Mapping[str, object]) -> str | None:
    raw = attributes.get("gen_ai.input.messages")
    if raw is not None:
        loaded = load_json(raw)
        if isinstance(loaded, Sequence) and not isinstance(loaded, str):
            return _first_message_text(list(reversed(loaded)), role="user")
        return None
    for _, fields in reversed(indexed(attributes, "gen_ai.prompt.")):
        if fields.get("role") == "user":
            return as_text(fields.get("content"))
    return None


def _first_message_text(messages: object, *, role: str | None) -> str | None:
    """Text of the first message (with ``role``, when given): its ``text`` parts joined, else its
    ``content`` string."""
    if not isinstance(messages, Sequence) or isinstance(messages, str):
        return None
    for message in messages:
        if not isinstance(message, Mapping) or (role is not None and message.get("role") != role):
            continue
        parts = message.get("parts")
        if isinstance(parts, Sequence) and not isinstance(parts, str):
            texts = [
                text
                for part in parts
                if isinstance(part, Mapping)
                and part.get("type", "text") == "text"
                and (text := as_text(part.get("content"))) is not None
            ]
            if texts:
                return "".join(texts)
        content = as_text(message.get("content"))
        if content is not None:
            return content
        if role is None:
            return None  # the first choice has no text: do not answer with a later choice
    return None
