"""What the LangChain handler tells the Evaluator about a root run: exactly one outcome per root.

* A root's first retrieval: :meth:`RootAccounting.sample` (``Evaluator.admit``, which counts it captured
  and answers with a ticket the root then holds, or a refusal already counted).
* Its end: :meth:`RootAccounting.finished` submits the interaction on the root's ticket, or drops it with
  why it cannot be judged.
* Its failure: :meth:`RootAccounting.failed` (``chain_error``).
* Lost before its end (evicted for ``run_ttl_s`` / ``max_pending_runs``, or still running at shutdown):
  :meth:`RootAccounting.lost`. A root that had not retrieved yet is counted too (``Evaluator.admit`` with
  ``lost=``: ``sampled_out`` outside the trace-id sample, else dropped with the reason), because whether
  it would have retrieved is unknowable: leaving it out would hide that the bound is too small.
* Left the table while its first retrieval was asking for the decision (outside the run table's lock):
  :meth:`RootAccounting.settle`, called by that retrieval's callback once it has the ticket.

The outcomes, one per captured interaction:
    * ``sampled_out``, or dropped ``rate_limited`` / ``queue_full`` / ``token_budget`` / ``shutdown``:
      ``admit()`` said no; the root's state is freed at once and its later callbacks cost one lock-free
      ``dict`` lookup that misses;
    * ``ticket.submit()`` at the root's end (the Evaluator counts evaluated / not_applicable / failed or
      its own drops);
    * ``not_evaluable``: the root ended without a query or without any answer;
    * ``chain_error``: the root run failed, or ended while its answer model was still running (a stream
      the consumer abandoned: sync and async agree);
    * ``ttl_expired`` / ``pending_full``: evicted (unfinished for ``run_ttl_s`` / the oldest when more than
      ``max_pending_runs`` runs were tracked), before or after its first retrieval; ``shutdown``: still
      running at :meth:`UtilizationCallbackHandler.shutdown`;
    * ``capture_error``: an unexpected error in this handler while finishing the root.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Final, TypeAlias, cast

from . import _extract
from ._run_spans import adopt_run_span
from ._runs import Exit, RootRun
from ._tools import ToolRules, prompt_counts_tools, prompt_tool_chunks

if TYPE_CHECKING:
    from .._accounting import Admission, DropReason
    from .._selection import SelectionFacts
    from ..worker._evaluator import Evaluator
    from ..worker._ticket import Ticket

__all__ = ["CHAIN_ERROR", "RootAccounting"]

#: The root failed, or ended before its answer did (a stream the consumer abandoned).
CHAIN_ERROR: Final[DropReason] = "chain_error"
NOT_EVALUABLE: Final[DropReason] = "not_evaluable"
CAPTURE_ERROR: Final[DropReason] = "capture_error"

#: A root's tool calls as ``_tools.py`` reads them: ``tool_call_id`` -> (name, description, held a
#: retriever run).
_ToolCalls: TypeAlias = "dict[str, tuple[str | None, str | None, bool]]"


class RootAccounting:
    """Counts each root run's outcome in ``evaluator``; errors of its own go to ``failed(name, exc)``."""

    __slots__ = ("_failed", "_metadata_keys", "_tools", "evaluator")

    def __init__(
        self,
        evaluator: Evaluator,
        failed: _extract.OnError,
        *,
        metadata_keys: Sequence[str] = (),
        tools: ToolRules | None = None,
    ) -> None:
        self.evaluator = evaluator
        self._failed = failed
        self._metadata_keys = tuple(metadata_keys)  # metric_dimensions: read into each interaction
        self._tools = tools or ToolRules()  # which tool results in the answering prompt count

    def sample(self, trace_id: int, facts: SelectionFacts | None = None) -> Ticket | Admission | None:
        """``Evaluator.admit`` (``facts``: the root's, for the selection rules): counts the root captured;
        the ticket, or a falsy answer when it is sampled out, not selected or refused."""
        try:
            return self.evaluator.admit(trace_id, facts)
        except Exception as exc:  # contract: never raises; if it does, the root is not captured
            self._failed("sample", exc)
            return None

    def settle(self, root: RootRun, exit: Exit) -> None:
        """Account for a root that left the table (``exit``) while its decision was asked."""
        kind, first, second = exit
        if kind == "finished":
            self.finished(root, first, second)
        elif kind == "failed":
            self.failed(root)
        else:
            self.lost([(root, cast("DropReason", first))])  # ("lost", reason, None)

    def failed(self, root: RootRun) -> None:
        """The root (already removed from the table) failed: ``chain_error`` when it was captured."""
        if root.ticket is not None:
            root.ticket.drop(CHAIN_ERROR)

    def lost(self, roots: Iterable[tuple[RootRun, DropReason]]) -> int:
        """Roots removed before their end, each with its reason; returns how many were captured."""
        captured = 0
        for root, reason in roots:
            if root.ticket is not None:
                root.ticket.drop(reason)
                captured += 1
            else:  # never retrieved: counted without admission
                self.evaluator.admit(root.trace_id, root.facts, lost=reason)
        return captured

    def _tool_calls(self, root: RootRun) -> _ToolCalls:
        """The root's tool calls for ``_tools.py``: ``tool_call_id`` -> (name, description, held a
        retriever run). Reads only this handler's own records of the root (no method of a user's object):
        raises nothing."""
        return {
            call_id: (_text(name), _text(description), any(key in lineage for lineage in root.lineage))
            for call_id, (key, name, description) in root.tool_calls.items()
        }

    def _counts_tools(self, root: RootRun, calls: _ToolCalls) -> bool:
        """Whether a tool result in the answering generation's prompt counts (``_tools.py``; ``calls``: the
        root's, :meth:`_tool_calls`), making no chunk: the question asked of a root that never retrieved,
        before its sampling decision."""
        prompt = root.llm_prompt
        if prompt is None:
            return False
        try:
            return prompt_counts_tools(prompt, self._tools, calls)
        except Exception as exc:
            self._failed("prompt_tools", exc)
            return False

    def _prompt_tools(self, root: RootRun, calls: _ToolCalls) -> list[object] | None:
        """The chunks of the tool results in the answering generation's prompt (``_tools.py``; ``calls``:
        the root's, :meth:`_tool_calls`; ``[]``
        when the counted ones were empty, an empty retrieval); also drops the retrievals made inside a
        tool call whose result never reached that prompt. ``None`` when no tool result counted or the
        answer came from no chat model run (no messages to read). For a root that will be evaluated
        only: the chunks are made here."""
        prompt = root.llm_prompt
        if prompt is None:
            return None
        try:
            chunks, seen = prompt_tool_chunks(prompt, self._tools, calls)
            for call_id, (key, _, _) in root.tool_calls.items():
                if call_id not in seen and not call_id.startswith("run:"):  # never reached the answer
                    for i, lineage in enumerate(root.lineage):
                        if key in lineage:
                            root.retrievals[i] = None
            return chunks
        except Exception as exc:
            self._failed("prompt_tools", exc)
            return None

    def finished(self, root: RootRun, outputs: object, end_inputs: object) -> None:
        """The root (already removed from the table) ended with ``outputs`` (``end_inputs``: the inputs
        LangChain reports with the end, for streamed runs). The cheapest questions first: does it count
        (a never-retrieved root), is it in the sample, did its answer end; its tool results are made
        chunks only for a root that will be evaluated. Whatever propagates (a ``KeyboardInterrupt`` raised
        by a user's object read here) closes its ticket ``capture_error`` first: no ticket is left open."""
        try:
            self._finished(root, outputs, end_inputs)
        except BaseException:
            ticket = root.ticket
            if ticket is not None and not ticket.closed:
                ticket.drop(CAPTURE_ERROR)
            raise

    def _finished(self, root: RootRun, outputs: object, end_inputs: object) -> None:
        ticket = root.ticket
        documents: list[object] | None = None
        # Built once, and only when an answering prompt may hold tool results (both readers need one).
        calls = self._tool_calls(root) if root.llm_prompt is not None else {}
        if ticket is None:
            # Never retrieved. Captured only if its output carries documents (handler on the root only)
            # or its answering prompt holds tool results that count (``_tools.py``).
            try:
                documents = _extract.documents_from_output(outputs)
            except Exception as exc:
                self._failed("documents_from_output", exc)
                return
            if documents is None and not self._counts_tools(root, calls):
                return
            adopt_run_span(root)
            if not self.evaluator.would_sample(root.trace_id, root.facts):
                self.sample(root.trace_id, root.facts)  # counted unselected, before any capture work
                return
        if root.llm_open:  # ended while its answer was still being generated: abandoned mid-stream
            self._drop(root, ticket, CHAIN_ERROR)
            return
        tools = self._prompt_tools(root, calls)
        retrievals: Sequence[Sequence[object] | None] = (
            [documents, tools] if ticket is None else [*root.retrievals, tools]
        )
        try:
            interaction = _extract.interaction_of(
                root, retrievals, outputs, end_inputs, self._failed, self._metadata_keys
            )
        except Exception as exc:
            self._failed("interaction_of", exc)
            interaction, reason = None, CAPTURE_ERROR
        else:
            reason = NOT_EVALUABLE
        if interaction is None:
            self._drop(root, ticket, reason)
        elif ticket is not None:
            ticket.submit(interaction)
        elif admitted := self.sample(root.trace_id, root.facts):  # captured only now
            admitted.submit(interaction)

    def _drop(self, root: RootRun, ticket: Ticket | None, reason: DropReason) -> None:
        """Drop the root's interaction: on its ticket, or, never admitted, counted without spending
        admission on it."""
        if ticket is None:
            self.evaluator.admit(root.trace_id, root.facts, lost=reason)
        else:
            ticket.drop(reason)


def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None
