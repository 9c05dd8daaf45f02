"""Run state of the LangChain capture path: one :class:`RootRun` per root run, found by ``run_id``.

Two dicts behind one lock:

* ``roots``: root ``run_id`` -> :class:`RootRun`, in start order (the oldest first);
* ``owner``: every tracked ``run_id`` (the root and each descendant) -> its :class:`RootRun`.

Reads on the hot path (``root_of``) are one lock-free ``dict.get`` (atomic in CPython and in the
free-threaded build); every mutation takes the lock for a few dictionary operations only. The dicts are
keyed by ``run_id.int``: ``UUID.__hash__`` is a Python-level method, an ``int`` hashes in C.

Bounds: a root is evicted when it has been unfinished for ``run_ttl_s`` seconds (reason
``ttl_expired``), or, oldest first, while more than ``max_pending_runs`` runs are tracked (reason
``pending_full``). Roots are kept in start order and the clock is monotonic, so expired roots are always
a prefix of ``roots``: the sweep on each root start inspects the oldest root only (amortised O(1)), there
is no timer thread. A sweep for room (the table full at a child's start) evicts the expired prefix first,
so a root counted ``pending_full`` was always younger than the TTL: the two reasons tell "runs never
finish" from "more concurrent runs than the bound" however lazily the TTL is applied.

After ``os.fork()`` the child starts with an empty table and a new lock (the parent's lock may have
been held by a thread that does not exist in the child): runs the parent started belong to the
parent's accounting, and the child's Evaluator starts its counters at zero.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal
from uuid import UUID

from opentelemetry.trace import SpanContext

from .._accounting import DropReason
from .._fork import reinit_after_fork
from .._selection import SelectionFacts
from ._reasons import PENDING_FULL, SHUTDOWN, TTL_EXPIRED

if TYPE_CHECKING:
    from ..worker._ticket import Ticket

__all__ = ["Evicted", "Exit", "RootRun", "RunTable"]

#: How a root left the table while its sampling decision was being asked (outside the lock): ``finished``
#: with ``(outputs, end_inputs)``, ``failed``, or ``lost`` with ``(reason, None)``. Whoever asked settles it.
Exit = tuple[Literal["finished", "failed", "lost"], object, object]


@dataclass(slots=True, eq=False)
class RootRun:
    """What one root run has shown so far (references only; nothing is copied or parsed).

    Attributes:
        run_id: The root run's LangChain ``run_id``.
        trace_id: 128-bit trace id the sampling decision is made from.
        parent: The OpenTelemetry span context active at the root's start, or ``None``.
        start_time_ns: ``time.time_ns()`` at the root's start.
        started_at: The table clock (seconds, monotonic) at the root's start, for the TTL.
        inputs: The root's inputs as LangChain passed them.
        facts: What selection rules see of the root (its name, tags, metadata), read once at its start;
            ``None`` when no rules are configured.
        serialized / start_kwargs: The root's start callback arguments, kept as references (nothing is
            read from them on the request path): the root's name and metadata, read once per interaction
            for its dimensions (``_extract.dimensions_of``).
        ticket: ``None`` until the first retrieval under the root admits it, then the evaluator's
            :class:`~ctxutil_otel.worker.Ticket`, closed once at the root's end (a refused root is
            removed from the table at once).
        deciding: The first retrieval's callback is asking the evaluator (outside the table's lock).
        exit: How the root left the table while ``deciding`` (:data:`Exit`): the decider settles it.
        runs: Descendant ``run_id.int`` still running -> its parent's ``run_id.int`` (freed at the
            descendant's end, or with the root).
        inner: The running descendants that are retrievers or run inside one (their documents and
            model runs are part of that retrieval: never judged on their own, never the answer).
        slots: Outermost retriever ``run_id.int`` -> index into ``retrievals`` (start order).
        lineage: Per slot, the ``run_id.int`` s of the retriever's running ancestors at its start.
        retrievals: Each outermost retrieval step's documents, in start order (``None`` until it
            ends, or when discarded: under a failed run, or replaced by an enclosing step's output).
        retriever_query: The first retriever's query.
        retriever_name: The first outermost retriever's run name (LangChain passes it as ``name``).
        tokens: Streamed tokens per answer-LLM ``run_id.int`` until that LLM run ends.
        llm_open: Answer-LLM runs started and not ended (a root that ends with one open was abandoned
            mid-stream) -> their start callback's keyword arguments (a reference: metadata with
            ``ls_model_name`` / ``ls_provider``, ``invocation_params``).
        llm_ended: An answer-LLM run under the root has ended.
        llm_response: The last ended answer-LLM run's ``LLMResult``.
        llm_tokens: The tokens that LLM run streamed, if any.
        llm_lineage: The ancestors of that LLM run (to forget its answer if one of them fails).
        llm_start: That LLM run's start keyword arguments (see ``llm_open``).
        llm_messages: Open answer chat-model runs -> their input messages (``on_chat_model_start``).
        llm_prompt: The input messages of the last ended answer chat-model run (the answering
            generation's prompt: its tool messages are retrieved context, ``_tools.py``).
        tool_calls: This root's tool runs started with a tool call: ``tool_call_id`` -> (run key, tool
            name, tool description).
        alive: ``False`` once the root left the table (finished, unsampled or evicted).
    """

    run_id: UUID
    trace_id: int
    parent: SpanContext | None
    start_time_ns: int
    started_at: float
    inputs: object
    facts: SelectionFacts | None = None
    serialized: object = None
    start_kwargs: object = None
    ticket: Ticket | None = None
    deciding: bool = False
    exit: Exit | None = None
    runs: dict[int, int] = field(default_factory=dict)
    inner: set[int] = field(default_factory=set)
    slots: dict[int, int] = field(default_factory=dict)
    lineage: list[tuple[int, ...]] = field(default_factory=list)
    retrievals: list[Sequence[object] | None] = field(default_factory=list)
    retriever_query: object = None
    retriever_name: object = None
    tokens: dict[int, list[object]] = field(default_factory=dict)
    llm_open: dict[int, object] = field(default_factory=dict)
    llm_ended: bool = False
    llm_response: object = None
    llm_tokens: list[object] | None = None
    llm_lineage: tuple[int, ...] = ()
    llm_start: object = None
    llm_messages: dict[int, object] = field(default_factory=dict)
    llm_prompt: object = None
    tool_calls: dict[str, tuple[int, object, object]] = field(default_factory=dict)
    alive: bool = True

    def ancestors(self, key: int) -> tuple[int, ...]:
        """``key`` and its running ancestors up to (and including) the root, innermost first."""
        chain = [key]
        runs = self.runs
        while (key := runs.get(key, 0)) and len(chain) < _MAX_DEPTH:
            chain.append(key)
        return tuple(chain)


#: Longest ancestor walk (a guard against a cycle in reported parent ids, which LangChain never makes).
_MAX_DEPTH = 1000

#: Roots evicted by one mutation, each with its drop reason (``ttl_expired`` or ``pending_full``).
Evicted = list[tuple[RootRun, DropReason]]


class RunTable:
    """Bounded, thread-safe map from ``run_id`` to the :class:`RootRun` it belongs to.

    Args:
        run_ttl_s: Seconds a root may stay unfinished before eviction (> 0).
        max_pending_runs: Tracked runs (roots and descendants) at most (>= 1).
        clock: Monotonic clock in seconds (``time.monotonic``; injectable for tests).

    Evicted roots are handed back to the caller as ``(root, reason)`` pairs (never to a callback under
    the lock), so that it can account for them outside the critical section with that drop reason:
    ``ttl_expired`` (unfinished for ``run_ttl_s``) or ``pending_full`` (the oldest, evicted to stay
    within ``max_pending_runs``).
    """

    __slots__ = ("__weakref__", "_clock", "_lock", "_max", "_owner", "_roots", "_ttl")

    def __init__(self, *, run_ttl_s: float, max_pending_runs: int, clock: Callable[[], float]) -> None:
        if not run_ttl_s > 0:
            raise ValueError(f"run_ttl_s must be > 0 seconds, got {run_ttl_s!r}")
        if max_pending_runs < 1:
            raise ValueError(f"max_pending_runs must be >= 1, got {max_pending_runs!r}")
        self._ttl = float(run_ttl_s)
        self._max = int(max_pending_runs)
        self._clock = clock
        self._reset()
        reinit_after_fork(self._reset)

    def _reset(self) -> None:
        self._lock = threading.Lock()
        self._roots: dict[int, RootRun] = {}
        self._owner: dict[int, RootRun] = {}

    def __len__(self) -> int:
        """Tracked runs (roots and descendants)."""
        return len(self._owner)

    def root_of(self, run_id: UUID | None) -> RootRun | None:
        """The root ``run_id`` belongs to, or ``None`` when it is not tracked (lock-free)."""
        return None if run_id is None else self._owner.get(run_id.int)

    def now(self) -> float:
        return self._clock()

    # --- mutations (each one short critical section) ---------------------------------------------

    def start_root(self, root: RootRun) -> tuple[RootRun, Evicted]:
        """Track a new root; first evict expired roots and, while the table is full, the oldest ones.
        A second start of the same ``run_id`` (the handler attached twice, e.g. through ``config`` and
        ``with_config``) keeps the first.

        Returns:
            The tracked root, and the evicted ``(root, reason)`` pairs (already removed) for the caller
            to account for.
        """
        key = root.run_id.int
        with self._lock:
            tracked = self._roots.get(key)
            if tracked is not None:
                return tracked, []
            evicted = self._sweep(root.started_at, room=1)
            self._roots[key] = root
            self._owner[key] = root
        return root, evicted

    def add_child(
        self,
        run_id: UUID,
        parent_key: int,
        root: RootRun,
        *,
        llm: bool = False,
        start: object = None,
        messages: object = None,
        tool: tuple[str, object, object] | None = None,
    ) -> Evicted:
        """Track ``run_id`` as a child of the run ``parent_key`` under ``root`` (no-op when the root has
        left the table). ``llm``: a model run (an answer candidate unless inside a retrieval), ``start``
        its start callback's keyword arguments and ``messages`` a chat model's input messages (kept as
        references). ``tool``: a tool run's ``(tool_call_id, name, description)``.

        Returns:
            ``(root, reason)`` pairs evicted to make room within ``max_pending_runs``: the expired
            roots first, then the oldest (possibly ``root`` itself).
        """
        with self._lock:
            if not root.alive:
                return []
            evicted = self._sweep(self._clock(), room=1) if len(self._owner) >= self._max else []
            if root.alive:  # the sweep may have evicted this very root
                key = run_id.int
                self._owner[key] = root
                root.runs[key] = parent_key
                if parent_key in root.inner:
                    root.inner.add(key)
                elif llm:
                    root.llm_open[key] = start
                    if messages is not None:
                        root.llm_messages[key] = messages
                elif tool is not None:
                    root.tool_calls[tool[0]] = (key, tool[1], tool[2])
        return evicted

    def add_retrieval(
        self, run_id: UUID, parent_key: int, root: RootRun, query: object, name: object = None
    ) -> tuple[Evicted, bool]:
        """Track a retriever run under ``root``, a child of the run ``parent_key``. Inside another
        retrieval (a retriever, or a run under one) it is part of that one and gets no slot; otherwise it
        is an outermost retrieval step and gets the next slot. ``name``: the retriever run's name, kept
        for the first one (a dimension).

        Returns:
            ``(root, reason)`` pairs evicted to make room within ``max_pending_runs`` (as
            :meth:`add_child`; possibly ``root`` itself), and whether the caller must now ask for the
            root's sampling decision: ``True`` for exactly one retrieval of the root, the first
            (concurrent retrievers of one root, ``RunnableParallel`` on a thread pool, claim it under the
            lock), which asks outside the lock and then calls :meth:`decided`.
        """
        with self._lock:
            if not root.alive:
                return [], False
            evicted: Evicted = []
            key = run_id.int
            if key in root.runs:  # the same retriever run reported twice
                return evicted, False
            if len(self._owner) >= self._max:
                evicted = self._sweep(self._clock(), room=1)
                if not root.alive:
                    return evicted, False
            self._owner[key] = root
            root.runs[key] = parent_key
            nested = parent_key in root.inner
            root.inner.add(key)
            if nested:
                return evicted, False
            root.slots[key] = len(root.retrievals)
            root.retrievals.append(None)
            root.lineage.append(root.ancestors(parent_key))
            claim = root.ticket is None and not root.deciding
            if claim:
                root.retriever_query = query
                root.retriever_name = name
                root.deciding = True
            return evicted, claim

    def decided(self, root: RootRun, ticket: Ticket | None) -> Exit | None:
        """The sampling decision the first retrieval claimed: ``ticket`` when admitted, else ``None``
        (refused: the root is removed with all its runs). Returns how the root left the table while the
        decision was asked, for the caller to settle with the ticket (``None``: nothing to settle)."""
        with self._lock:
            root.deciding = False
            if root.alive:
                if ticket is None:
                    self._remove(root)
                else:
                    root.ticket = ticket
                return None
            root.ticket = ticket
            return None if ticket is None else root.exit

    def end_retrieval(self, run_id: UUID, root: RootRun, documents: Sequence[object]) -> None:
        """Record an outermost retriever's documents in its slot; stop tracking the run."""
        with self._lock:
            slot = root.slots.pop(run_id.int, None)
            if slot is not None:
                root.retrievals[slot] = documents
            self._forget(run_id.int, root)

    def add_token(self, run_id: UUID, root: RootRun, token: object) -> None:
        """Buffer one streamed token of answer-LLM run ``run_id``."""
        with self._lock:
            key = run_id.int
            if root.alive and key in root.llm_open:
                buffer = root.tokens.get(key)
                if buffer is None:
                    root.tokens[key] = [token]
                else:
                    buffer.append(token)

    def end_llm(self, run_id: UUID, root: RootRun, response: object) -> None:
        """An answer-LLM run ended: keep its response and tokens as the root's latest answer source
        (a model run inside a retrieval is not an answer: only forgotten)."""
        with self._lock:
            key = run_id.int
            if root.alive and key in root.llm_open:
                root.llm_start = root.llm_open.pop(key)
                root.llm_ended = True
                root.llm_response = response
                root.llm_tokens = root.tokens.pop(key, None)
                root.llm_lineage = root.ancestors(key)
                root.llm_prompt = root.llm_messages.pop(key, None)
            self._forget(key, root)

    def end_child(self, run_id: UUID, root: RootRun, documents: Sequence[object] | None = None) -> None:
        """A descendant run ended. ``documents``: its output when that is a list of documents, which
        then replaces the retrievals it encloses (a reranking or filtering step in a chain: what it
        returned is what flowed on)."""
        with self._lock:
            key = run_id.int
            if documents is not None and root.alive and key not in root.inner:
                enclosed = [i for i, lineage in enumerate(root.lineage) if key in lineage]
                if enclosed:
                    for i in enclosed:
                        root.retrievals[i] = None
                    root.retrievals[enclosed[0]] = documents
            self._forget(key, root)

    def fail_child(self, run_id: UUID, root: RootRun) -> None:
        """A descendant run failed: what was retrieved or generated under it never reached the answer
        (a failed attempt the root recovers from, e.g. ``with_fallbacks``, ``with_retry``)."""
        with self._lock:
            key = run_id.int
            if root.alive:
                root.llm_open.pop(key, None)
                root.llm_messages.pop(key, None)
                root.tokens.pop(key, None)
                for i, lineage in enumerate(root.lineage):
                    if key in lineage:
                        root.retrievals[i] = None
                        root.lineage[i] = ()
                if key in root.llm_lineage:
                    root.llm_ended, root.llm_response, root.llm_tokens = False, None, None
                    root.llm_start = None
                    root.llm_prompt = None
                    root.llm_lineage = ()
            self._forget(key, root)

    def finish_root(self, root: RootRun, exit: Exit) -> bool:
        """Remove ``root`` and its runs; ``exit`` says how it ended. Returns ``False`` when it had already
        left the table (evicted, or finished by a concurrent callback), or when its sampling decision is
        being asked (the asker settles ``exit``): the caller must then do nothing."""
        with self._lock:
            if not root.alive:
                return False
            self._remove(root)
            if root.deciding:
                root.exit = exit
                return False
            return True

    def drain(self) -> list[RootRun]:
        """Remove every tracked root and its runs (at shutdown); returns them for the caller to account
        for (but those whose decision is being asked: their asker counts them ``shutdown``). Late events
        of these runs are then ignored."""
        with self._lock:
            roots = list(self._roots.values())
            for root in roots:
                self._remove(root)
            return [root for root in roots if not self._deferred(root, SHUTDOWN)]

    # --- internals (lock held) --------------------------------------------------------------

    def _forget(self, key: int, root: RootRun) -> None:
        if root.alive:
            self._owner.pop(key, None)
            root.runs.pop(key, None)
            root.inner.discard(key)
            root.slots.pop(key, None)

    def _remove(self, root: RootRun) -> None:
        root.alive = False
        key = root.run_id.int
        self._roots.pop(key, None)
        owner = self._owner
        owner.pop(key, None)
        for run_key in root.runs:
            owner.pop(run_key, None)
        root.runs = {}
        root.inner = set()
        root.tokens = {}
        root.llm_messages = {}

    def _sweep(self, now: float, room: int) -> Evicted:
        """Evict the roots expired at clock time ``now`` (``TTL_EXPIRED``), then the oldest while fewer
        than ``room`` slots are free (``PENDING_FULL``: each of those is younger than the TTL)."""
        evicted: Evicted = []
        roots = self._roots
        deadline = now - self._ttl
        while roots:
            oldest = next(iter(roots.values()))
            if oldest.started_at > deadline:
                break
            self._remove(oldest)
            if not self._deferred(oldest, TTL_EXPIRED):
                evicted.append((oldest, TTL_EXPIRED))
        while roots and len(self._owner) + room > self._max:
            oldest = next(iter(roots.values()))
            self._remove(oldest)
            if not self._deferred(oldest, PENDING_FULL):
                evicted.append((oldest, PENDING_FULL))
        return evicted

    @staticmethod
    def _deferred(root: RootRun, reason: DropReason) -> bool:
        """A root removed while its decision is asked: its asker counts it lost with ``reason``."""
        if root.deciding:
            root.exit = ("lost", reason, None)
        return root.deciding
