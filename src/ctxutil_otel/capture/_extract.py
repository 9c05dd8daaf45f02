"""Small, independent extractors from LangChain callback payloads (query, documents, answer).

Each function takes whatever LangChain handed to a callback and returns text (or chunks) or ``None``
when it finds nothing usable. They run once per *sampled* interaction, at the root run's end, and the
handler calls each one separately so that one failing does not lose the others.

Shapes understood (LangChain 0.3 / 1.x):

* query: a ``str``; a mapping with a string under ``question``, ``query``, ``input``, ``q``, ...
  (first found wins), or a ``messages`` list (the last human message); a message or list of messages;
  a mapping with exactly one string value.
* answer: an ``LLMResult`` (``Generation.text``; ``ChatGeneration.message.content`` as a string or
  a list of content blocks whose ``text`` parts are joined); streamed tokens; a root output that is a
  ``str``, a message, or a mapping with ``answer`` / ``output`` / ``result`` / ``text`` / ...
* selection facts (:func:`selection_facts`, at a root's start): its name, tags and metadata.
* dimensions (:func:`dimensions_of`, once per interaction at the root's end, from references kept at
  the starts): the answering model and its provider, the root's name, the first retriever's name and
  the ``metric_dimensions`` keys of the root's metadata.
* documents: retriever outputs (any sequence, kept as is); a root output mapping with
  ``source_documents`` / ``documents`` / ``context`` / ``docs`` holding LangChain ``Document`` objects.

:func:`interaction_of` applies the preferences between them for one finished root run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from .._dimension_keys import dimension_text, metadata_dimension
from .._interaction import Interaction
from .._item import document_sequence, is_document
from .._selection import SelectionFacts
from ..emit._names import (
    ATTR_CHAIN_NAME,
    ATTR_PROVIDER_NAME,
    ATTR_REQUEST_MODEL,
    ATTR_RETRIEVER_NAME,
    DIMENSION_METADATA_PREFIX,
)
from ._runs import RootRun

__all__ = [
    "OnError",
    "answer_from_llm_result",
    "answer_from_output",
    "answer_from_tokens",
    "dimensions_of",
    "documents_from_output",
    "documents_of",
    "interaction_of",
    "merge_documents",
    "query_from_inputs",
    "response_id_from_llm_result",
    "run_name",
    "selection_facts",
    "text_of_content",
]

QUERY_KEYS = ("question", "query", "input", "q", "user_input", "user_query", "prompt")
ANSWER_KEYS = ("answer", "output", "result", "text", "output_text", "response", "generation")
DOCUMENT_KEYS = ("source_documents", "documents", "context", "docs", "retrieved_documents")
_T = TypeVar("_T")
OnError = Callable[[str, BaseException], None]
"""Called with the extractor's name and the exception when one extractor fails."""
_HUMAN_TYPES = frozenset({"human", "user"})
_AI_TYPES = frozenset({"ai", "assistant", "AIMessageChunk"})


def text_of_content(content: object) -> str | None:
    """Text of a message ``content``: a ``str`` as is; a list of content blocks joined (``str`` items
    and ``{"type": "text", "text": ...}`` blocks; other blocks such as images or tool calls are
    skipped). ``None`` when there is no text part at all."""
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence) and not isinstance(content, (bytes, bytearray)):
        parts: list[str] = []
        for block in content:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, Mapping):
                text = block.get("text")
                if isinstance(text, str) and block.get("type", "text") in ("text", "output_text"):
                    parts.append(text)
        return "".join(parts) if parts else None
    return None


def _message_text(message: object) -> str | None:
    """Text of a LangChain message (anything with ``content``), else ``None``."""
    if not hasattr(message, "content"):
        return None
    return text_of_content(getattr(message, "content", None))


