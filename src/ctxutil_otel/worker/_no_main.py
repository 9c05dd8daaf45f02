"""Start the process worker's child without the application's main module.

``multiprocessing`` prepares every ``spawn`` and ``forkserver`` child by running the parent's main module
again in it (as ``__mp_main__``; ``multiprocessing.spawn.get_preparation_data`` names it by path or module
name). A script without an ``if __name__ == "__main__":`` guard then ran its whole top level in the child:
its chain called again, its side effects done twice, and a child that tried to start a child of its own.
The child needs nothing of the main module: it runs this package's code, and a metric passed to it may not
use the main module's classes (``_pipe.py`` refuses one that does).

:func:`main_module_hidden` leaves the main module out of the preparation data of the children the calling
thread starts meanwhile. ``multiprocessing`` offers no argument for it, so the module function is wrapped
once (the first time it is needed): the wrapper calls the original and, only in a thread inside
:func:`main_module_hidden`, drops the two keys; every other caller (the application's own children, other
threads) gets the original's answer unchanged. A forkserver that starts meanwhile does not preload the main
module either (it reads the same data); the children it forks still prepare theirs as usual.
"""

from __future__ import annotations

import contextlib
import multiprocessing.spawn
import threading
from collections.abc import Callable, Iterator
from typing import Any

__all__ = ["main_module_hidden"]

#: The preparation-data keys that make a child run the main module (by module name, by file path).
MAIN_KEYS = ("init_main_from_name", "init_main_from_path")

_hidden = threading.local()
_install_lock = threading.Lock()
_original: Callable[[str], dict[str, Any]] | None = None


def _preparation_data(name: str) -> dict[str, Any]:
    assert _original is not None  # installed before it replaces the original
    data = _original(name)
    if getattr(_hidden, "active", False):
        for key in MAIN_KEYS:
            data.pop(key, None)
    return data


def _install() -> None:
    global _original
    with _install_lock:
        if _original is None:
            _original = multiprocessing.spawn.get_preparation_data
            multiprocessing.spawn.get_preparation_data = _preparation_data


@contextlib.contextmanager
def main_module_hidden() -> Iterator[None]:
    """While inside, children this thread starts (``spawn`` or ``forkserver``) do not run the main module."""
    _install()
    _hidden.active = True
    try:
        yield
    finally:
        _hidden.active = False
