"""The process worker's child (``worker="process"``): builds the judge and the metric, evaluates what the
application process sends it, and sends the results back. Runs in a ``multiprocessing`` spawned process.

It speaks the pipe's protocol (``_pipe.py``): first a :class:`~._pipe.ChildConfig`, then batches of
evaluations; it answers ``hello`` (or ``failed``) and then batches of results. A result waits at most
``RESULT_LINGER_S`` for others to go with it, and not at all once nothing else is in flight.

The parent keeps at most ``max_in_flight`` evaluations in the child (the child's bound). The child ends on
``stop``, when the parent's end of the pipe closes, or when killed; and, whatever its event loop is doing
(a judge may block it), within ``PARENT_CHECK_S`` of its parent's death: a watchdog thread waits on
``multiprocessing``'s parent sentinel and checks the parent's pid, then ends the process at once. It
ignores SIGINT and SIGTERM from its first instruction (``_child_entry.py``; Ctrl-C, or a service
manager's SIGTERM, reaches the whole process group): the parent decides when its child stops, and the
watchdog covers the parent's death.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import multiprocessing
import multiprocessing.connection
import os
import queue
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection

from pydantic import ValidationError

from .._accounting import ERROR_TYPE_OTHER
from .._item import DatasetItem
from ..judges._from_settings import build_judge
from ..metric._contextual_utilization import ContextualUtilization
from ._convert import MetricInfo, describe
from ._evaluate import evaluate_item
from ._pipe import Answer, ChildConfig, Request, encode_result

__all__ = ["child_main"]

_log = logging.getLogger("ctxutil_otel.worker")

_WRITER_JOIN_S = 1.0
#: Seconds a finished result may wait for others finishing meanwhile, to go up the pipe with them (the
#: parent wakes once per message; the evaluation's duration is measured here, so the wait is not in it).
RESULT_LINGER_S = 0.05
#: Results per message at most.
MAX_RESULTS_PER_MESSAGE = 64
#: Seconds between the watchdog's checks of the parent's pid (its sentinel ends the wait at once).
PARENT_CHECK_S = 1.0


def child_main(conn: Connection) -> None:
    """The child's body, run by ``_child_entry.run_child`` (the ``multiprocessing.Process`` target) once
    SIGINT and SIGTERM are ignored."""
    threading.Thread(target=_watch_parent, name="ctxutil-evaluator-child-watchdog", daemon=True).start()
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
    except Exception as exc:  # the parent logs the reason (once): this process's stderr is the app's
        with contextlib.suppress(Exception):
            conn.send(("failed", f"{type(exc).__name__}: {exc}"[:500]))
        raise SystemExit(1) from None
    asyncio.run(_serve(conn, metric, info, config.timeout_s))


def _watch_parent() -> None:
    """End this process as soon as the parent is gone (module docstring)."""
    parent_pid = os.getppid()
    parent = multiprocessing.parent_process()
    sentinel = None if parent is None else parent.sentinel
    while True:
        if sentinel is None:
            time.sleep(PARENT_CHECK_S)
        elif multiprocessing.connection.wait([sentinel], PARENT_CHECK_S):
            break  # the parent's end of its sentinel pipe closed: it died
        if os.getppid() != parent_pid:
            break  # re-parented: it died (and a sibling forked from it holds the sentinel)
    os._exit(0)


async def _serve(conn: Connection, metric: ContextualUtilization, info: MetricInfo, timeout_s: float) -> None:
    loop = asyncio.get_running_loop()
    done: asyncio.Future[None] = loop.create_future()
    tasks: set[asyncio.Task[None]] = set()
    running = [0]  # evaluations started and not yet in the outbox (read by the writer thread)

    def end() -> None:
        if not done.done():
            done.set_result(None)

    # Results go out from their own thread: a send blocked on a full pipe (the parent busy sending to us)
    # must not stop this loop from reading, or both ends would wait on each other for ever.
    outbox: queue.SimpleQueue[Answer | None] = queue.SimpleQueue()
    writer = threading.Thread(
        target=_write,
        args=(conn, outbox, running, loop, end),
        name="ctxutil-evaluator-child-writer",
        daemon=True,
    )
    writer.start()

    async def run(seq: int, item: DatasetItem, began: float) -> None:
        result = await evaluate_item(metric, item, timeout_s, info)
        answer = (seq, encode_result(result), time.perf_counter() - began)
        running[0] -= 1
        outbox.put(answer)

    def start(seq: int, query: str, answer: str, chunks: list[str], item_id: str | None) -> None:
        began = time.perf_counter()
        try:
            item = DatasetItem(query=query, actual_output=answer, retrieved_content=chunks, id=item_id)
        except ValidationError as exc:  # counted as the thread worker's conversion counts it
            failure = info.failure("invalid_input", describe(exc), total_chunks=len(chunks), item_id=item_id)
            outbox.put((seq, encode_result(failure), time.perf_counter() - began))
            return
        running[0] += 1
        task = loop.create_task(run(seq, item, began))
        tasks.add(task)
        task.add_done_callback(tasks.discard)

    def on_readable() -> None:
        try:
            while conn.poll():
                message = conn.recv()
                if message[0] == "stop":
                    end()
                    return
                _start_each(message[1], start, lambda seq, exc: outbox.put(_unstarted(info, seq, exc)))
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


def _start_each(
    batch: list[Request],
    start: Callable[[int, str, str, list[str], str | None], None],
    failed: Callable[[int, Exception], None],
) -> None:
    """``start`` each evaluation of one message; one that raises fails alone (``failed``), never the rest
    of its batch (an id that was not a string once stranded them: never started, never answered)."""
    for seq, query, answer, chunks, item_id in batch:
        try:
            start(seq, query, answer, chunks, item_id)
        except Exception as exc:
            failed(seq, exc)


def _unstarted(info: MetricInfo, seq: int, exc: Exception) -> Answer:
    """The answer for an evaluation that could not be started: failed ``_OTHER``, its class named."""
    explanation = f"Evaluation raised ({type(exc).__name__})."
    return (
        seq,
        encode_result(info.failure(ERROR_TYPE_OTHER, explanation, total_chunks=0, item_id=None)),
        0.0,
    )


def _write(
    conn: Connection,
    outbox: queue.SimpleQueue[Answer | None],
    running: list[int],
    loop: asyncio.AbstractEventLoop,
    end: Callable[[], None],
) -> None:
    """The writer thread: send the results in the outbox, several per message (module docstring), until
    ``None`` (the child ends) or the parent is gone."""
    stopping = False
    while not stopping:
        first = outbox.get()
        if first is None:
            return
        batch = [first]
        deadline = time.monotonic() + RESULT_LINGER_S
        while len(batch) < MAX_RESULTS_PER_MESSAGE:
            try:
                if running[0] <= 0:  # nothing else in flight: send what is there now
                    more = outbox.get_nowait()
                else:
                    more = outbox.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                break
            if more is None:
                stopping = True
                break
            batch.append(more)
        try:
            conn.send(("results", batch))
        except (OSError, ValueError):  # the parent is gone
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(end)
            return