def _last_message_text(messages: object, types: frozenset[str]) -> str | None:
    """The text of the last message of one of ``types``: LangChain messages, and the forms LangGraph
    accepts as input: ``(role, content)`` pairs and ``{"role": ..., "content": ...}`` mappings."""
    if not isinstance(messages, Sequence) or isinstance(messages, (str, bytes)):
        return None
    for message in reversed(messages):
        if getattr(message, "type", None) in types:
            return _message_text(message)
        if isinstance(message, tuple) and len(message) == 2 and message[0] in types:
            return text_of_content(message[1])
        if isinstance(message, Mapping) and (message.get("role") or message.get("type")) in types:
            return text_of_content(message.get("content"))
    return None


def _non_blank(text: str | None) -> str | None:
    return text if text is not None and text.strip() else None


def query_from_inputs(inputs: object) -> str | None:
    """The user's question in a root run's inputs (or a retriever's query), or ``None``.

    A blank string counts as none (streamed runs start with the placeholder ``{"input": ""}``; their
    real input arrives with the run's end).
    """
    if isinstance(inputs, str):
        return _non_blank(inputs)
    if isinstance(inputs, Mapping):
        for key in QUERY_KEYS:
            value = inputs.get(key)
            text = value if isinstance(value, str) else _message_text(value)
            if _non_blank(text):
                return text
        text = _last_message_text(inputs.get("messages"), _HUMAN_TYPES)
        if _non_blank(text):
            return text
        strings = [value for value in inputs.values() if isinstance(value, str)]
        return _non_blank(strings[0]) if len(strings) == 1 and len(inputs) == 1 else None
    if isinstance(inputs, Sequence) and not isinstance(inputs, (bytes, bytearray)):
        return _non_blank(_last_message_text(inputs, _HUMAN_TYPES))
    return _non_blank(_message_text(inputs))


def answer_from_llm_result(response: object) -> str | None:
    """Text of the first prompt's generations in an ``LLMResult`` (the first with any text), or
    ``None`` when no generation carries text (an empty list, empty content, a tool-call only
    message)."""
    generations = getattr(response, "generations", None)
    if not generations or not isinstance(generations, Sequence):
        return None
    first = generations[0]
    if not isinstance(first, Iterable):
        return None
    for generation in first:
        text = getattr(generation, "text", None)
        if isinstance(text, str) and text:
            return text
        message = getattr(generation, "message", None)
        if message is not None:
            text = _message_text(message)
            if text:
                return text
    return None


def response_id_from_llm_result(response: object) -> str | None:
    """The provider's completion id of an ``LLMResult`` (``gen_ai.response.id``): the first generation's
    ``message.response_metadata["id"]`` (langchain-openai and most chat models), else its
    ``generation_info["id"]``, else ``llm_output["id"]``; ``None`` when none is a non-empty ``str``."""
    candidates: list[object] = []
    generations = getattr(response, "generations", None)
    if isinstance(generations, Sequence) and generations and isinstance(generations[0], Sequence):
        for generation in generations[0][:1]:
            metadata = getattr(getattr(generation, "message", None), "response_metadata", None)
            info = getattr(generation, "generation_info", None)
            for source in (metadata, info):
                if isinstance(source, Mapping):
                    candidates.append(source.get("id"))
    llm_output = getattr(response, "llm_output", None)
    if isinstance(llm_output, Mapping):
        candidates.append(llm_output.get("id"))
    return next((c for c in candidates if isinstance(c, str) and c), None)


def answer_from_tokens(tokens: Sequence[object]) -> str | None:
    """Streamed tokens (``on_llm_new_token``: ``str`` or lists of content blocks) joined, or
    ``None`` when they hold no text."""
    parts = [text for text in map(text_of_content, tokens) if text]
    return "".join(parts) if parts else None


