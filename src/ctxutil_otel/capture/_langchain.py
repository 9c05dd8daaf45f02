"""``UtilizationCallbackHandler``: capture RAG interactions from LangChain callbacks.

One interaction per ROOT run (the run whose ``parent_run_id`` is ``None``): the query from the
root's inputs (else the first retriever's query), the documents of every retriever run under the root
merged in retriever START order (deterministic, whatever order they end in), the answer from the last
LLM / chat model run that ended under the root (else its streamed tokens, else the root's output). It
is submitted to the :class:`~ctxutil_otel.worker.Evaluator` when the root run ends.

When is an interaction *captured* (``Evaluator.admit`` is called, which counts it)?
    At the first ``on_retriever_start`` under a root: only then is the root known to be a RAG
    interaction. Roots that never retrieve (a plain LLM call, a chain without a retriever) are never
    counted and their state is dropped silently at their end; a root LLM run is not even tracked.
    (Exception: a root with no retriever run whose *output* carries ``Document`` objects, like
    ``RetrievalQA(return_source_documents=True, callbacks=[handler])`` where the handler sees only the
    root, is captured at its end.)

Every captured interaction then ends in exactly one outcome of the Evaluator's accounting:
    * ``sampled_out``, or dropped ``rate_limited`` / ``queue_full`` / ``token_budget`` / ``shutdown``:
      ``admit()`` said no (the evaluator refuses at capture what it could not take anyway); the
      root's state is freed at once and every later callback of that root costs one lock-free
      ``dict`` lookup that misses, so a saturated evaluator costs the chain no capture work;
    * ``submit()`` at the root's end (the Evaluator counts evaluated / not_applicable / failed or its
      own drops: queue_full when the queue filled meanwhile, token_budget, shutdown);
    * ``abandon("not_evaluable")``: the root ended without a query or without any answer (no LLM
      run and no text output), e.g. a retriever invoked on its own as the root run;
    * ``abandon("chain_error")``: the root run failed (``on_chain_error`` / ``on_retriever_error`` /
      ``on_tool_error`` on the root);
    * ``abandon("ttl_expired")``: the root never ended within ``run_ttl_s`` (raise it, or find why
      the application's runs never end);
    * ``abandon("pending_full")``: the root, younger than ``run_ttl_s``, was the oldest when more than
      ``max_pending_runs`` runs were tracked (more concurrent runs than the bound: raise it);
    * ``abandon("capture_error")``: an unexpected error in this handler while finishing the root.

Hot path: ``run_inline = True`` (the async callback manager calls the handler on the event loop, in
order, instead of hopping to a thread pool per event; each callback is a few dict operations and
never blocks); ``raise_error = False`` and every callback body is wrapped (an error is logged once per
callback at debug level and counted in :attr:`UtilizationCallbackHandler.callback_errors`).
``on_chat_model_start`` is implemented so LangChain never falls back to stringifying messages.

Trace: when an OpenTelemetry span is active at the root's start its trace id is the sampling key and
its span context the interaction's parent; otherwise the trace id is ``random.getrandbits(128)`` (not a
UUID4, whose low 64 bits hold fixed version/variant bits and would skew the trace-id ratio sampler)
and the parent is ``None`` (the emitter opens a root span ``rag.interaction`` from the start/end times).

Scope: attach the handler to the outermost runnable (``config={"callbacks": [handler]}``,
``chain.with_config(callbacks=[handler])`` or a legacy chain's ``callbacks=``). A handler attached only
to an inner runnable sees runs whose parent it never saw; they are ignored.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from opentelemetry import trace

from . import _extract
from ._evaluator_args import resolve_evaluator
from ._runs import SAMPLED, UNDECIDED, Evicted, RootRun, RunTable

if TYPE_CHECKING:
    from .._accounting import DropReason
    from .._settings import Settings
    from ..worker._evaluator import Evaluator
    from ..worker._stats import EvaluatorStats

__all__ = ["UtilizationCallbackHandler"]

_log = logging.getLogger("ctxutil_otel.capture")


def _new_trace_id() -> int:
    trace_id = 0
    while not trace_id:  # 0 is the invalid trace id
        trace_id = random.getrandbits(128)
    return trace_id


class UtilizationCallbackHandler(BaseCallbackHandler):
    """LangChain callback handler that submits each RAG interaction to an Evaluator.

    Args:
        evaluator: The :class:`~ctxutil_otel.worker.Evaluator` to sample and submit to. ``None``
            builds one from :class:`~ctxutil_otel._settings.Settings` (``settings_overrides`` >
            ``CTXUTIL_*`` environment > defaults); the handler then owns it.
        clock: Monotonic clock in seconds for the run TTL (default ``time.monotonic``; for tests).
        **settings_overrides: Settings by name (``sample_rate=0.1``, ``run_ttl_s=60``, ...). With an
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
        self._errors: dict[str, int] = {}
        self._errors_lock = threading.Lock()

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

    def shutdown(self, timeout_millis: int = 30000) -> bool:
        """Stop capturing and shut the evaluator down within ``timeout_millis`` milliseconds.

        Runs still in progress are dropped: each captured (sampled) one is counted ``dropped``
        ``shutdown`` and their later callbacks are ignored. Returns ``True`` when no captured run was
        in progress and the evaluator finished everything in time."""
        left = 0
        for root in self._runs.drain():
            if root.decision == SAMPLED:
                self.evaluator.abandon("shutdown")
                left += 1
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
        with self._errors_lock:
            return dict(self._errors)

    # --- chains and tools ----------------------------------------------------------------------

    def on_chain_start(
        self,
        serialized: dict[str, Any] | None,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            if parent_run_id is None:
                self._start_root(run_id, inputs, is_retriever=False)
            else:
                self._start_child(run_id, parent_run_id)
        except Exception as exc:
            self._failed("on_chain_start", exc)

    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        root = self._runs.root_of(run_id)
        if root is None:
            return
        try:
            if root.run_id == run_id:
                self._finish_root(root, outputs, kwargs.get("inputs"))
            else:
                self._runs.end_child(run_id, root)
        except Exception as exc:
            self._failed("on_chain_end", exc)

    def on_chain_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._end_with_error("on_chain_error", run_id)

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
        # Tools matter as parents: an agent's retriever tool runs its retriever under the tool run.
        try:
            if parent_run_id is None:
                self._start_root(run_id, inputs if inputs is not None else input_str, is_retriever=False)
            else:
                self._start_child(run_id, parent_run_id)
        except Exception as exc:
            self._failed("on_tool_start", exc)

    def on_tool_end(
        self, output: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self.on_chain_end(output, run_id=run_id, parent_run_id=parent_run_id)

    def on_tool_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._end_with_error("on_tool_error", run_id)

    # --- retrievers ------------------------------------------------------------------------------

    def on_retriever_start(
        self,
        serialized: dict[str, Any] | None,
        query: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        try:
            if parent_run_id is None:
                root = self._start_root(run_id, query, is_retriever=True)
            else:
                found = self._runs.root_of(parent_run_id)
                if found is None:
                    return
                root = found
            evicted = self._runs.add_retrieval(run_id, root, query, self._sample)
            if evicted:
                self._account_evicted(evicted)
        except Exception as exc:
            self._failed("on_retriever_start", exc)

    def on_retriever_end(
        self, documents: Sequence[Any], *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        root = self._runs.root_of(run_id)
        if root is None:
            return
        try:
            self._runs.end_retrieval(run_id, root, documents)
            if root.run_id == run_id:
                self._finish_root(root, None, None)
        except Exception as exc:
            self._failed("on_retriever_end", exc)

    def on_retriever_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._end_with_error("on_retriever_error", run_id)

    # --- LLMs and chat models ----------------------------------------------------------------------

    def on_llm_start(
        self,
        serialized: dict[str, Any] | None,
        prompts: list[str],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if parent_run_id is None:
            return  # a root LLM run retrieves nothing: not a RAG interaction, never tracked
        try:
            self._start_child(run_id, parent_run_id)
        except Exception as exc:
            self._failed("on_llm_start", exc)

    def on_chat_model_start(
        self,
        serialized: dict[str, Any] | None,
        messages: list[list[Any]],
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if parent_run_id is None:
            return
        try:
            self._start_child(run_id, parent_run_id)
        except Exception as exc:
            self._failed("on_chat_model_start", exc)

    def on_llm_new_token(
        self,
        token: Any,
        *,
        chunk: Any = None,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        root = self._runs.root_of(run_id)
        if root is None:
            return
        try:
            self._runs.add_token(run_id, root, token)
        except Exception as exc:
            self._failed("on_llm_new_token", exc)

    def on_llm_end(
        self, response: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        root = self._runs.root_of(run_id)
        if root is None:
            return
        try:
            self._runs.end_llm(run_id, root, response)
        except Exception as exc:
            self._failed("on_llm_end", exc)

    def on_llm_error(
        self, error: BaseException, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        root = self._runs.root_of(run_id)
        if root is None:
            return
        try:
            self._runs.end_child(run_id, root)
        except Exception as exc:
            self._failed("on_llm_error", exc)

    # --- internals ---------------------------------------------------------------------------

    def _start_root(self, run_id: UUID, inputs: object, *, is_retriever: bool) -> RootRun:
        context = trace.get_current_span().get_span_context()
        if context.is_valid:
            trace_id, parent = context.trace_id, context
        else:
            trace_id, parent = _new_trace_id(), None
        root = RootRun(
            run_id=run_id,
            trace_id=trace_id,
            parent=parent,
            start_time_ns=time.time_ns(),
            started_at=self._runs.now(),
            inputs=inputs,
            is_retriever=is_retriever,
        )
        root, evicted = self._runs.start_root(root)
        if evicted:
            self._account_evicted(evicted)
        return root

    def _start_child(self, run_id: UUID, parent_run_id: UUID) -> None:
        root = self._runs.root_of(parent_run_id)
        if root is None:
            return
        evicted = self._runs.add_child(run_id, root)
        if evicted:
            self._account_evicted(evicted)

    def _sample(self, trace_id: int) -> bool:
        try:
            return bool(self.evaluator.admit(trace_id))
        except Exception as exc:  # contract: never raises; if it does, the root is not captured
            self._failed("sample", exc)
            return False

    def _end_with_error(self, callback: str, run_id: UUID) -> None:
        root = self._runs.root_of(run_id)
        if root is None:
            return
        try:
            if root.run_id != run_id:
                self._runs.end_child(run_id, root)  # the root may still recover (fallbacks)
            elif self._runs.finish_root(root) and root.decision == SAMPLED:
                self.evaluator.abandon("chain_error")
        except Exception as exc:
            self._failed(callback, exc)

    def _finish_root(self, root: RootRun, outputs: object, end_inputs: object) -> None:
        if not self._runs.finish_root(root):
            return  # evicted meanwhile: already accounted for
        undecided = root.decision == UNDECIDED
        if undecided:
            # Never retrieved. Captured only if its output carries documents (handler on the root only).
            try:
                documents = _extract.documents_from_output(outputs)
            except Exception as exc:
                self._failed("documents_from_output", exc)
                return
            if documents is None:
                return
            if not self.evaluator.would_sample(root.trace_id):
                self._sample(root.trace_id)  # counted sampled_out, before any capture work
                return
            retrievals: list[Sequence[object] | None] = [documents]
        else:
            retrievals = root.retrievals
        reason: DropReason
        try:
            interaction = _extract.interaction_of(root, retrievals, outputs, end_inputs, self._failed)
        except Exception as exc:
            self._failed("interaction_of", exc)
            interaction, reason = None, "capture_error"
        else:
            reason = "not_evaluable"
        if undecided:  # captured only now: a lost one is counted without spending admission on it
            if interaction is None:
                self.evaluator.count_lost(root.trace_id, reason)
            elif self._sample(root.trace_id):
                self.evaluator.submit(interaction)
        elif interaction is None:
            self.evaluator.abandon(reason)
        else:
            self.evaluator.submit(interaction)

    def _account_evicted(self, evicted: Evicted) -> None:
        for root, reason in evicted:
            if root.decision == SAMPLED:
                self.evaluator.abandon(reason)

    def _failed(self, callback: str, exc: BaseException) -> None:
        with self._errors_lock:
            first = callback not in self._errors
            self._errors[callback] = self._errors.get(callback, 0) + 1
        if first:
            _log.debug("ctxutil-otel: error in %s (further ones are only counted)", callback, exc_info=exc)
