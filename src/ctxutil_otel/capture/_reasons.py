"""The drop reasons both capture paths give a captured run or trace they stop waiting for.

``ticket.drop(reason)`` (or ``Evaluator.admit(..., lost=reason)`` before admission) counts them in
``dropped{reason}`` (the ``reason`` attribute of ``ctxutil.evaluations``). They tell the two causes apart,
as an SRE must act on them differently:

* ``ttl_expired``: it stayed unfinished for ``run_ttl_s`` seconds: the application's runs or traces
  never end (fix that, or raise ``run_ttl_s`` for long runs);
* ``pending_full``: it was the oldest held, younger than ``run_ttl_s``, when the bound on what a
  capture path holds was full (LangChain handler: ``max_pending_runs`` runs; span processor:
  ``max_pending_runs`` traces or ``max_buffered_bytes``): more concurrent unfinished runs than the bound
  (raise it). As ``queue_full`` is for the evaluation queue.
"""

from __future__ import annotations

from typing import Final

from .._accounting import DropReason

__all__ = ["PENDING_FULL", "SHUTDOWN", "TTL_EXPIRED"]

#: A run or trace unfinished for ``run_ttl_s`` seconds.
TTL_EXPIRED: Final[DropReason] = "ttl_expired"
#: The oldest run or trace, evicted because the capture path's bound was full.
PENDING_FULL: Final[DropReason] = "pending_full"
#: Still captured and unfinished when the capture path shut down.
SHUTDOWN: Final[DropReason] = "shutdown"
