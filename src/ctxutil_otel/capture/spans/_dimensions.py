"""What a closed turn's spans say about who answered and who sent it, read once per turn when it is
converted (never in ``on_end`` of each span): the sender's identity (the Resource), the response id and
the dimensions (docs/slices.md).

Dimension sources (the first present wins):

* ``gen_ai.request.model``: the generation span's ``gen_ai.request.model``, else ``gen_ai.response.model``,
  else OpenInference ``llm.model_name``;
* ``gen_ai.provider.name``: its ``gen_ai.provider.name``, else the older ``gen_ai.system``, else
  OpenInference ``llm.provider``, else ``llm.system``;
* ``ctxutil.chain.name``: the name of the span that closed the turn (the chain span enclosing retrieval
  and generation, or the service's local root);
* ``ctxutil.retriever.name``: the first retrieval span's name;
* ``ctxutil.metadata.<key>``: ``<key>``, else ``metadata.<key>``, else the key of OpenInference's JSON
  ``metadata`` attribute, on the closing span, then the generation span, then the retrieval spans.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from ..._dimension_keys import dimension_text, metadata_dimension
from ...emit._names import (
    ATTR_CHAIN_NAME,
    ATTR_PROVIDER_NAME,
    ATTR_REQUEST_MODEL,
    ATTR_RESPONSE_ID,
    ATTR_RETRIEVER_NAME,
    DIMENSION_METADATA_PREFIX,
)
from ._model import as_mapping

__all__ = [
    "SENDER_RESOURCE_KEYS",
    "attributes_of",
    "dimensions",
    "generation_facts",
    "response_id",
    "sender",
]

#: Resource attributes naming the sending application (``deployment.environment`` is the older name).
SENDER_RESOURCE_KEYS: Final = (
    "service.name",
    "service.namespace",
    "deployment.environment.name",
    "deployment.environment",
)
_MODEL_KEYS: Final = ("gen_ai.request.model", "gen_ai.response.model", "llm.model_name")
_PROVIDER_KEYS: Final = ("gen_ai.provider.name", "gen_ai.system", "llm.provider", "llm.system")
_GENERATION_KEYS: Final = frozenset((*_MODEL_KEYS, *_PROVIDER_KEYS, ATTR_RESPONSE_ID))
_SENDER_KEYS: Final = frozenset(SENDER_RESOURCE_KEYS)


def attributes_of(span: object) -> Mapping[str, object]:
    """The span's attributes (``{}`` when it has none or is ``None``)."""
    attributes = getattr(span, "attributes", None)
    return attributes if isinstance(attributes, Mapping) else {}


def _pick(attributes: Mapping[str, object], wanted: frozenset[str]) -> dict[str, object]:
    """The entries of ``attributes`` whose key is in ``wanted``, in one pass over its keys: the SDK's
    span attributes (a read-only view of ``BoundedAttributes``) answer a missing key through a raised
    ``KeyError`` (~0.6 us each), iterating their keys costs no exception."""
    if type(attributes) is dict:
        return {key: attributes[key] for key in wanted if key in attributes}
    return {key: attributes[key] for key in attributes if key in wanted}


def _first(found: Mapping[str, object], keys: Sequence[str]) -> str | None:
    for key in keys:
        value = dimension_text(found.get(key))  # a NaN or infinite number is none
        if value is not None:
            return value
    return None


def sender(span: object) -> dict[str, str] | None:
    """The :data:`SENDER_RESOURCE_KEYS` of the span's Resource that are non-empty strings, or ``None``."""
    resource = getattr(getattr(span, "resource", None), "attributes", None)
    if not isinstance(resource, Mapping):
        return None
    picked = _pick(resource, _SENDER_KEYS)
    found = {
        key: value for key in SENDER_RESOURCE_KEYS if isinstance(value := picked.get(key), str) and value
    }
    return found or None


def generation_facts(span: object) -> dict[str, object]:
    """The attributes of a generation span this module reads (model, provider, response id), in one pass."""
    return _pick(attributes_of(span), _GENERATION_KEYS)


def response_id(facts: Mapping[str, object]) -> str | None:
    """``gen_ai.response.id`` of :func:`generation_facts` when it is a non-empty string."""
    value = facts.get(ATTR_RESPONSE_ID)
    return value if isinstance(value, str) and value else None


def dimensions(
    generated: Mapping[str, object],
    retrievals: Sequence[object],
    closing: object,
    metadata_keys: Sequence[str],
    generation: object = None,
) -> dict[str, str | int | float | bool]:
    """The turn's raw dimensions (module docstring) from its generation span (``generated``: its
    :func:`generation_facts`; ``generation``: the span, for metadata keys), retrieval spans and the span
    that closed it (each may be ``None``); unknown ones are absent."""
    out: dict[str, str | int | float | bool] = {}
    if generated:
        model = _first(generated, _MODEL_KEYS)
        if model is not None:
            out[ATTR_REQUEST_MODEL] = model
        provider = _first(generated, _PROVIDER_KEYS)
        if provider is not None:
            out[ATTR_PROVIDER_NAME] = provider
    chain = getattr(closing, "name", None)
    if isinstance(chain, str) and chain:
        out[ATTR_CHAIN_NAME] = chain
    retriever = next((n for r in retrievals if isinstance(n := getattr(r, "name", None), str) and n), None)
    if retriever is not None:
        out[ATTR_RETRIEVER_NAME] = retriever
    if metadata_keys:
        wanted = frozenset((*metadata_keys, *(f"metadata.{key}" for key in metadata_keys), "metadata"))
        picked = [
            _pick(attributes_of(s), wanted) for s in (closing, generation, *retrievals) if s is not None
        ]
        sources = [found for found in picked if found]
        for key in metadata_keys:
            value = _metadata_value(sources, key)
            if value is not None:
                out[f"{DIMENSION_METADATA_PREFIX}.{key}"] = value
    return out


def _metadata_value(sources: Sequence[Mapping[str, object]], key: str) -> str | int | float | bool | None:
    """A metadata key's value: a non-empty ``str``, or a number / boolean as given (the emitter's limiter
    turns it into text, or ``_OTHER`` when too long to keep whole); other types (arrays) are not read."""
    flat = f"metadata.{key}"
    for found in sources:
        value = metadata_dimension(key, found.get(key))
        if value is None:
            value = metadata_dimension(key, found.get(flat))
        if value is None and "metadata" in found:
            metadata = as_mapping(found["metadata"])  # OpenInference: a JSON object string
            value = None if metadata is None else metadata_dimension(key, metadata.get(key))
        if value is not None:
            return value
    return None
