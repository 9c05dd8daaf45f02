"""The evaluator's outcome counters (not thread-safe: the engine updates and reads them under its lock)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .._accounting import OutcomeKey
from ._stats import EvaluatorStats
from ._ticket import Ticket

__all__ = ["Tally"]

_NO_DETAIL = frozenset({"sampled_out", "not_selected", "evaluated", "not_applicable"})


@dataclass(slots=True)
class Tally:
    """Counts since construction (or since the ``os.fork()`` that re-created it), in the shape of
    :meth:`EvaluatorStats.outcomes`; :meth:`snapshot` turns them into the one stats model."""

    captured: int = 0
    emit_errors: int = 0
    outcomes: dict[OutcomeKey, int] = field(default_factory=dict)

    def count(self, outcome: OutcomeKey) -> None:
        """One interaction's final outcome ``(kind, detail)``: the detail of ``sampled_out``,
        ``not_selected``, ``evaluated`` and ``not_applicable`` is ignored; a missing one of ``dropped`` /
        ``failed`` counts as ``unknown``."""
        kind, detail = outcome
        key: OutcomeKey = (kind, None) if kind in _NO_DETAIL else (kind, detail or "unknown")
        self.outcomes[key] = self.outcomes.get(key, 0) + 1

    def count_unfinished(
        self, queued: Iterable[Ticket], running: Iterable[Ticket]
    ) -> tuple[int, list[float | None]]:
        """At shutdown's deadline: every queued entry and every running one not yet evaluated is
        ``dropped``/``shutdown``; one evaluated and being emitted counts its real outcome. Returns how
        many were left unfinished and the queued entries' reserved judge tokens (to refund)."""
        refunds = []
        left = 0
        for entry in queued:
            self.count(("dropped", "shutdown"))
            refunds.append(entry.reserved)
            left += 1
        for entry in running:
            self.count(entry.outcome or ("dropped", "shutdown"))
            left += entry.outcome is None
        return left, refunds

    def snapshot(
        self, *, in_flight: int, queue_size: int, cpu_throttled_s: float, cpu_throttled: bool
    ) -> EvaluatorStats:
        return EvaluatorStats.from_outcomes(
            self.outcomes,
            captured=self.captured,
            in_flight=in_flight,
            queue_size=queue_size,
            emit_errors=self.emit_errors,
            cpu_throttled_s=cpu_throttled_s,
            cpu_throttled=cpu_throttled,
        )
