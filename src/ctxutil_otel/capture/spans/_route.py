"""Routing: which reader reads a finished span, by what the span is rather than the first attribute seen.

A span may carry the marker attributes of several conventions: Traceloop's
``opentelemetry-instrumentation-langchain`` 0.62 writes ``gen_ai.operation.name=vector_db_retrieve`` *and*
``traceloop.span.kind`` on its retriever spans. So every reader whose marker is present is offered the
span, in the order OpenInference (``openinference.span.kind``), OpenTelemetry GenAI
(``gen_ai.operation.name``), OpenLLMetry (``traceloop.span.kind`` / ``llm.request.type``):

1. the first :class:`~._model.Retrieval` or :class:`~._model.Generation` returned wins;
2. a reader that refuses the span (``None``: an operation name it does not know) or only calls it a chain
   is not a dead end: the next reader is asked;
3. when no reader reads it, the span's kind is guessed from its markers (:func:`kind_hint`): a span that
   is evidently a retrieval or a model call (``gen_ai.operation.name`` naming a retrieval, search or
   rerank, or a chat/completion/generation; OpenInference ``RETRIEVER``/``RERANKER``/``LLM``) becomes a
   record whose ``problem`` is ``unrecognised``, so that its turn is counted ``not_evaluable`` instead of
   vanishing; otherwise the chain marker (when a reader gave it) or ``None``;
4. a reader that raises (a bug, or input no test foresaw) is treated like a refusal; if no other reader
   reads the span, it becomes a record of its hinted kind whose ``problem`` is ``capture_error`` (its turn
   is counted ``capture_error``). A failing span whose kind cannot be told re-raises :class:`ReaderError`
   (the processor counts it in ``errors``).

Never raises anything but :class:`ReaderError`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, Literal

from . import _genai, _openinference, _openllmetry
from ._model import CAPTURE_ERROR, CHAIN, UNRECOGNISED, Generation, Part, Retrieval

__all__ = ["MARKER_ATTRIBUTES", "ReaderError", "kind_hint", "read_part"]

#: Attributes whose presence makes a span worth reading (one per convention, two for OpenLLMetry).
MARKER_ATTRIBUTES: Final = frozenset(
    {_openinference.SPAN_KIND, _genai.OPERATION_NAME, _openllmetry.SPAN_KIND, _openllmetry.REQUEST_TYPE}
)

Reader = Callable[[Mapping[str, object]], "Part | None"]
_READERS: Final[tuple[tuple[tuple[str, ...], Reader, str], ...]] = (
    ((_openinference.SPAN_KIND,), _openinference.read, _openinference.CONVENTION),
    ((_genai.OPERATION_NAME,), _genai.read, _genai.CONVENTION),
    ((_openllmetry.SPAN_KIND, _openllmetry.REQUEST_TYPE), _openllmetry.read, _openllmetry.CONVENTION),
)

Kind = Literal["retrieval", "generation"]
_OPENINFERENCE_KINDS: Final[Mapping[object, Kind]] = {
    "RETRIEVER": "retrieval",
    "RERANKER": "retrieval",
    "LLM": "generation",
}
_RETRIEVAL_WORDS: Final = ("retriev", "rerank", "search", "vector_db")
_GENERATION_WORDS: Final = ("chat", "complet", "generat")
_MAX_NAME = 64  # longer operation names are not looked into (a hostile sender's megabyte string)


class ReaderError(Exception):
    """A reader failed on a span whose kind (retrieval or generation) cannot be told."""


def kind_hint(attributes: Mapping[str, object]) -> Kind | None:
    """What a span evidently is from its markers alone: ``"retrieval"``, ``"generation"`` or ``None``.

    OpenInference ``RETRIEVER``/``RERANKER`` -> retrieval, ``LLM`` -> generation; a
    ``gen_ai.operation.name`` (or ``llm.request.type``) containing ``retriev``, ``rerank``, ``search`` or
    ``vector_db`` -> retrieval, ``chat``, ``complet`` or ``generat`` -> generation; a Traceloop entity
    named ``*retriev*`` -> retrieval. Never raises."""
    kind = _OPENINFERENCE_KINDS.get(_hashable(attributes.get(_openinference.SPAN_KIND)))
    if kind is not None:
        return kind
    for key in (_genai.OPERATION_NAME, _openllmetry.REQUEST_TYPE):
        value = attributes.get(key)
        if isinstance(value, str) and len(value) <= _MAX_NAME:
            lowered = value.lower()
            if any(word in lowered for word in _RETRIEVAL_WORDS):
                return "retrieval"
            if any(word in lowered for word in _GENERATION_WORDS):
                return "generation"
    entity = attributes.get("traceloop.entity.name")
    if isinstance(entity, str) and len(entity) <= _MAX_NAME and "retriev" in entity.lower():
        return "retrieval"
    return None


def read_part(attributes: Mapping[str, object]) -> Part | None:
    """Read a finished span's attributes (see the module docstring): a :class:`Retrieval`, a
    :class:`Generation`, the :data:`CHAIN` marker, or ``None`` for a span that is not part of a RAG
    interaction. Raises only :class:`ReaderError`."""
    # One copy into a plain dict: the SDK hands out a mappingproxy over BoundedAttributes, whose misses
    # cost an exception each, and the readers look up many keys.
    attributes = attributes if type(attributes) is dict else dict(attributes)
    chain = False
    offered: str | None = None
    failed: str | None = None
    for markers, reader, convention in _READERS:
        if not any(marker in attributes for marker in markers):
            continue
        offered = offered or convention
        try:
            part = reader(attributes)
        except Exception:
            failed = failed or convention
            continue
        if isinstance(part, (Retrieval, Generation)):
            return part
        chain = chain or part is CHAIN
    if offered is None:
        return None
    kind = kind_hint(attributes)
    if failed is not None:
        if kind is None:
            raise ReaderError(f"the {failed} reader failed on a span of unknown kind")
        return _record(kind, failed, CAPTURE_ERROR)
    if kind is not None:
        return _record(kind, offered, UNRECOGNISED)
    return CHAIN if chain else None


def _record(kind: Kind, convention: str, problem: str) -> Retrieval | Generation:
    if kind == "retrieval":
        return Retrieval(None, None, convention, problem)
    return Generation(None, convention, None, problem)


def _hashable(value: object) -> object:
    return value if isinstance(value, str) else None