def answer_from_output(outputs: object) -> str | None:
    """The answer in a root run's output: a ``str``, a message, or a mapping with a string (or
    message) under ``answer`` / ``output`` / ``result`` / ``text`` / ... or a ``messages`` list whose
    last AI message has text. ``None`` otherwise."""
    if isinstance(outputs, str):
        return outputs
    if isinstance(outputs, Mapping):
        for key in ANSWER_KEYS:
            value = outputs.get(key)
            text = value if isinstance(value, str) else _message_text(value)
            if text is not None:
                return text
        return _last_message_text(outputs.get("messages"), _AI_TYPES)
    return _message_text(outputs)


def documents_of(output: object) -> list[object] | None:
    """``output`` when it is a non-empty ``list`` made entirely of LangChain ``Document`` s (what a
    retriever, reranker or filter step returns), else ``None``. Cheap on other outputs: one type check."""
    if type(output) is not list or not output:
        return None
    return output if all(is_document(item) for item in output) else None


def documents_from_output(outputs: object) -> list[object] | None:
    """LangChain ``Document`` objects a root output carries (``RetrievalQA(return_source_documents=True)``,
    a LangGraph state with ``documents`` / ``context``), or ``None``. Only lists made entirely of
    ``Document``-like objects (a string ``page_content``) count, so ordinary string fields never
    pass for chunks."""
    if not isinstance(outputs, Mapping):
        return None
    for key in DOCUMENT_KEYS:
        value = outputs.get(key)
        if value and (documents := document_sequence(value)) is not None:  # no call for a missing key
            return documents
    return None


def merge_documents(retrievals: Iterable[Sequence[object] | None]) -> list[object]:
    """Concatenate retriever outputs in retriever start order; ``None`` (a retriever that never
    ended, or failed) contributes nothing."""
    merged: list[object] = []
    for documents in retrievals:
        if documents:
            merged.extend(documents)
    return merged


def _safe(on_error: OnError, function: Callable[[Any], _T | None], value: object) -> _T | None:
    if value is None:
        return None
    try:
        return function(value)
    except Exception as exc:
        on_error(function.__name__, exc)
        return None


def _answer(root: RootRun, outputs: object, on_error: OnError) -> str | None:
    """Last LLM run's text > its streamed tokens > the root's output > ``""`` if an LLM ran."""
    if root.llm_ended:
        text = _safe(on_error, answer_from_llm_result, root.llm_response)
        if text:
            return text
        text = _safe(on_error, answer_from_tokens, root.llm_tokens or None)
        if text:
            return text
    text = _safe(on_error, answer_from_output, outputs)
    if text is not None:
        return text
    return "" if root.llm_ended else None


def interaction_of(
    root: RootRun,
    retrievals: Iterable[Sequence[object] | None],
    outputs: object,
    end_inputs: object,
    on_error: OnError,
    metadata_keys: Sequence[str] = (),
) -> Interaction | None:
    """The :class:`Interaction` of a finished root run, or ``None`` when it has no query or no answer
    (not evaluable).

    Preferences: query from the root's inputs > the inputs reported with its end (streamed runs) >
    the first retriever's query; answer as in :func:`_answer`. Each extractor that raises is reported
    to ``on_error`` and counts as having found nothing. ``metadata_keys``: the ``metric_dimensions``
    (see :func:`dimensions_of`).
    """
    end_time_ns = time.time_ns()
    query = (
        _safe(on_error, query_from_inputs, root.inputs)
        or _safe(on_error, query_from_inputs, end_inputs)
        or _safe(on_error, query_from_inputs, root.retriever_query)
    )
    answer = _answer(root, outputs, on_error)
    if query is None or answer is None:
        return None
    return Interaction(
        query=query,
        answer=answer,
        documents=merge_documents(retrievals),
        trace_id=root.trace_id,
        parent=root.parent,
        start_time_ns=root.start_time_ns,
        end_time_ns=end_time_ns,
        source="langchain",
        id=str(root.run_id),
        response_id=_safe(on_error, response_id_from_llm_result, root.llm_response)
        if root.llm_ended
        else None,
        dimensions=_safe(on_error, lambda r: dimensions_of(r, metadata_keys), root) or None,
    )


