"""Garbage collections made costly on purpose: a full collection over a large application heap takes
hundreds of milliseconds of CPU, a test's small heap a few; a ``gc.callbacks`` hook stands in for the
difference (real CPU, burnt on the thread that runs the collection)."""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["costly_collections"]


@contextmanager
def costly_collections(generation: int, cost_s: float) -> Iterator[list[tuple[str, float]]]:
    """Each garbage collection of ``generation`` also burns ``cost_s`` of CPU on the thread running it
    (a ``gc.callbacks`` hook added after the budget's own, so inside the span it times): a collection as
    costly as a full one over a large heap, on a test's small heap. Yields ``(thread name, CPU seconds
    burnt)`` for each one."""
    burnt: list[tuple[str, float]] = []

    def burn(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == generation:
            began = time.thread_time()
            while time.thread_time() - began < cost_s:
                pass
            burnt.append((threading.current_thread().name, time.thread_time() - began))

    gc.callbacks.append(burn)
    try:
        yield burnt
    finally:
        gc.callbacks.remove(burn)
