"""The process worker's child (``worker="process"``): builds the judge and the metric, evaluates what the
application process sends it, and sends the results back. Runs in a ``multiprocessing`` spawned process.

Messages on the one duplex :class:`multiprocessing.connection.Connection` (pickled by ``multiprocessing``):

* parent -> child, first: a :class:`ChildConfig` (the settings, API key included, travel here, never on a
  command line or in an environment); then ``("evaluate", seq, query, answer, chunks, item_id)`` or
  ``("stop",)``;
* child -> parent: ``("hello", MetricInfo)`` once the metric is built, then
  ``("result", seq, JSON)`` per evaluation (:func:`encode_result`).

The parent keeps at most ``max_in_flight`` evaluations in the child (the child's bound). The child ends on
``stop``, when the parent's end of the pipe closes (the parent died), or when killed. It ignores SIGINT
(Ctrl-C reaches the whole process group; the parent decides when its child stops).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import queue
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection

from pydantic import ValidationError

from .._item import DatasetItem
from .._settings import Settings
from ..judges._from_settings import build_judge
from ..metric._contextual_utilization import ContextualUtilization
from ..metric._results import MetricEvaluationResult
from ._convert import MetricInfo, describe
from ._evaluate import evaluate_item

__all__ = ["ChildConfig", "child_main", "decode_result", "encode_result"]

_log = logging.getLogger("ctxutil_otel.worker")

_WRITER_JOIN_S = 1.0


@dataclass(frozen=True, slots=True)
class ChildConfig:
    """What the child needs: the settings (for the judge), a metric passed to the ``Evaluator`` (pickled)
    or ``None`` to build it from the settings, the per-evaluation timeout and the in-flight bound."""

    settings: Settings
    metric: ContextualUtilization | None
    timeout_s: float
    max_in_flight: int


def encode_result(result: MetricEvaluationResult) -> str:
    """A result as JSON without the chunk texts of its breakdown (the parent has them: it sent them).
    JSON, not a pickled model: the parent's validation from JSON costs about half of unpickling the
    models, and the parent's CPU is what the process worker exists to save."""
    data = result.model_dump(mode="json")
    for entry in (data.get("signals") or {}).get("chunk_breakdown") or ():
        entry["chunk_text"] = ""
    return json.dumps(data)


def decode_result(raw: str, chunks: Sequence[str]) -> MetricEvaluationResult:
    """:func:`encode_result` undone in the parent, ``chunks`` being the texts it sent."""
    result = MetricEvaluationResult.model_validate_json(raw)
    for entry in result.signals.chunk_breakdown:
        if not entry.chunk_text and 0 <= entry.index < len(chunks):
            entry.chunk_text = chunks[entry.index]
    return result


def child_main(conn: Connection) -> None:
    """The child's entry point (the ``multiprocessing.Process`` target)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        config: ChildConfig = conn.recv()
        metric = config.metric
        if metric is None:
            settings = config.settings
            metric = ContextualUtilization(
                judge=build_judge(settings), threshold=settings.threshold, mode=settings.mode
            )
        info = MetricInfo.of(metric)
        conn.send(("hello", info))
    except (EOFError, OSError):
        return  # the parent went away before we started
    except Exception:
        _log.exception("ctxutil evaluator child: could not build the judge; exiting")
        raise SystemExit(1) from None
    asyncio.run(_serve(conn, metric, info, config.timeout_s))


async def _serve(conn: Connection, metric: ContextualUtilization, info: MetricInfo, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    tasks: set[asyncio.Task[None]] = set()

    def end() -> None:
        if not done.done():
            done.set_result(None)

    # Results go out from their own thread: a send blocked on a full pipe (the parent busy sending to us)
    # must not stop this loop from reading, or both ends would wait on each other for ever.
    outbox: queue.SimpleQueue[tuple[str, int, str] | None] = queue.SimpleQueue()

    def write() -> None:
        while (message := outbox.get()) is not None:
            try:
                conn.send(message)
            except (OSError, ValueError):  # the parent is gone
                with contextlib.suppress(RuntimeError):
                    loop.call_soon_threadsafe(end)
                return

    writer = threading.Thread(target=write, name="ctxutil-evaluator-child-writer", daemon=True)
    writer.start()

    async def run(seq: int, item: DatasetItem) -> None:
        result = await evaluate_item(metric, item, timeout_s, info)
        outbox.put(("result", seq, encode_result(result)))

    def on_readable() -> None:
        try:
            while conn.poll():
                message = conn.recv()
                if message[0] == "stop":
                    end()
                    return
                _, seq, query, answer, chunks, item_id = message
                try:
                    item = DatasetItem(
                        query=query, actual_output=answer, retrieved_content=chunks, id=item_id
                    )
                except ValidationError as exc:  # counted as the thread worker's conversion counts it
                    failure = info.failure(
                        "invalid_input", describe(exc), total_chunks=len(chunks), item_id=item_id
                    )
                    outbox.put(("result", seq, encode_result(failure)))
                    continue
                task = loop.create_task(run(seq, item))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
        except (EOFError, OSError):
            end()

    loop.add_reader(conn.fileno(), on_readable)
    try:
        await done
    finally:
        loop.remove_reader(conn.fileno())
        for task in list(tasks):
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        outbox.put(None)
        writer.join(_WRITER_JOIN_S)
        conn.close()
