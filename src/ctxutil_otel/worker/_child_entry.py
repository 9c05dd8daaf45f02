"""The process worker's spawn target: make the child deaf to SIGINT and SIGTERM before anything else, then
import and run it (``_child.py``).

A signal to the process group (Ctrl-C, a service manager's ``kill -TERM``) must not kill the child while
it starts (imports, builds its judge), or the evaluations waiting for it are lost: the parent decides when
its child stops. The parent starts it with both signals blocked (:func:`blocked_while_spawning`; a blocked
signal stays pending across ``fork`` and ``exec``), so one that arrives during the interpreter's start-up,
``multiprocessing``'s preparation or this package's imports waits; here
they are set to be ignored (which discards one pending) and unblocked, and only then is the child
imported (this package's ``worker/__init__`` imports most of the worker already, which is why the block
is what closes the window). The same steps as ``multiprocessing``'s own resource tracker takes.
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator
from multiprocessing import resource_tracker
from multiprocessing.connection import Connection

__all__ = ["IGNORED_SIGNALS", "blocked_while_spawning", "run_child"]

#: What the child ignores (the parent stops it; its watchdog ends it when the parent dies).
IGNORED_SIGNALS = (signal.SIGINT, signal.SIGTERM)


@contextlib.contextmanager
def blocked_while_spawning(start_method: str) -> Iterator[None]:
    """Block :data:`IGNORED_SIGNALS` in the calling thread while a ``spawn`` child is started, so that it
    starts with them blocked. Not for ``forkserver``: its server (shared with the application's other
    children) would inherit the mask; its child is forked from a server already running."""
    if start_method != "spawn" or not hasattr(signal, "pthread_sigmask"):
        yield
        return
    # Launching multiprocessing's resource tracker (the spawn does at its first) blocks these signals in this
    # thread for its own start and then UNBLOCKS them (bpo-33613): have it running before they are blocked.
    resource_tracker.ensure_running()
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, IGNORED_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def run_child(conn: Connection) -> None:
    """The ``multiprocessing.Process`` target: ignore :data:`IGNORED_SIGNALS`, then run the child."""
    for signum in IGNORED_SIGNALS:
        signal.signal(signum, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, IGNORED_SIGNALS)
    from ._child_env import scrub_environment

    scrub_environment()  # the key came down the pipe; none of it stays in this process's environment
    from ._child import child_main  # only now: whatever it imports comes after the signals

    child_main(conn)
