"""Selection rules, the model: which interactions are evaluated (the decision: ``sampling._rules``).

An ordered list of :class:`SelectionRule`; the first rule whose every condition matches an interaction
decides, with its own ``sample_rate`` (the trace-id ratio rule of ``sampling._sampler``, so the decision stays
deterministic per trace id within a rule); an interaction no rule matches falls back to the evaluator's
``sample_rate``. The precedent is Datadog's ``DD_LLMOBS_EVALUATOR_SAMPLING_RULES`` (a JSON list of rules,
each with ``sample_rate`` and match fields, first match wins).

What each capture path knows (:class:`SelectionFacts`): the LangChain callback gives the root run's name,
tags and metadata; the span processor and ``serve`` give the sender's ``service.name``, the enclosing span's
name and its attributes. A condition on a fact the path does not know does not match: a rule written for
spans never selects callback traffic, and the reverse.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

__all__ = ["SelectionDecision", "SelectionFacts", "SelectionRule", "parse_rules"]

AttributeScalar = str | bool | int | float


@dataclass(frozen=True, slots=True)
class SelectionFacts:
    """What a capture path knows of an interaction when it decides (all optional; ``None`` = unknown).

    Attributes:
        root_name: The LangChain root run's name (callback), or the enclosing span's name (spans).
        tags: The root run's LangChain tags (callback).
        metadata: The root run's LangChain metadata (callback); values compared as strings.
        service_name: The sender's ``service.name`` resource attribute (span processor, ``serve``).
        attributes: The enclosing span's attributes (span processor, ``serve``).
    """

    root_name: str | None = None
    tags: Sequence[str] | None = None
    metadata: Mapping[str, object] | None = None
    service_name: str | None = None
    attributes: Mapping[str, object] | None = field(default=None)


class SelectionRule(BaseModel):
    """One rule: match conditions (all must hold; at least one given) and the share of matching traces
    to evaluate.

    Attributes:
        name: Optional label for errors and docs.
        root_name: Glob (``fnmatch`` syntax, case-sensitive) on the root run's or enclosing span's name.
        tags: The root run has any of these LangChain tags.
        metadata: The root run's LangChain metadata has each key with this value (compared as strings).
        service_name: Glob on the sender's ``service.name``.
        attributes: The enclosing span has each attribute with exactly this value.
        sample_rate: Share of matching traces evaluated, in [0, 1] (0 = none of them).
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str | None = None
    root_name: str | None = None
    tags: list[str] | None = Field(default=None, min_length=1)
    metadata: dict[str, str] | None = Field(default=None, min_length=1)
    service_name: str | None = None
    attributes: dict[str, AttributeScalar] | None = Field(default=None, min_length=1)
    sample_rate: Annotated[float, Field(ge=0.0, le=1.0)]

    def model_post_init(self, __context: object) -> None:
        conditions = (self.root_name, self.tags, self.metadata, self.service_name, self.attributes)
        if all(c is None for c in conditions):
            raise ValueError(
                "a rule needs at least one condition (root_name, tags, metadata, service_name, attributes); "
                "for all traffic set sample_rate instead"
            )


@dataclass(frozen=True, slots=True)
class SelectionDecision:
    """Whether to evaluate, and which rule decided (``None`` = no rule matched: the fallback rate did)."""

    selected: bool
    rule: int | None


_RULES = TypeAdapter(list[SelectionRule])


def parse_rules(value: str | Sequence[SelectionRule | Mapping[str, object]]) -> list[SelectionRule]:
    """Rules from JSON text (the ``CTXUTIL_SELECTION_RULES`` form) or from a list of rules or mappings.

    Raises:
        ValueError: naming the rule (its position, and its ``name`` when it has one) and the field, for
            invalid JSON, an unknown field, a rate outside [0, 1], or a rule with no condition.
    """
    try:
        if isinstance(value, str):
            return _RULES.validate_json(value)
        return _RULES.validate_python(list(value))
    except ValidationError as exc:
        raise ValueError(_describe(exc, value)) from None


def _describe(exc: ValidationError, value: object) -> str:
    parts = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = list(error["loc"])
        if error["type"] == "json_invalid":
            parts.append(f"selection rules: invalid JSON ({error['msg']})")
            continue
        first = loc[0] if loc else None
        if isinstance(first, int):
            index = first
            loc = loc[1:]
            where = f"rule {index}"
            name = _rule_name(value, index)
            if name:
                where += f" ({name!r})"
            field_name = ".".join(str(p) for p in loc)
            parts.append(f"{where}: {field_name + ': ' if field_name else ''}{error['msg']}")
        else:
            parts.append(f"selection rules: {error['msg']}")
    return "; ".join(parts[:3])


def _rule_name(value: object, index: int) -> str | None:
    try:
        rules = json.loads(value) if isinstance(value, str) else value
        rule = rules[index]  # type: ignore[index]
        name = rule.get("name") if isinstance(rule, Mapping) else getattr(rule, "name", None)
    except Exception:  # the name is a courtesy in an error message; its absence is not an error
        return None
    return name if isinstance(name, str) else None