def run_name(serialized: object, kwargs: object) -> str | None:
    """A run's name from its start callback: its ``name`` keyword (the ``run_name``, or the runnable's
    name), else the serialized runnable's ``name``, else the last part of its ``id``."""
    name = kwargs.get("name") if isinstance(kwargs, Mapping) else None
    if not isinstance(name, str) and isinstance(serialized, Mapping):
        name = serialized.get("name")
        if not isinstance(name, str):
            ids = serialized.get("id")
            name = ids[-1] if isinstance(ids, list) and ids else None
    return name if isinstance(name, str) else None


def selection_facts(serialized: dict[str, Any] | None, kwargs: dict[str, Any]) -> SelectionFacts:
    """What the selection rules see of a root run, from its start callback: the run's ``name`` (its
    ``run_name``, else the serialized runnable's name), its ``tags`` and ``metadata`` (as LangChain
    passes them: the config's plus the runnable's own)."""
    name = run_name(serialized, kwargs)
    tags = kwargs.get("tags")
    metadata = kwargs.get("metadata")
    return SelectionFacts(
        root_name=name,
        tags=tags if isinstance(tags, list) else None,
        metadata=metadata if isinstance(metadata, dict) else None,
    )


# Answering model: LangChain's standard params (``ls_model_name``, set by every chat model in the run's
# metadata), else what the integration put in its invocation params.
_MODEL_PARAMS = ("model", "model_name", "model_id", "deployment_name")


def dimensions_of(root: RootRun, metadata_keys: Sequence[str] = ()) -> dict[str, str | int | float | bool]:
    """The dimensions of a finished root run (docs/slices.md), read once, from references kept at the
    starts: ``gen_ai.request.model`` / ``gen_ai.provider.name`` from the answering model run's metadata
    (``ls_model_name`` / ``ls_provider``; the model also from its ``invocation_params``),
    ``ctxutil.chain.name`` (the root's name), ``ctxutil.retriever.name`` (the first outermost retriever's)
    and ``ctxutil.metadata.<key>`` for ``metadata_keys`` found in the root's metadata (else the answering
    model run's, which LangChain passes the config's metadata to). Raw values: the emitter bounds them.
    Unknown ones are absent."""
    out: dict[str, str | int | float | bool] = {}
    start = root.llm_start if isinstance(root.llm_start, Mapping) else {}
    llm_metadata = start.get("metadata")
    llm_metadata = llm_metadata if isinstance(llm_metadata, Mapping) else {}
    model = dimension_text(llm_metadata.get("ls_model_name"))
    if model is None:
        params = start.get("invocation_params")
        if isinstance(params, Mapping):
            model = next((m for key in _MODEL_PARAMS if (m := dimension_text(params.get(key)))), None)
    if model is not None:
        out[ATTR_REQUEST_MODEL] = model
    provider = dimension_text(llm_metadata.get("ls_provider"))
    if provider is not None:
        out[ATTR_PROVIDER_NAME] = provider
    chain = root.facts.root_name if root.facts is not None else run_name(root.serialized, root.start_kwargs)
    if chain:
        out[ATTR_CHAIN_NAME] = chain
    retriever = dimension_text(root.retriever_name)
    if retriever is not None:
        out[ATTR_RETRIEVER_NAME] = retriever
    if metadata_keys:
        kwargs = root.start_kwargs
        metadata = kwargs.get("metadata") if isinstance(kwargs, Mapping) else None
        sources = [m for m in (metadata, llm_metadata) if isinstance(m, Mapping) and m]
        for key in metadata_keys:
            for source in sources:
                value = metadata_dimension(key, source.get(key))  # as given: the emitter bounds it
                if value is not None:
                    out[DIMENSION_METADATA_PREFIX + "." + key] = value
                    break
    return out
