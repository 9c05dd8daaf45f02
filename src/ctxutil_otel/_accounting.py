"""The accounting vocabulary: the outcome every captured interaction ends in, and why one is dropped.

DESIGN.md, "Accounting invariant": every captured interaction ends in exactly one :data:`Outcome`;
a ``dropped`` one carries a :data:`DropReason`, a ``failed`` one its ``error.type``. These are the
values of the ``outcome`` and ``reason`` attributes of ``ctxutil.evaluations`` and the keys of
``Evaluator.stats()``: plain strings on the wire, a closed set to the type checker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias, get_args

__all__ = [
    "DROP_REASONS",
    "ERROR_TYPE_OTHER",
    "WORKER_ERROR_TYPES",
    "Admission",
    "DropReason",
    "Outcome",
    "OutcomeKey",
    "WorkerErrorType",
    "checked_error_type",
    "refused",
]

#: The six outcomes of one captured interaction. ``sampled_out``: the ``sample_rate`` (no selection rule
#: matched) did not select its trace; ``not_selected``: a matching selection rule's own ``sample_rate``
#: did not (``selection_rules``, docs/selection.md).
Outcome: TypeAlias = Literal[
    "sampled_out", "not_selected", "dropped", "evaluated", "not_applicable", "failed"
]

#: Why a captured, sampled interaction was dropped (never evaluated):
#:
#: * ``rate_limited``: over ``max_evaluations_per_second`` (refused at admission);
#: * ``token_budget``: the judge token budget per minute was spent;
#: * ``queue_full``: the evaluation queue held ``max_queue_size`` interactions (the newest is dropped);
#: * ``shutdown``: refused after shutdown, or still queued / running at its deadline, or captured and
#:   unfinished when the capture path shut down;
#: * ``sdk_disabled``: ``OTEL_SDK_DISABLED=true``: results could go nowhere, so nothing is evaluated;
#: * ``not_evaluable``: no query or no answer was captured (content not recorded by the instrumentation);
#: * ``chain_error``: the evaluated LangChain root run failed;
#: * ``ttl_expired``: a run or trace stayed unfinished for ``run_ttl_s`` seconds (the application's runs
#:   never end: fix that, or raise ``run_ttl_s``);
#: * ``pending_full``: the oldest run or trace held, younger than ``run_ttl_s``, when the capture path's
#:   bound (``max_pending_runs``, buffered bytes) was full (raise the bound);
#: * ``capture_error``: an unexpected error of the capture path while assembling the interaction;
#: * ``internal_error``: an unexpected error of the evaluator while queueing it, or an admitted
#:   interaction whose ticket was garbage-collected open (a bug of the code holding it: ``TicketWarning``).
DropReason: TypeAlias = Literal[
    "rate_limited",
    "token_budget",
    "queue_full",
    "shutdown",
    "sdk_disabled",
    "not_evaluable",
    "chain_error",
    "ttl_expired",
    "pending_full",
    "capture_error",
    "internal_error",
]

#: The ``error.type`` of a ``failed`` interaction that the evaluator itself gives (judges add their own,
#: e.g. ``verdict_mismatch``; an unexpected exception, which is no judge error, counts as
#: :data:`ERROR_TYPE_OTHER`, its class name kept in the result's local ``error_message``):
#:
#: * ``timeout``: the evaluation ran past ``evaluation_timeout_s``;
#: * ``invalid_input``: the captured interaction does not convert (a chunk of an unsupported type, a chunk
#:   whose reading raises, more than ``MAX_CHUNKS`` chunks);
#: * ``worker_crashed``: ``worker="process"``: the child process evaluating it ended (crashed, killed, out
#:   of memory) before answering; a new child takes the next evaluations;
#: * ``internal_error``: an unexpected error of the evaluator itself while evaluating an admitted
#:   interaction (a bug: logged with its traceback; no result is emitted, only the count).
WorkerErrorType: TypeAlias = Literal["timeout", "invalid_input", "worker_crashed", "internal_error"]

#: Every :data:`WorkerErrorType`.
WORKER_ERROR_TYPES: Final[tuple[WorkerErrorType, ...]] = get_args(WorkerErrorType)

#: ``error.type`` of a failure whose type is none of the vocabulary's (OpenTelemetry's semantic conventions'
#: catch-all): an exception that is no :class:`~ctxutil_otel.judges.JudgeError`, or a judge error type that
#: is not low-cardinality snake case (:func:`checked_error_type`).
ERROR_TYPE_OTHER: Final = "_OTHER"
_ERROR_TYPE = re.compile(r"[a-z][a-z0-9_.]{0,63}")


def checked_error_type(value: object) -> str:
    """``value`` when it has the shape of the ``error.type`` vocabulary (lower-case letters, digits, ``_``
    and ``.``, starting with a letter, at most 64 characters: ``timeout``, ``http_5xx``, a custom judge
    error's ``error_type``), else :data:`ERROR_TYPE_OTHER` (an exception class name such as
    ``UnicodeEncodeError``, an empty or overlong value)."""
    if isinstance(value, str) and _ERROR_TYPE.fullmatch(value):
        return value
    return ERROR_TYPE_OTHER


#: ``(outcome, detail)``: the drop reason, the failure's ``error.type``, or ``None`` for the others.
OutcomeKey: TypeAlias = "tuple[Outcome, str | None]"

#: Every :data:`DropReason`.
DROP_REASONS: Final[tuple[DropReason, ...]] = get_args(DropReason)


@dataclass(frozen=True, slots=True)
class Admission:
    """A refusal of ``Evaluator.admit(...)``, already counted: falsy.

    ``admit`` answers an admitted interaction with a ``Ticket`` instead (truthy, ``refused`` ``None``),
    which the caller closes exactly once. A refusal has the ticket's two closers as no-ops, so
    ``evaluator.admit(trace_id).submit(interaction)`` reads the same either way (``False`` when refused).

    Attributes:
        refused: The outcome it was counted in: ``"sampled_out"``, ``"not_selected"`` or the drop
            reason. (``Admission()``, ``refused=None``, is truthy: the shape of an admitted answer.)
    """

    refused: Literal["sampled_out", "not_selected"] | DropReason | None = None

    def __bool__(self) -> bool:
        return self.refused is None

    @property
    def closed(self) -> bool:
        """Always ``True``: a refusal is counted when it is made."""
        return True

    def submit(self, interaction: object) -> bool:
        """Nothing to queue: the interaction was refused (and counted). Returns ``False``."""
        return False

    def drop(self, reason: DropReason) -> None:
        """Nothing to count: the interaction was refused (and counted) already."""


#: The refusals (shared: a refusal allocates nothing).
_REFUSED: Final[dict[str, Admission]] = {
    "sampled_out": Admission("sampled_out"),
    "not_selected": Admission("not_selected"),
    **{reason: Admission(reason) for reason in DROP_REASONS},
}


def refused(outcome: Literal["sampled_out", "not_selected"] | DropReason) -> Admission:
    """The shared :class:`Admission` refused with ``outcome``."""
    return _REFUSED[outcome]
