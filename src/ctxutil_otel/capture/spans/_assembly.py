"""Trace assembly: buffer the retrieval and generation records of each trace and pair them into RAG turns.

How a turn is found (spans end children first; nothing here looks at wall-clock order of arrival):

* A buffered record waits on its parent span id ("the nearest ancestor that has not ended yet").
* When a span of a buffered trace ends, the records waiting on it are exactly the records under it. They
  are paired (below); pairs become turns, closed by that span (its start/end times are the turn's);
  whatever is left waits on that span's parent in turn. So a turn is assembled at the lowest span that
  encloses a retrieval and the generation that used it: the enclosing chain span of the pair, and each
  of several turns in one trace (each under its own chain span) is assembled separately, exactly once.
* When the trace's local root ends (no parent, or a remote parent: the rest of the trace is in another
  process), everything still buffered for the trace is paired and the trace is forgotten; records left
  unpaired (a retrieval no generation used, a generation without retrieval) are not RAG turns and are
  dropped without counting.

The outermost retrieval step: when a retrieval (or reranker) span ends, every record waiting on it (the
records of the spans inside it: the base retriever of a contextual-compression retriever, the retrievers
and query-writing model calls of a multi-query or ensemble retriever, a reranker or document filter run
inside it) is discarded: its output documents are what flows on, so only they are judged. Without this
an inner retriever's chunks would be judged next to the outer one's (issue 15).

Pairing within a group: records in start-time order; each retrieval joins the retrievals waiting for a
generation (a reranker's output replaces them: it is what reached the model); a generation takes all
waiting retrievals (several retrievers in one turn are merged in start order). A generation with no
retrieval before it (a query rewrite, a follow-up) is left over.

Nothing RAG-shaped vanishes: a trace whose records pair into no turn at all although it holds both a
retrieval and a generation (a generation before its retrieval, a model span no reader recognised as one)
gives one turn whose ``cause`` is :data:`UNPAIRED`, counted ``not_evaluable`` by the processor.

Out-of-order ends (decided): a record whose ancestor already ended (a streamed generation ending after
its chain span) waits on a span that will not end again, so it is assembled when the trace's local root
ends, still parented to its own span. A record that ends after its local root starts a new buffered
trace that no root closes: it is evicted after the TTL (counted as ``ttl_expired`` if it pairs into a
turn), or earlier as the oldest when a bound is full (``pending_full``). OTLP receivers: build the
parent ``SpanContext`` with ``is_remote`` from the OTLP span flags, so that each service's local root
closes its own spans.

The shapes (``R`` retrieval, ``K`` reranker, ``G`` generation, ``C`` chain; ``*`` the records judged)::

    C ─┬─ R*                 C ─┬─ R              C ─┬─ R* (compression, multi-query, ensemble)
       └─ G*                    ├─ K*                │   ├─ R   (inner retriever: discarded)
                                └─ G*                │   └─ G   (query writer / filter: discarded)
                                                     └─ G*

A trace evicted while a retrieval still waits for its generation is remembered (at most ``max_traces``
of them): when that generation ends, its turn is counted with the eviction's reason instead of vanishing
unpaired (the span side of issue 10 item 6).

Exactly once under re-delivery (issue 24): a record whose span (trace id and span id) was already
buffered is ignored, whether its trace is still buffered or already left the buffer (assembled, evicted,
expired): an OTLP exporter that timed out waiting for the answer sends the same spans again, and they were
assembled and evaluated twice. The span ids of records whose trace left the buffer are remembered for
``ttl_s`` seconds, at most :data:`REMEMBERED_PER_TRACE` x ``max_traces`` of them (oldest forgotten first);
a copy arriving later than that is assembled again, as a new turn.

Bounds: at most ``max_traces`` buffered traces and ``max_bytes`` of buffered text (approximate, see
``Retrieval.size``), each for at most ``ttl_s`` seconds; beyond that the oldest trace is evicted and
its records paired into turns that the caller counts as dropped, with the reason the eviction reports:
``ttl_expired`` for a trace buffered ``ttl_s`` seconds or more (by :meth:`TraceBuffer.expire`, or met
first when a bound is full), ``pending_full`` for a younger trace evicted because the count or byte
bound was full (more concurrent unfinished traces than the bounds hold). Traces are kept in creation
order, so expired ones are a prefix: each sweep looks at the oldest only (bounded work).

Not thread-safe: the span processor calls it under its lock. ``traces`` may be read without the lock
(one ``dict`` membership test, atomic in CPython).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from opentelemetry.trace import SpanContext

from ..._accounting import DropReason
from .._reasons import PENDING_FULL, TTL_EXPIRED
from ._model import UNPAIRED, Generation, Retrieval

__all__ = ["REMEMBERED_PER_TRACE", "BufferedPart", "Evicted", "TraceBuffer", "Turn", "pair"]

#: Span ids of records remembered after their trace left the buffer, per ``max_traces`` (a RAG turn holds
#: two or three records).
REMEMBERED_PER_TRACE = 4


@dataclass(slots=True, eq=False)
class BufferedPart:
    """One buffered record with the span facts assembly needs.

    Attributes:
        record: The reader's :class:`Retrieval` or :class:`Generation`.
        context: The span's own ``SpanContext``.
        start_ns / end_ns: The span's start and end, nanoseconds since the epoch.
        size: Approximate bytes held (``record.size()``).
        span: The finished span itself (a reference, nothing read on the request path): what the turn's
            conversion reads once for the sender's identity, the response id and the dimensions.
    """

    record: Retrieval | Generation
    context: SpanContext
    start_ns: int
    end_ns: int
    size: int
    span: object = None


@dataclass(frozen=True, slots=True)
class Turn:
    """One RAG turn: the retrievals a generation used, and the span that closed them.

    Attributes:
        trace_id: The 128-bit trace id.
        retrievals: The retrieval (or reranker) records in start order.
        generation: The generation record; the evaluation is parented to its span.
        start_ns / end_ns: Bounds of the closing span (the enclosing chain span or the local root); for
            an evicted turn, the bounds of its records.
        cause: ``None`` for a paired turn; :data:`UNPAIRED` for the one turn of a trace whose retrievals
            and generations paired into none (never evaluable).
    """

    trace_id: int
    retrievals: tuple[BufferedPart, ...]
    generation: BufferedPart
    start_ns: int
    end_ns: int
    cause: str | None = None


@dataclass(slots=True, eq=False)
class _Trace:
    trace_id: int
    created: float
    # span id of the nearest ancestor that has not ended yet -> records under it
    waiting: dict[int, list[BufferedPart]] = field(default_factory=dict)
    parts: int = 0
    size: int = 0
    spans: set[int] = field(default_factory=set)  # span ids of every record buffered (re-delivery)


Pairs = list[tuple[tuple[BufferedPart, ...], BufferedPart]]
#: Turns of evicted traces, each with its drop reason (``ttl_expired`` or ``pending_full``).
Evicted = list[tuple[Turn, DropReason]]


def pair(parts: Iterable[BufferedPart]) -> tuple[Pairs, list[BufferedPart]]:
    """Pair records into ``(retrievals, generation)`` turns (see the module docstring).

    Returns the pairs and the leftovers (unused retrievals, generations without retrieval); retrievals
    replaced by a reranker's output are in neither.
    """
    ordered = sorted(parts, key=lambda p: (p.start_ns, isinstance(p.record, Generation)))
    pairs: Pairs = []
    leftovers: list[BufferedPart] = []
    waiting: list[BufferedPart] = []
    for part in ordered:
        record = part.record
        if isinstance(record, Retrieval):
            if record.reranked:
                waiting = [part]
            else:
                waiting.append(part)
        elif waiting:
            pairs.append((tuple(waiting), part))
            waiting = []
        else:
            leftovers.append(part)
    leftovers.extend(waiting)
    return pairs, leftovers


class TraceBuffer:
    """Buffered records per trace id, bounded by count, bytes and age (see the module docstring).

    Args:
        ttl_s: Seconds a trace may stay buffered (> 0).
        max_traces: Buffered traces at most (>= 1).
        max_bytes: Approximate bytes of buffered text at most (>= 0).
        clock: Monotonic clock in seconds.
    """

    def __init__(self, *, ttl_s: float, max_traces: int, max_bytes: int, clock: Callable[[], float]) -> None:
        if ttl_s <= 0 or max_traces < 1 or max_bytes < 0:
            raise ValueError(
                f"TraceBuffer needs ttl_s > 0, max_traces >= 1 and max_bytes >= 0, "
                f"got ttl_s={ttl_s!r}, max_traces={max_traces!r}, max_bytes={max_bytes!r}"
            )
        self.ttl_s = ttl_s
        self.max_traces = max_traces
        self.max_bytes = max_bytes
        self.clock = clock
        #: trace id -> buffered trace, oldest first. Read lock-free on the hot path.
        self.traces: dict[int, _Trace] = {}
        #: Approximate bytes buffered across traces.
        self.size = 0
        #: Clock time at which the oldest trace expires (``inf`` when empty).
        self.next_deadline = math.inf
        # Evicted traces that still held a retrieval waiting for its generation -> the eviction's
        # reason: that generation, when it ends, is counted with it instead of vanishing unpaired.
        # At most ``max_traces`` entries, oldest forgotten first.
        self._evicted: OrderedDict[int, DropReason] = OrderedDict()
        # trace id << 64 | span id of the records of traces that left the buffer -> when they left: a
        # copy of one (a retried export) is ignored. At most REMEMBERED_PER_TRACE x max_traces (about 6 MB
        # at the defaults), each for ttl_s.
        self._remembered: OrderedDict[int, float] = OrderedDict()

    def __len__(self) -> int:
        return len(self.traces)

    @property
    def parts(self) -> int:
        """Records buffered across traces."""
        return sum(t.parts for t in self.traces.values())

    def encloses(self, trace_id: int, span_id: int) -> bool:
        """Whether records are waiting on span ``span_id`` (its end would close something). Safe
        without the lock: two ``dict`` lookups, each atomic in CPython."""
        trace = self.traces.get(trace_id)
        return trace is not None and span_id in trace.waiting

    # --- events -------------------------------------------------------------------------------
    def end_span(
        self,
        record: Retrieval | Generation | None,
        context: SpanContext,
        parent_span_id: int | None,
        start_ns: int,
        end_ns: int,
        span: object = None,
    ) -> tuple[list[Turn], Evicted]:
        """A span of the trace ended: buffer its ``record`` (``None`` for a span that is not one), with a
        reference to the ``span``, then close what it encloses (see the module docstring).

        ``parent_span_id`` is ``None`` for a local root. Returns the assembled turns and the
        ``(turn, reason)`` pairs of the traces evicted to stay within the count and byte bounds:
        ``pending_full``, or ``ttl_expired`` for an evicted trace already past the TTL.
        """
        trace_id = context.trace_id
        evicted: Evicted = []
        trace = self.traces.get(trace_id)
        if record is not None and self._seen(trace, trace_id, context.span_id):
            record = None  # a copy (re-delivered): what it would close was closed by the first
        if self._evicted and trace_id in self._evicted:
            late = self._after_eviction(trace, record, context, parent_span_id, start_ns, end_ns, span)
            if late is not None:
                return [], [late]
        if record is not None:
            trace = self._buffer(trace, record, context, parent_span_id, start_ns, end_ns, span, evicted)
        elif trace is None:
            return [], evicted
        turns = self._close(trace, context.span_id, parent_span_id, start_ns, end_ns)
        if self.size > self.max_bytes:
            now = self.clock()
            while self.size > self.max_bytes and self.traces:
                self._evict_for_room(now, evicted)
        return turns, evicted

    def _after_eviction(
        self,
        trace: _Trace | None,
        record: Retrieval | Generation | None,
        context: SpanContext,
        parent_span_id: int | None,
        start_ns: int,
        end_ns: int,
        span: object,
    ) -> tuple[Turn, DropReason] | None:
        """A span of a trace evicted earlier ended: its local root forgets the eviction (nothing more will
        come); a generation with nothing buffered again is the turn the eviction cut, answered with the
        eviction's reason (returned). ``None``: the span goes on as any other."""
        trace_id = context.trace_id
        if parent_span_id is None:
            self._evicted.pop(trace_id)
        elif trace is None and isinstance(record, Generation):
            reason = self._evicted.pop(trace_id)
            part = BufferedPart(record, context, start_ns, end_ns, 0, span)
            return Turn(trace_id, (), part, start_ns, end_ns), reason
        return None

    def _buffer(
        self,
        trace: _Trace | None,
        record: Retrieval | Generation,
        context: SpanContext,
        parent_span_id: int | None,
        start_ns: int,
        end_ns: int,
        span: object,
        evicted: Evicted,
    ) -> _Trace:
        """Buffer ``record`` under the span it waits for (its parent; a local root its own), opening its
        trace when it is the first (evicting into ``evicted`` to stay within the count bound)."""
        if trace is None:
            now = self.clock()
            while len(self.traces) >= self.max_traces:
                self._evict_for_room(now, evicted)
            trace = _Trace(context.trace_id, now)
            self.traces[context.trace_id] = trace
            if len(self.traces) == 1:
                self.next_deadline = trace.created + self.ttl_s
        if isinstance(record, Retrieval):
            # The outermost retrieval step: what ran inside it is not judged (module docstring).
            nested = trace.waiting.pop(context.span_id, None)
            if nested:
                self._release(trace, nested, keep=True)
        part = BufferedPart(record, context, start_ns, end_ns, record.size(), span)
        key = parent_span_id if parent_span_id is not None else context.span_id
        trace.waiting.setdefault(key, []).append(part)
        trace.spans.add(context.span_id)
        trace.parts += 1
        trace.size += part.size
        self.size += part.size
        return trace

    def expire(self, now: float, limit: int) -> list[Turn]:
        """Evict at most ``limit`` traces buffered ``ttl_s`` seconds or more at clock time ``now``;
        returns their turns (to be counted ``ttl_expired``)."""
        evicted: list[Turn] = []
        while limit > 0 and now >= self.next_deadline:
            evicted.extend(self._forget(next(iter(self.traces.values())), None, TTL_EXPIRED))
            limit -= 1
        return evicted

    def drain(self) -> list[Turn]:
        """Forget every buffered trace; returns the turns they held (shutdown)."""
        turns: list[Turn] = []
        while self.traces:
            turns.extend(self._forget(next(iter(self.traces.values())), None))
        return turns

    # --- internals ----------------------------------------------------------------------------
    def _close(
        self, trace: _Trace, span_id: int, parent_span_id: int | None, start_ns: int, end_ns: int
    ) -> list[Turn]:
        """Pair the records waiting on the span that ended; a local root closes the whole trace."""
        if parent_span_id is None:
            return self._forget(trace, (start_ns, end_ns))
        group = trace.waiting.pop(span_id, None)
        if group is None:
            return []
        pairs, leftovers = pair(group)
        if leftovers:
            trace.waiting.setdefault(parent_span_id, []).extend(leftovers)
        if pairs or len(leftovers) != len(group):
            kept = {id(p) for p in leftovers}
            self._release(trace, [p for p in group if id(p) not in kept])
        return [Turn(trace.trace_id, r, g, start_ns, end_ns) for r, g in pairs]

    def _forget(
        self, trace: _Trace, bounds: tuple[int, int] | None, eviction: DropReason | None = None
    ) -> list[Turn]:
        """Remove ``trace`` and pair everything it still holds: at its local root's end (``bounds``
        are the root's) or on eviction (``None``: each turn spans its own records; ``eviction`` is the
        reason, remembered for a retrieval still waiting for its generation). A trace whose records
        pair into no turn although it holds a retrieval and a generation gives one :data:`UNPAIRED`
        turn; other leftovers are not RAG turns and are dropped without counting."""
        parts = [p for group in trace.waiting.values() for p in group]
        self._remove(trace)
        pairs, leftovers = pair(parts)
        if eviction is not None and any(isinstance(p.record, Retrieval) for p in leftovers):
            self._evicted[trace.trace_id] = eviction
            while len(self._evicted) > self.max_traces:
                self._evicted.popitem(last=False)
        if not pairs:
            retrievals = tuple(p for p in leftovers if isinstance(p.record, Retrieval))
            generations = [p for p in leftovers if isinstance(p.record, Generation)]
            if not retrievals or not generations:
                return []
            members = (*retrievals, *generations)
            start, end = bounds or (min(p.start_ns for p in members), max(p.end_ns for p in members))
            return [Turn(trace.trace_id, retrievals, generations[0], start, end, UNPAIRED)]
        turns = []
        for retrievals, generation in pairs:
            if bounds is None:
                members = (*retrievals, generation)
                start, end = min(p.start_ns for p in members), max(p.end_ns for p in members)
            else:
                start, end = bounds
            turns.append(Turn(trace.trace_id, retrievals, generation, start, end))
        return turns

    def _evict_for_room(self, now: float, evicted: Evicted) -> None:
        """Evict the oldest trace for room; append its turns to ``evicted`` with the reason: past the
        TTL at ``now`` (the lazy sweep had not reached it yet), else the bound was full."""
        reason = TTL_EXPIRED if now >= self.next_deadline else PENDING_FULL
        oldest = next(iter(self.traces.values()))
        evicted.extend([(turn, reason) for turn in self._forget(oldest, None, reason)])

    def _release(self, trace: _Trace, parts: list[BufferedPart], *, keep: bool = False) -> None:
        freed = sum(p.size for p in parts)
        trace.parts -= len(parts)
        trace.size -= freed
        self.size -= freed
        if trace.parts <= 0 and not keep:
            self._remove(trace)

    def _seen(self, trace: _Trace | None, trace_id: int, span_id: int) -> bool:
        """Whether a record of span ``span_id`` was buffered already: in its trace, still buffered, or
        remembered after that trace left the buffer (within ``ttl_s``)."""
        if trace is not None and span_id in trace.spans:
            return True
        left = self._remembered.get(trace_id << 64 | span_id) if self._remembered else None
        return left is not None and self.clock() - left < self.ttl_s

    def _remember(self, trace: _Trace) -> None:
        """Remember the span ids of ``trace``'s records (it leaves the buffer); forget the oldest beyond
        the bounds (count and ``ttl_s``)."""
        remembered = self._remembered
        now = self.clock()
        high = trace.trace_id << 64
        for span_id in trace.spans:
            remembered[high | span_id] = now
            remembered.move_to_end(high | span_id)
        bound = REMEMBERED_PER_TRACE * self.max_traces
        while remembered and (len(remembered) > bound or now - next(iter(remembered.values())) >= self.ttl_s):
            remembered.popitem(last=False)

    def _remove(self, trace: _Trace) -> None:
        if self.traces.pop(trace.trace_id, None) is None:
            return
        if trace.spans:
            self._remember(trace)
            trace.spans = set()
        self.size -= trace.size
        trace.size = 0
        trace.parts = 0
        trace.waiting = {}
        self.next_deadline = (
            next(iter(self.traces.values())).created + self.ttl_s if self.traces else math.inf
        )
