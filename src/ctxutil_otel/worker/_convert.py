"""Turn a captured :class:`~ctxutil_otel.capture.Interaction` into a :class:`~ctxutil_otel.DatasetItem`.

Decisions (DESIGN.md, "Edge cases"):

* ``query`` ``None`` or blank, or ``answer`` ``None``: the content was not captured, so there is
  nothing to judge: dropped, reason ``not_evaluable`` (no evaluation result is emitted).
* ``answer == ""`` is a real, empty answer: evaluated (0.0 when relevant chunks were retrieved).
* anything :class:`DatasetItem` rejects (``retrieved_content`` that is not a list of chunks or holds more
  than ``MAX_CHUNKS``, a chunk of an unsupported type or whose reading raises, a non-string answer):
  failed, ``error.type`` ``invalid_input``. The message names the field and index, never the text (the
  engine logs it, throttled: ``_drop_log.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import ValidationError

from .._interaction import Interaction
from .._item import MAX_CHUNKS, DatasetItem, chunk_list, chunk_text, is_chunk_iterable
from ..metric._contextual_utilization import ContextualUtilization
from ..metric._results import MetricEvaluationResult

__all__ = ["MetricInfo", "Rejection", "describe", "error_result", "to_dataset_item", "to_strings"]


@dataclass(frozen=True, slots=True)
class Rejection:
    """Why an interaction cannot be evaluated: outcome ``dropped`` or ``failed`` with its detail."""

    outcome: Literal["dropped", "failed"]
    detail: str
    message: str


def _describe(exc: ValidationError) -> str:
    # Field locations and messages only: input values may hold user content.
    parts = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = ".".join(str(p) for p in error["loc"])
        parts.append(f"{loc}: {error['msg']}" if loc else str(error["msg"]))
    return "; ".join(parts)[:500]


def _not_evaluable(interaction: Interaction) -> Rejection | None:
    query = interaction.query
    if query is None or (isinstance(query, str) and not str.strip(query)):  # never a subclass's own strip
        return Rejection("dropped", "not_evaluable", "no query was captured")
    if interaction.answer is None:
        return Rejection("dropped", "not_evaluable", "no answer was captured")
    return None


def to_strings(interaction: Interaction) -> tuple[str, str, list[str]] | Rejection | None:
    """``(query, answer, chunk texts)`` for the process worker to send, without building the
    :class:`DatasetItem` here (its child validates); a :class:`Rejection` as :func:`to_dataset_item` gives
    it; ``None`` when query or answer is not a ``str`` (rare: convert with :func:`to_dataset_item`)."""
    try:
        return _strings(interaction)
    except ValueError as exc:  # ours (chunk_list, chunk_text), worded as pydantic words it in DatasetItem
        return Rejection("failed", "invalid_input", f"retrieved_content: Value error, {exc}"[:500])
    except BaseException as exc:  # the input's own code raised reading it (a __class__, a str subclass)
        return Rejection("failed", "invalid_input", _unexpected(exc))


def _strings(interaction: Interaction) -> tuple[str, str, list[str]] | Rejection | None:
    rejection = _not_evaluable(interaction)
    if rejection is not None:
        return rejection
    query, answer = interaction.query, interaction.answer
    if not isinstance(query, str) or not isinstance(answer, str):
        return None
    chunks = chunk_list(interaction.documents)  # DatasetItem's own check: the same message
    texts = [chunk_text(chunk, i) for i, chunk in enumerate(chunks)]
    return str.__str__(query), str.__str__(answer), texts  # a str subclass as a plain str


def describe(exc: ValidationError) -> str:
    """A validation error's field locations and messages, never the input values."""
    return _describe(exc)


def to_dataset_item(interaction: Interaction) -> DatasetItem | Rejection:
    """The :class:`DatasetItem` to evaluate, or the :class:`Rejection` (see the module docstring)."""
    try:
        rejection = _not_evaluable(interaction)
        if rejection is not None:
            return rejection
        return DatasetItem(
            query=interaction.query,  # type: ignore[arg-type]  # checked above; the model validates
            actual_output=interaction.answer,  # type: ignore[arg-type]
            retrieved_content=interaction.documents,  # type: ignore[arg-type]  # validator normalises
            id=interaction.id,
            metadata=dict(interaction.metadata),
        )
    except ValidationError as exc:
        return Rejection("failed", "invalid_input", _describe(exc))
    except BaseException as exc:  # the input's own code raised reading it (a __class__ that raises)
        return Rejection("failed", "invalid_input", _unexpected(exc))


def _unexpected(exc: BaseException) -> str:
    """An error raised converting that is not a validation error of ours: its class only, its message may
    quote the input (a user object's own error, raised reading it). Any ``BaseException``: this runs on the
    worker, where only a user object raises ``KeyboardInterrupt``, ``SystemExit`` or ``CancelledError``
    (signals reach the main thread, and converting awaits nothing), and one let out would stop the worker
    for every later interaction."""
    return f"converting the interaction raised {type(exc).__name__}"


def _total_chunks(interaction: Interaction) -> int:
    """``ctxutil.total_chunks`` of a failure: 0 for what is no list of chunks or holds too many."""
    documents = interaction.documents
    if not is_chunk_iterable(documents):  # not a list of chunks (record_interaction): none
        return 0
    try:
        total = len(documents)
    except TypeError:
        return 0
    return total if total <= MAX_CHUNKS else 0


@dataclass(frozen=True, slots=True)
class MetricInfo:
    """What a failure result says about the metric and its judge (a process worker's parent knows it
    from the child's first message, without building the judge itself)."""

    metric_name: str
    threshold: float
    judge_name: str
    judge_model: str | None

    @classmethod
    def of(cls, metric: ContextualUtilization) -> MetricInfo:
        judge = metric.judge
        model = getattr(judge, "model", None)
        return cls(
            metric_name=metric.name,
            threshold=metric.threshold,
            judge_name=str(getattr(judge, "name", type(judge).__name__)),
            judge_model=None if model is None else str(model),
        )

    def failure(
        self, error_type: str, explanation: str, *, total_chunks: int, item_id: str | None
    ) -> MetricEvaluationResult:
        """A ``label="error"`` result for a failure outside the metric (``timeout``, ``invalid_input``,
        ``worker_crashed``)."""
        return MetricEvaluationResult.failure(
            metric_name=self.metric_name,
            threshold=self.threshold,
            error_type=error_type,
            explanation=explanation,
            total_chunks=total_chunks,
            judge_name=self.judge_name,
            judge_model=self.judge_model,
            item_id=item_id,
        )

    def failure_of(
        self, interaction: Interaction, error_type: str, explanation: str
    ) -> MetricEvaluationResult:
        """:meth:`failure` for a captured interaction."""
        return self.failure(
            error_type, explanation, total_chunks=_total_chunks(interaction), item_id=interaction.id
        )


def error_result(
    metric: ContextualUtilization, interaction: Interaction, error_type: str, explanation: str
) -> MetricEvaluationResult:
    """A ``label="error"`` result for a failure outside the metric (``timeout``, ``invalid_input``)."""
    return MetricInfo.of(metric).failure_of(interaction, error_type, explanation)
