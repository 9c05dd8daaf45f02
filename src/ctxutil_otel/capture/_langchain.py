"""``UtilizationCallbackHandler``: capture RAG interactions from LangChain callbacks.

One interaction per ROOT run (a run with no parent, and no run of this handler in the LangChain context
it started in): the query from the root's inputs (else the inputs reported with its end, else the first
retriever's query), the documents of the OUTERMOST retrieval steps under the root in start order (a
retriever inside a retriever, or under a chain step that returns a list of documents, is part of that
step), the answer from the last answer-model run that ended under the root (a model run inside a
retrieval is part of it; else its streamed tokens, else the root's output). It is submitted to the
:class:`~ctxutil_otel.worker.Evaluator` when the root run ends. docs/capture.md gives the rules with the
shapes they cover.

When is an interaction *captured* (``Evaluator.admit`` is called, which counts it)?
    At the first retrieval under a root: only then is the root known to be a RAG interaction. Roots that
    never retrieve are not counted (a root model run is not even tracked); a root *retriever* run is a
    standalone retrieval with no generation, counted only in :attr:`standalone_retrievals`. Exceptions:
    a root whose *output* carries ``Document`` objects (``RetrievalQA(return_source_documents=True,
    callbacks=[handler])``, where the handler sees only the root) is captured at its end; a root evicted
    or still running at shutdown is counted whether or not it retrieved.

Every captured interaction then ends in exactly one outcome: ``_root_accounting.py`` lists them and
counts them.

Hot path: ``run_inline = True`` (the async callback manager calls the handler on the event loop, in
order, instead of hopping to a thread pool per event; each callback is a few dict operations and never
blocks); ``raise_error = False`` and every callback runs under one guard (``_guard.py``: an error is
logged once per callback at debug level and counted in :attr:`callback_errors`).
``on_chat_model_start`` is implemented so LangChain never falls back to stringifying messages.

Where a new run goes (root, child, retrieval, nothing) is ``_run_starts.py``; the runs are held in
``_runs.py``'s run table; what becomes of each captured root is ``_root_accounting.py``.

Trace: when an OpenTelemetry span is active at the root's start its trace id is the sampling key and
its span context the interaction's parent; otherwise the trace id is ``random.getrandbits(128)`` (not a
UUID4, whose low 64 bits hold fixed version/variant bits and would skew the trace-id ratio sampler)
and the parent is ``None`` (the emitter opens a root span ``rag.interaction`` from the start/end times).

Scope: attach the handler to the outermost runnable (``config={"callbacks": [handler]}``,
``chain.with_config(callbacks=[handler])`` or a legacy chain's ``callbacks=``). Handing it explicitly to
an inner runnable as well (a LangGraph node's retriever, a tool's) is fine: such runs are attached to
the run they started in. A handler attached only to an inner runnable sees runs whose parent it never
saw; they are ignored.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from . import _extract
from ._evaluator_args import resolve_evaluator
from ._guard import ErrorCounter, on_tracked_run, stop_on_exception
from ._root_accounting import RootAccounting
from ._run_starts import RunStarts
from ._runs import RootRun, RunTable
from ._tools import ToolRules

if TYPE_CHECKING:
    from .._settings import Settings
    from ..worker._evaluator import Evaluator
    from ..worker._stats import EvaluatorStats

__all__ = ["UtilizationCallbackHandler"]


class UtilizationCallbackHandler(BaseCallbackHandler):
    """LangChain callback handler that submits each RAG interaction to an Evaluator.

    Args:
        evaluator: The :class:`~ctxutil_otel.worker.Evaluator` to sample and submit to. ``None``
            builds one from :class:`~ctxutil_otel._settings.Settings` (``settings_overrides`` >
            ``CTXUTIL_*`` environment > defaults); the handler then owns it.
        clock: Monotonic clock in seconds for the run TTL (default ``time.monotonic``; for tests).
        **settings_overrides: ``tracer_provider=``, ``meter_provider=``, ``logger_provider=``: where the
            results go (default: the global providers, resolved when first used), and settings by name
            (``sample_rate=0.1``, ``run_ttl_s=60``, ...). With an
            explicit ``evaluator`` only the capture settings ``run_ttl_s`` and ``max_pending_runs``
            are accepted (the others configure the evaluator).

    Raises:
        ctxutil_otel._settings.SettingsError: (a ``ValueError``) for an unknown setting or an
            invalid value, naming it.
        TypeError: for evaluator settings passed together with an explicit ``evaluator``.
    """

    raise_error: bool = False
    run_inline: bool = True

    def __init__(
        self,
        evaluator: Evaluator | None = None,
        *,
        clock: Callable[[], float] | None = None,
        **settings_overrides: Any,
    ) -> None:
        super().__init__()
        evaluator, settings = resolve_evaluator(evaluator, settings_overrides, owner="the handler")
        self.evaluator: Evaluator = evaluator
        self.settings: Settings = settings
        self._runs = RunTable(
            run_ttl_s=settings.run_ttl_s,
            max_pending_runs=settings.max_pending_runs,
            clock=clock or time.monotonic,
        )
        self._errors = ErrorCounter()
        self._outcomes = RootAccounting(
            evaluator,
            self._errors,
            metadata_keys=getattr(settings, "metric_dimensions", ()),
            tools=ToolRules(
                tuple(getattr(settings, "retrieval_tools", ())),
                tuple(getattr(settings, "excluded_tools", ())),
            ),
        )
        self._root_of = self._runs.root_of
        # Facts for the selection rules are read at a root's start only when there are rules.
        self._starts = RunStarts(
            self, self._runs, self._outcomes, select=bool(getattr(settings, "selection_rules", ()))
        )

    # --- what the handler listens to ------------------------------------------------------------

    @property
    def ignore_retry(self) -> bool:
        return True

    @property
    def ignore_custom_event(self) -> bool:
        return True

    # --- public API ------------------------------------------------------------------------------

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        """Wait up to ``timeout_millis`` milliseconds for submitted interactions to be evaluated
        (delegates to the evaluator). Runs still in progress are not affected."""
        return self.evaluator.force_flush(timeout_millis)

    def shutdown(self, timeout_millis: int | None = None) -> bool:
        """Stop capturing and shut the evaluator down within ``timeout_millis`` milliseconds (default:
        the evaluator's ``shutdown_timeout_s`` setting).

        Root runs still in progress are counted dropped ``shutdown`` (one that had not retrieved yet
        too, or ``sampled_out`` outside the sample) and their later callbacks are ignored. Returns
        ``True`` when no root run was in progress and the evaluator finished everything in time."""
        left = self._outcomes.lost((root, "shutdown") for root in self._runs.drain())
        return self.evaluator.shutdown(timeout_millis) and left == 0

    def stats(self) -> EvaluatorStats:
        """The evaluator's accounting (captured, sampled_out, dropped{reason}, evaluated, ...)."""
        return self.evaluator.stats()

    @property
    def pending_runs(self) -> int:
        """Runs currently tracked (roots and their descendants still running), bounded by the
        ``max_pending_runs`` setting. Unsampled roots and roots without retrieval are not held past
        their decision / end."""
        return len(self._runs)

    @property
    def callback_errors(self) -> dict[str, int]:
        """Unexpected errors inside this handler's callbacks, by callback name (a copy)."""
        return self._errors.snapshot()

    @property
    def standalone_retrievals(self) -> int:
        """Retriever runs seen as roots (no parent run, and no run of this handler in their context):
        retrievals without a generation, which are not RAG interactions and are not counted in
        :meth:`stats`. Growing while ``captured`` does not: the handler is attached to a retriever but
        not to the chain or graph around it."""
        return self._starts.standalone

    # --- chains and tools ----------------------------------------------------------------------

    @stop_on_exception
    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._starts.start(run_id, parent_run_id, inputs, serialized, kwargs)

    @on_tracked_run
    def on_chain_end(
        self, root: RootRun, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        if root.run_id == run_id:
            end_inputs = kwargs.get("inputs")
            if self._runs.finish_root(root, ("finished", outputs, end_inputs)):
                self._outcomes.finished(root, outputs, end_inputs)
        else:
            documents = _extract.documents_of(outputs) if root.lineage else None
            self._runs.end_child(run_id, root, documents)

    @on_tracked_run
    def on_chain_error(
        self,
        root: RootRun,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if root.run_id != run_id:
            self._runs.fail_child(run_id, root)  # the root may still recover (fallbacks, retries)
        elif self._runs.finish_root(root, ("failed", None, None)):
            self._outcomes.failed(root)

    @stop_on_exception
    def on_tool_start(
        self,
        serialized: dict[str, Any] | None,
        input_str: str,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        inputs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        # Tools matter as parents (an agent's retriever tool runs its retriever under the tool run) and
        # as retrieval: their messages in the answering prompt (``_tools.py``).
        self._starts.start_tool(
            run_id, parent_run_id, inputs if inputs is not None else input_str, serialized, kwargs
        )

    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self.on_chain_end(output, run_id=run_id, parent_run_id=parent_run_id)

    def on_tool_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self.on_chain_error(error, run_id=run_id, parent_run_id=parent_run_id)

    # --- retrievers ------------------------------------------------------------------------------

    @stop_on_exception
    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._starts.start_retrieval(run_id, parent_run_id, query, kwargs.get("name"))

    @on_tracked_run
    def on_retriever_end(
        self,
        root: RootRun,
        documents: Sequence[Any],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._runs.end_retrieval(run_id, root, documents)

    def on_retriever_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self.on_chain_error(error, run_id=run_id, parent_run_id=parent_run_id)

    # --- LLMs and chat models ----------------------------------------------------------------------

    @stop_on_exception
    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._starts.start_llm(run_id, parent_run_id, kwargs)

    @stop_on_exception
    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._starts.start_llm(run_id, parent_run_id, kwargs, messages)

    @on_tracked_run
    def on_llm_new_token(
        self,
        root: RootRun,
        token: Any,
        *,
        chunk: Any = None,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._runs.add_token(run_id, root, token)

    @on_tracked_run
    def on_llm_end(
        self, root: RootRun, response: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._runs.end_llm(run_id, root, response)

    @on_tracked_run
    def on_llm_error(
        self,
        root: RootRun,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._runs.fail_child(run_id, root)

    # --- internals ---------------------------------------------------------------------------

    def _failed(self, callback: str, exc: BaseException) -> None:
        self._errors(callback, exc)
