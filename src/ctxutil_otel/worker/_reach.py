"""Whether a metric passed to ``Evaluator(metric, worker="process")`` can reach the child process: checked
at construction, so that a metric the child could never rebuild is refused with the reason rather than
failing every evaluation ``worker_crashed``."""

from __future__ import annotations

import io
import multiprocessing.spawn
import os
import pickle
import types
from typing import Any

__all__ = ["check_reaches_child"]


class _MainFinder(pickle.Pickler):
    """Pickles as ``multiprocessing`` would, noting the classes and functions taken from ``__main__``."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO())
        self.from_main: list[str] = []

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, type | types.FunctionType) and getattr(obj, "__module__", None) == "__main__":
            self.from_main.append(obj.__qualname__)
        return NotImplemented  # pickled as usual


def check_reaches_child(metric: object) -> None:
    """Raise :class:`TypeError` when ``metric`` cannot reach a spawned child: it cannot be pickled, or it
    uses a class or function of a ``__main__`` module the child does not import (``python -c``, a REPL,
    standard input: no file to import again). A ``__main__`` the child does import (a script, ``python
    -m``) must still define them outside its ``if __name__ == "__main__":`` block; that is not checkable
    here, and the child says so when it fails to start."""
    finder = _MainFinder()
    try:
        finder.dump(metric)
    except Exception as exc:
        raise TypeError(
            f"worker='process' sends the metric to its child process, but it cannot be pickled "
            f"({type(exc).__name__}); pass a picklable metric or judge, or pass no metric and choose the "
            f"judge through the settings (judge, judge_model, ...: the child builds it), "
            f"or use worker='thread'"
        ) from None
    if not finder.from_main:
        return
    preparation = multiprocessing.spawn.get_preparation_data("ctxutil-evaluator-child")
    path = preparation.get("init_main_from_path")
    if "init_main_from_name" in preparation or (path is not None and os.path.isfile(path)):
        return  # the child imports the main module again (as __mp_main__); "<stdin>" is no file
    names = ", ".join(sorted(set(finder.from_main)))
    raise TypeError(
        f"worker='process' sends the metric to its child process, but it uses {names} from __main__, "
        f"which has no file the child can import (python -c, an interactive session, standard input); "
        f"define it in a module or a script file, or use worker='thread'"
    )
