"""Wait until a descriptor has something to read, with ``poll``: the process worker's pipe and ``serve``'s
sockets share it. Never ``select``: it refuses descriptors >= 1024 (``FD_SETSIZE``), which an application
or a busy listener with many files and sockets open gives its pipes and connections (issue 24)."""

from __future__ import annotations

import math
import select
from typing import Any

__all__ = ["wait_readable"]


def wait_readable(fd: Any, timeout_s: float | None) -> bool:
    """Wait up to ``timeout_s`` seconds (``None``: no limit; ``0.0``: not at all) until ``fd`` (a
    descriptor or an object with ``fileno()``) has something to read: data, its end, or an error.

    Raises:
        ValueError: ``fd`` is closed (no descriptor, or ``poll`` answers ``POLLNVAL``).
    """
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    events = poller.poll(None if timeout_s is None else math.ceil(max(timeout_s, 0.0) * 1000))
    if events and events[0][1] & select.POLLNVAL:
        raise ValueError("the descriptor is closed")
    return bool(events)
