"""The one hand-off from a capture path to the evaluator: a :class:`Ticket` per admitted interaction.

``Evaluator.admit(...)`` counts an interaction captured and answers with a ``Ticket`` (admitted) or a
refusal already counted (:class:`~ctxutil_otel.worker.Admission`, falsy). A ticket is closed exactly once:
:meth:`Ticket.submit` hands the interaction to the queue, :meth:`Ticket.drop` counts it ``dropped`` with a
reason of the closed vocabulary (:data:`~ctxutil_otel.worker.DropReason`). It then travels the queue
itself, carrying what the engine needs of it: its sequence number (``force_flush`` waits for it), the
judge tokens reserved from the budget, the selection facts it was admitted with, and its outcome once
known.

Mistakes are bugs the ticket makes visible rather than rules callers must remember:

* a second close changes no count and warns :class:`TicketWarning` (the test suite turns that warning
  into an error: ``pyproject.toml``, ``filterwarnings``);
* a ticket garbage-collected open is counted ``dropped`` ``internal_error`` (so the accounting still
  closes) and warns :class:`TicketWarning`; after the evaluator's shutdown it is counted ``shutdown``,
  quietly. A ticket of the parent process, collected in a forked child, is the parent's: ignored.

The engine's side (``_engine.py``) does the counting under its own lock; the collection of an open ticket
takes no lock (a finalizer may run while any lock is held): the engine folds it in at its next count.
"""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Protocol

from .._accounting import DropReason, OutcomeKey

if TYPE_CHECKING:
    from .._interaction import Interaction
    from .._selection import SelectionFacts

__all__ = ["Ticket", "TicketOwner", "TicketWarning"]


class TicketWarning(RuntimeWarning):
    """A :class:`Ticket` closed twice, or garbage-collected open: a bug of the code holding it."""


class TicketOwner(Protocol):
    """What a ticket needs of the engine that issued it."""

    #: How many forks the engine has been re-created in (read once per ticket, when it is issued).
    generation: int

    def submit(self, ticket: Ticket, interaction: Interaction) -> bool | None:
        """Close ``ticket`` by queueing: ``True`` queued, ``False`` refused (counted), ``None`` when it
        was closed before (nothing counted)."""

    def drop(self, ticket: Ticket, reason: DropReason) -> bool:
        """Close ``ticket`` as dropped: ``False`` when it was closed before (nothing counted)."""

    def collect(self, ticket: Ticket) -> bool:
        """``ticket`` was garbage-collected open: count it (lock-free); ``True`` when that is a bug
        to warn about (not after shutdown, not a forked parent's ticket)."""


class Ticket:
    """One admitted interaction, from ``Evaluator.admit`` until its outcome is counted (truthy).

    Close it exactly once, from any thread; neither method blocks or raises:

    * :meth:`submit` ``(interaction)``: queue it for evaluation (``False`` when admission, asked again,
      refuses it now: counted ``dropped`` with that reason);
    * :meth:`drop` ``(reason)``: it will never be submitted (``chain_error``, ``ttl_expired``,
      ``not_evaluable``, ...): counted ``dropped`` with ``reason``.

    Attributes:
        trace_id: The 128-bit trace id it was admitted under.
        facts: The selection facts it was admitted with (``None`` without rules).
        seq: Its place in the queue once submitted (0 before).
        interaction: What was submitted (``None`` before).
        reserved: Judge tokens reserved from the budget at submit (``None``: no budget).
        outcome: Its outcome once evaluated (counted when it leaves the in-flight map).
        refused: Always ``None`` (an admitted answer; a refusal says how it was counted).
    """

    __slots__ = (
        "_closed",
        "_generation",
        "_owner",
        "facts",
        "interaction",
        "outcome",
        "reserved",
        "seq",
        "trace_id",
    )

    refused: None = None

    def __init__(self, owner: TicketOwner, *, trace_id: int, facts: SelectionFacts | None) -> None:
        self._owner = owner
        self._generation = owner.generation
        self._closed = False
        self.trace_id = trace_id
        self.facts = facts
        self.seq = 0
        self.interaction: Interaction | None = None
        self.reserved: float | None = None
        self.outcome: OutcomeKey | None = None

    def __bool__(self) -> bool:
        return True

    @property
    def closed(self) -> bool:
        """Whether :meth:`submit` or :meth:`drop` was called."""
        return self._closed

    def submit(self, interaction: Interaction) -> bool:
        """Queue ``interaction`` for evaluation; ``True`` when queued. Admission is asked again (the
        queue may have filled since ``admit``): after shutdown -> dropped ``shutdown``; queue full ->
        ``queue_full`` (the newest, this one, is dropped); judge token budget spent -> ``token_budget``
        (its expected tokens are reserved here). The rate cap is not applied again. Never raises."""
        queued = self._owner.submit(self, interaction)
        if queued is None:
            _closed_twice()
            return False
        return queued

    def drop(self, reason: DropReason) -> None:
        """Count it ``dropped`` with ``reason``: it will never be submitted. Never raises."""
        if not self._owner.drop(self, reason):
            _closed_twice()

    def __del__(self) -> None:
        if self._closed:
            return
        try:
            if self._owner.collect(self):
                warnings.warn(
                    TicketWarning(
                        "ctxutil evaluator: an admitted interaction's ticket was garbage-collected without "
                        "submit() or drop(): counted dropped internal_error"
                    ),
                    stacklevel=1,
                )
        except Exception:  # pragma: no cover - interpreter teardown: modules may be gone
            pass

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"Ticket(trace_id={self.trace_id:032x}, seq={self.seq}, {state})"


def _closed_twice() -> None:
    warnings.warn(
        TicketWarning("ctxutil evaluator: a ticket was closed twice (the second close is ignored)"),
        stacklevel=3,
    )
