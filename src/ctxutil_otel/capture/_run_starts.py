"""Where a new LangChain run goes, for :class:`~ctxutil_otel.capture.UtilizationCallbackHandler`: a root
(its trace id and parent span context from the active OpenTelemetry span, its selection facts), a run
under the run it belongs to (its ``parent_run_id``, else the run whose LangChain context it started in),
a retrieval (the root's sampling decision at its first, asked outside the run table's lock), or nothing
(a standalone retrieval, a root model run). The handler's callbacks (``_langchain.py``) call it; the run
table (``_runs.py``) holds the runs.
"""

from __future__ import annotations

import random
import threading
import time
from typing import Any
from uuid import UUID

# The config of the runnable running now: the context LangGraph nodes, tools and fallbacks run in.
from langchain_core.runnables.config import var_child_runnable_config as _running_config
from opentelemetry import trace

from .._fork import reinit_after_fork
from .._selection import SelectionFacts
from ..worker._ticket import Ticket
from . import _extract
from ._root_accounting import RootAccounting
from ._run_spans import adopt_run_span
from ._runs import Evicted, RootRun, RunTable

__all__ = ["RunStarts"]


def _new_trace_id() -> int:
    trace_id = 0
    while not trace_id:  # 0 is the invalid trace id
        trace_id = random.getrandbits(128)
    return trace_id


class RunStarts:
    """Places each new run of ``owner`` (the handler) in ``runs``; what it evicts or refuses is counted
    by ``outcomes``. ``select``: read the facts for the selection rules at a root's start."""

    def __init__(self, owner: object, runs: RunTable, outcomes: RootAccounting, *, select: bool) -> None:
        self._owner = owner
        self._runs = runs
        self._outcomes = outcomes
        self._select = select
        self._standalone = 0
        self._standalone_lock = threading.Lock()
        reinit_after_fork(self._new_lock)

    def _new_lock(self) -> None:
        """A fresh lock in a forked child (see :mod:`ctxutil_otel._fork`)."""
        self._standalone_lock = threading.Lock()

    @property
    def standalone(self) -> int:
        """Retriever runs seen as roots (``UtilizationCallbackHandler.standalone_retrievals``)."""
        return self._standalone

    def enclosing(self, parent_run_id: UUID | None) -> UUID | None:
        """The run a new run belongs under, or ``None`` when the new run is a root for this handler.

        A run reported without a parent belongs under the run whose context it started in, when that
        run was reported to this handler: LangChain keeps the running runnable's config in a context
        variable (LangGraph nodes, tools and ``with_fallbacks`` attempts run in it); its callback
        manager's ``parent_run_id`` is that run, and its handlers say whether this handler saw it. A
        handler handed explicitly to the inner runnable (``config={"callbacks": [handler]}``) starts a
        callback manager without a parent. The enclosing run may no longer be tracked (unsampled,
        refused or evicted: already accounted for); the caller then ignores the new run."""
        if parent_run_id is not None:
            return parent_run_id
        config = _running_config.get()
        if not config:
            return None
        manager = config.get("callbacks")
        run_id = getattr(manager, "parent_run_id", None)
        if isinstance(run_id, UUID) and self._owner in getattr(manager, "handlers", ()):
            return run_id
        return None

    def start(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        inputs: object,
        serialized: dict[str, Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
        """A chain or tool run starts: a root, or a run under its enclosing one."""
        enclosing = self.enclosing(parent_run_id)
        if enclosing is None:
            facts = _extract.selection_facts(serialized, kwargs) if self._select else None
            self._start_root(run_id, inputs, facts, serialized, kwargs)
        elif (root := self._runs.root_of(enclosing)) is not None:
            self._account(self._runs.add_child(run_id, enclosing.int, root))

    def start_tool(
        self,
        run_id: UUID,
        parent_run_id: UUID | None,
        inputs: object,
        serialized: dict[str, Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
        """A tool run starts: like a chain run; under a root, kept with its tool call id (``run:<run id>``
        when LangChain gives none, as ``AgentExecutor`` does), the tool's name and its description
        (references), for its message in the answering prompt."""
        enclosing = self.enclosing(parent_run_id)
        if enclosing is None:
            self.start(run_id, parent_run_id, inputs, serialized, kwargs)
        elif (root := self._runs.root_of(enclosing)) is not None:
            call_id = kwargs.get("tool_call_id")
            if not isinstance(call_id, str):
                call_id = f"run:{run_id.int}"
            name = serialized.get("name") if isinstance(serialized, dict) else None
            description = serialized.get("description") if isinstance(serialized, dict) else None
            tool = (call_id, name or kwargs.get("name"), description)
            self._account(self._runs.add_child(run_id, enclosing.int, root, tool=tool))

    def start_llm(
        self, run_id: UUID, parent_run_id: UUID | None, kwargs: dict[str, Any], messages: object = None
    ) -> None:
        """A model run starts. A root model run (no parent, none in its context) retrieves nothing: never
        tracked. Its start kwargs (model name, provider) and a chat model's input ``messages`` are kept
        as references, read once if it gives the answer."""
        enclosing = self.enclosing(parent_run_id)
        if enclosing is not None and (root := self._runs.root_of(enclosing)) is not None:
            self._account(
                self._runs.add_child(run_id, enclosing.int, root, llm=True, start=kwargs, messages=messages)
            )

    def start_retrieval(self, run_id: UUID, parent_run_id: UUID | None, query: Any, name: Any) -> None:
        """A retriever run starts: under a root (which it may make captured), or standalone."""
        enclosing = self.enclosing(parent_run_id)
        if enclosing is None:  # a root retriever run: a standalone retrieval
            with self._standalone_lock:
                self._standalone += 1
            return
        root = self._runs.root_of(enclosing)
        if root is not None:
            evicted, decide = self._runs.add_retrieval(run_id, enclosing.int, root, query, name)
            if decide:
                self._decide(root)
            self._account(evicted)

    def _start_root(
        self,
        run_id: UUID,
        inputs: object,
        facts: SelectionFacts | None,
        serialized: dict[str, Any] | None,
        kwargs: dict[str, Any],
    ) -> None:
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
            facts=facts,
            serialized=serialized,
            start_kwargs=kwargs,
        )
        adopt_run_span(root)  # found here when the other instrumentation's handler ran before ours
        self._account(self._runs.start_root(root)[1])

    def _decide(self, root: RootRun) -> None:
        """The sampling decision at the root's first retrieval (once per root, claimed under the run
        table's lock, asked outside it). First adopts the span another instrumentation (OpenInference)
        opened for the root run, if any, as the evaluated span: the evaluation then lands in that trace,
        as its child. A root that left the table meanwhile is settled here, with its ticket."""
        adopt_run_span(root)
        ticket = self._outcomes.sample(root.trace_id, root.facts)
        exit = self._runs.decided(root, ticket if isinstance(ticket, Ticket) else None)
        if exit is not None:
            self._outcomes.settle(root, exit)

    def _account(self, evicted: Evicted) -> None:
        if evicted:
            self._outcomes.lost(evicted)
