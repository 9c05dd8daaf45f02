"""The process worker's child (``worker="process"``): builds the judge and the metric, evaluates what the
application process sends it, and sends the results back. Runs in a ``multiprocessing`` spawned process.

Messages on the one duplex :class:`multiprocessing.connection.Connection` (pickled by ``multiprocessing``):

* parent -> child, first: a :class:`ChildConfig` (the settings, API key included, travel here, never on a
  command line or in an environment); then ``("evaluate", seq, query, answer, chunks, item_id)`` or
  ``("stop",)``;
* child -> parent: ``("hello", MetricInfo)`` once the metric is built, then
  ``("result", seq, MetricEvaluationResult)`` per evaluation.

The parent keeps at most ``max_in_flight`` evaluations in the child (the child's bound). The child ends on
``stop``, when the parent's end of the pipe closes (the parent died), or when killed. It ignores SIGINT
(Ctrl-C reaches the whole process group; the parent decides when its child stops).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from dataclasses import dataclass
from multiprocessing.connection import Connection

from .._item import DatasetItem
from .._settings import Settings
from ..judges._from_settings import build_judge
from ..metric._contextual_utilization import ContextualUtilization
from ._convert import MetricInfo
from ._evaluate import evaluate_item

__all__ = ["ChildConfig", "child_main"]

_log = logging.getLogger("ctxutil_otel.worker")


@dataclass(frozen=True, slots=True)
class ChildConfig:
    """What the child needs: the settings (for the judge), a metric passed to the ``Evaluator`` (pickled)
    or ``None`` to build it from the settings, the per-evaluation timeout and the in-flight bound."""

    settings: Settings
    metric: ContextualUtilization | None
    timeout_s: float
    max_in_flight: int


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

    async def run(seq: int, item: DatasetItem) -> None:
        result = await evaluate_item(metric, item, timeout_s, info)
        try:
            conn.send(("result", seq, result))
        except (OSError, ValueError):
            end()  # the parent is gone

    def on_readable() -> None:
        try:
            while conn.poll():
                message = conn.recv()
                if message[0] == "stop":
                    end()
                    return
                _, seq, query, answer, chunks, item_id = message
                try:  # validated by the parent already: this only rebuilds it
                    item = DatasetItem(
                        query=query, actual_output=answer, retrieved_content=chunks, id=item_id
                    )
                except ValueError:
                    failure = info.failure(
                        "invalid_input", "Not a valid item.", total_chunks=len(chunks), item_id=item_id
                    )
                    conn.send(("result", seq, failure))
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
        conn.close()
