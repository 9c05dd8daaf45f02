"""Outcome accounting of the evaluator: the counters and their frozen snapshot."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .._accounting import OutcomeKey

__all__ = ["EvaluatorStats"]


def _frozen(mapping: Mapping[str, int]) -> Mapping[str, int]:
    return MappingProxyType(dict(mapping))


@dataclass(frozen=True, kw_only=True)
class EvaluatorStats:
    """A consistent snapshot of the evaluator's counters (all counts since construction, or since the
    ``os.fork()`` that created this process).

    Attributes:
        captured: Interactions offered to :meth:`Evaluator.admit` (``lost=`` ones included).
        sampled_out: Not selected by the trace-id ratio sampler (``sample_rate``; no selection rule
            matched).
        not_selected: A selection rule matched and its own ``sample_rate`` did not select the trace.
        dropped: Refused, or their ticket dropped, by :data:`~ctxutil_otel.worker.DropReason` (each explained
            there).
        evaluated: Scored (label ``pass`` or ``fail``).
        not_applicable: Judged, but no chunk was retrieved or relevant (label ``not_applicable``).
        failed: Evaluation failed, by ``error.type`` (``timeout``, ``invalid_input``, ``worker_crashed``,
            ``internal_error``, the judge's, or ``_OTHER`` for an exception that is no judge error).
        in_flight: Taken by the worker and not finished yet.
        queue_size: Waiting in the queue.
        emit_errors: Results the emitter raised on (the outcome is still counted; the emitter's
            failure never affects the worker).
        cpu_throttled_s: Wall seconds the worker waited, with interactions queued, because its CPU
            budget (``max_worker_cpu_fraction``) was spent; a wait in progress included; at most the
            wait the budget asked for each time (the worker's loop blocked past it, by a slow exporter,
            is not throttling). 0.0 when the budget is off.
        cpu_throttled: Whether the worker is waiting on its CPU budget right now (within the wait
            the budget asked for).

    Invariant once idle (nothing queued, in flight, or sampled and still being captured):
    ``captured == sampled_out + not_selected + sum(dropped) + evaluated + not_applicable + sum(failed)``.
    """

    captured: int = 0
    sampled_out: int = 0
    not_selected: int = 0
    dropped: Mapping[str, int] = field(default_factory=dict)
    evaluated: int = 0
    not_applicable: int = 0
    failed: Mapping[str, int] = field(default_factory=dict)
    in_flight: int = 0
    queue_size: int = 0
    emit_errors: int = 0
    cpu_throttled_s: float = 0.0
    cpu_throttled: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "dropped", _frozen(self.dropped))
        object.__setattr__(self, "failed", _frozen(self.failed))

    def __repr__(self) -> str:
        return (
            f"EvaluatorStats(captured={self.captured}, sampled_out={self.sampled_out}, "
            f"not_selected={self.not_selected}, "
            f"dropped={dict(self.dropped)}, evaluated={self.evaluated}, "
            f"not_applicable={self.not_applicable}, failed={dict(self.failed)}, "
            f"in_flight={self.in_flight}, queue_size={self.queue_size}, "
            f"emit_errors={self.emit_errors}, cpu_throttled_s={self.cpu_throttled_s:.3f}, "
            f"cpu_throttled={self.cpu_throttled})"
        )

    @classmethod
    def from_outcomes(cls, outcomes: Mapping[OutcomeKey, int], **fields: Any) -> EvaluatorStats:
        """The stats whose :meth:`outcomes` are ``outcomes`` (the inverse of :meth:`outcomes`); the
        other fields (``captured``, ``in_flight``, ...) by name."""
        dropped: dict[str, int] = {}
        failed: dict[str, int] = {}
        single: dict[str, int] = {"sampled_out": 0, "not_selected": 0, "evaluated": 0, "not_applicable": 0}
        for (kind, detail), n in outcomes.items():
            if kind == "dropped":
                dropped[detail or "unknown"] = dropped.get(detail or "unknown", 0) + n
            elif kind == "failed":
                failed[detail or "unknown"] = failed.get(detail or "unknown", 0) + n
            else:
                single[kind] += n
        return cls(
            sampled_out=single["sampled_out"],
            not_selected=single["not_selected"],
            evaluated=single["evaluated"],
            not_applicable=single["not_applicable"],
            dropped=dropped,
            failed=failed,
            **fields,
        )

    @property
    def dropped_total(self) -> int:
        return sum(self.dropped.values())

    @property
    def failed_total(self) -> int:
        return sum(self.failed.values())

    @property
    def finished(self) -> int:
        """Interactions that reached their one outcome."""
        return (
            self.sampled_out
            + self.not_selected
            + self.dropped_total
            + self.evaluated
            + self.not_applicable
            + self.failed_total
        )

    @property
    def pending(self) -> int:
        """``captured - finished``: queued, in flight, or admitted and their ticket not yet closed."""
        return self.captured - self.finished

    def outcomes(self) -> dict[tuple[str, str | None], int]:
        """Counts keyed ``(outcome, detail)``: detail is the drop reason, the failure's ``error.type``,
        or ``None`` for ``sampled_out``, ``not_selected``, ``evaluated`` and ``not_applicable`` (always
        present)."""
        counts: dict[tuple[str, str | None], int] = {
            ("sampled_out", None): self.sampled_out,
            ("not_selected", None): self.not_selected,
            ("evaluated", None): self.evaluated,
            ("not_applicable", None): self.not_applicable,
        }
        counts.update({("dropped", reason): n for reason, n in self.dropped.items()})
        counts.update({("failed", error_type): n for error_type, n in self.failed.items()})
        return counts
