"""Reader for OpenLLMetry (Traceloop) spans (``opentelemetry-semantic-conventions-ai`` 0.4.x attribute
names: ``traceloop.span.kind`` values ``workflow``/``task``/``agent``/``tool``, ``traceloop.entity.*``,
``llm.request.type``; 0.5.x replaced ``llm.request.type`` by ``gen_ai.operation.name``, which the GenAI
reader handles).

* A ``traceloop.span.kind`` span whose ``traceloop.entity.output`` JSON holds documents is a retrieval:
  ``{"documents": [...]}`` (the retriever output shape), also under ``outputs``/``output`` (the
  LangChain handler's ``{"outputs": ..., "kwargs": ...}`` and the decorators' return value), or a list
  of LangChain ``Document`` objects (``page_content``, plain or serialised with ``kwargs``). The query is
  read from ``traceloop.entity.input`` (``query``/``question``/``input``/``input_str`` keys, under
  ``inputs``/``kwargs`` too, or the first positional ``args`` string).
* A span named as a retriever (``traceloop.entity.name`` containing ``retriev``, or marked
  ``gen_ai.operation.name=vector_db_retrieve`` as ``opentelemetry-instrumentation-langchain`` 0.62 does)
  with no entity output is a retrieval whose content was not captured (``TRACELOOP_TRACE_CONTENT=false``).
  Entity input and output are read from ``traceloop.entity.*``, else from ``gen_ai.task.*`` (0.62 writes
  both).
* Other ``workflow``/``task``/``agent`` spans: the :data:`~._model.CHAIN` marker.
* ``llm.request.type`` ``chat``/``completion``: a generation from ``gen_ai.completion.0.content`` (and the
  query from the last ``user`` ``gen_ai.prompt.{i}``), read like the GenAI flattened form.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from ._genai import read_generation
from ._model import (
    CHAIN,
    CONTENT_NOT_CAPTURED,
    INVALID,
    MALFORMED,
    Chunk,
    Part,
    Retrieval,
    as_float,
    as_id,
    as_mapping,
    as_text,
    first_text,
    load_json,
)

__all__ = ["CONVENTION", "REQUEST_TYPE", "SPAN_KIND", "read"]

CONVENTION: Final = "openllmetry"
#: The attributes that mark an OpenLLMetry span.
SPAN_KIND: Final = "traceloop.span.kind"
REQUEST_TYPE: Final = "llm.request.type"

_CHAIN_KINDS = frozenset({"workflow", "task", "agent"})
_GENERATION_TYPES = frozenset({"chat", "completion"})
_TEXT_KEYS = ("page_content", "content", "text")
_QUERY_KEYS = ("query", "question", "input", "input_str")
_NESTED_KEYS = ("inputs", "kwargs")
_OUTPUT_KEYS = ("outputs", "output")
_MAX_DEPTH = 3
_RETRIEVE_OPERATIONS = frozenset({"vector_db_retrieve", "retrieval", "retrieve"})
_OUTPUT = ("traceloop.entity.output", "gen_ai.task.output")
_INPUT = ("traceloop.entity.input", "gen_ai.task.input")


def read(attributes: Mapping[str, object]) -> Part | None:
    """Map an OpenLLMetry span's attributes to a record (see the module docstring); never raises on
    bad attribute values."""
    kind = attributes.get(SPAN_KIND)
    if kind is not None:
        retrieval = _retrieval(attributes)
        if retrieval is not None:
            return retrieval
        return CHAIN if kind in _CHAIN_KINDS else None
    if attributes.get(REQUEST_TYPE) in _GENERATION_TYPES:
        return read_generation(attributes, CONVENTION)
    return None


def _retrieval(attributes: Mapping[str, object]) -> Retrieval | None:
    output = _first(attributes, _OUTPUT)
    if output is None:
        name = attributes.get("traceloop.entity.name")
        if (isinstance(name, str) and "retriev" in name.lower()) or attributes.get(
            "gen_ai.operation.name"
        ) in _RETRIEVE_OPERATIONS:
            return Retrieval(_query(attributes), None, CONVENTION, CONTENT_NOT_CAPTURED)
        return None
    if not isinstance(output, str) or ('"documents"' not in output and '"page_content"' not in output):
        return None  # cheap pre-check: no document-shaped output, not a retrieval
    loaded = load_json(output)
    if loaded is INVALID:
        return Retrieval(_query(attributes), None, CONVENTION, MALFORMED)
    documents = _find_documents(loaded, 0)
    if documents is None:
        return None
    chunks: list[Chunk] = []
    for item in documents:
        if isinstance(item, str):
            chunks.append(Chunk(item))
            continue
        if not isinstance(item, Mapping):
            return Retrieval(_query(attributes), None, CONVENTION, MALFORMED)
        fields = item.get("kwargs") if isinstance(item.get("kwargs"), Mapping) else item  # lc-serialised
        assert isinstance(fields, Mapping)
        text = first_text(fields, _TEXT_KEYS)
        if text is None:
            return Retrieval(_query(attributes), None, CONVENTION, CONTENT_NOT_CAPTURED)
        metadata = as_mapping(fields.get("metadata"))
        score = fields.get("score", metadata.get("score") if metadata else None)
        chunks.append(Chunk(text, id=as_id(fields.get("id")), score=as_float(score), metadata=metadata))
    return Retrieval(_query(attributes), tuple(chunks), CONVENTION)


def _is_document_list(value: object) -> bool:
    return (
        isinstance(value, Sequence)
        and not isinstance(value, str)
        and bool(value)
        and all(isinstance(item, Mapping) and ("page_content" in item or "kwargs" in item) for item in value)
    )


def _find_documents(value: object, depth: int) -> Sequence[object] | None:
    if depth > _MAX_DEPTH:
        return None
    if _is_document_list(value):
        assert isinstance(value, Sequence)
        return value
    if not isinstance(value, Mapping):
        return None
    documents = value.get("documents")
    if isinstance(documents, Sequence) and not isinstance(documents, str):
        return documents
    for key in _OUTPUT_KEYS:
        if key in value:
            found = _find_documents(value[key], depth + 1)
            if found is not None:
                return found
    return None


def _first(attributes: Mapping[str, object], keys: tuple[str, ...]) -> object:
    for key in keys:
        value = attributes.get(key)
        if value is not None:
            return value
    return None


def _query(attributes: Mapping[str, object]) -> str | None:
    raw = _first(attributes, _INPUT)
    if raw is None:
        return None
    return _query_in(load_json(raw), 0)


def _query_in(value: object, depth: int) -> str | None:
    if depth > _MAX_DEPTH:
        return None
    if isinstance(value, str):
        return as_text(value)
    if not isinstance(value, Mapping):
        return None
    text = first_text(value, _QUERY_KEYS)
    if text is not None:
        return text
    for key in _NESTED_KEYS:
        if key in value:
            text = _query_in(value[key], depth + 1)
            if text is not None:
                return text
    args = value.get("args")
    if isinstance(args, Sequence) and not isinstance(args, str) and args:
        return as_text(args[0])
    return None
