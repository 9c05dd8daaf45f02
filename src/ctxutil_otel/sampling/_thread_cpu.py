"""The CPU clock the CPU budget reads: the calling thread's CPU time, less the full garbage collections
that ran on it.

Python's cyclic garbage collector runs on whichever thread allocates when a collection falls due. A full
collection (generation 2) walks every container object of the process: its cost follows the application's
heap (about 0.3 s of CPU for 2 million objects on a shared machine), not the work of the thread that
happened to trip it, and it would have run on the next allocating thread anyway. Charged to the evaluation
worker, one such collection put the worker in a debt of its CPU divided by its share (30 s at 1% of a
core) and stopped every evaluation for that long. Young collections (generations 0 and 1) stay in: they
scale with recent allocations, on the worker thread mostly its own.
"""

from __future__ import annotations

import gc
import threading
import time
from typing import Any

__all__ = ["thread_time_less_full_collections"]

_FULL = 2  # the oldest generation: a collection of it walks the whole heap
_per_thread = threading.local()  # began: thread CPU at the current full collection's start; excluded
_install_lock = threading.Lock()
_installed = False


def thread_time_less_full_collections() -> float:
    """:func:`time.thread_time` of the calling thread (seconds), less the CPU seconds it spent in full
    (generation 2) garbage collections since the first call of this function in the process (which installs
    a :data:`gc.callbacks` hook, once). Monotonic non-decreasing on each thread."""
    if not _installed:
        _install()
    return time.thread_time() - getattr(_per_thread, "excluded", 0.0)


def _install() -> None:
    global _installed  # one hook per process, installed on first use
    with _install_lock:
        if not _installed:
            gc.callbacks.append(_on_collection)
            _installed = True


def _on_collection(phase: str, info: dict[str, Any]) -> None:
    """``gc.callbacks`` hook: time each full collection on the thread that runs it."""
    if info.get("generation") != _FULL:
        return
    if phase == "start":
        _per_thread.began = time.thread_time()
        return
    began = getattr(_per_thread, "began", None)
    if began is not None:
        _per_thread.began = None
        _per_thread.excluded = getattr(_per_thread, "excluded", 0.0) + max(0.0, time.thread_time() - began)
