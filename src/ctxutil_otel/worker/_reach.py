"""Whether a metric passed to ``Evaluator(metric, worker="process")`` can reach the child process: checked
at construction, so that a metric the child could never rebuild is refused with the reason rather than
failing every evaluation ``worker_crashed``."""

from __future__ import annotations

import io
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
    """Raise :class:`TypeError` when ``metric`` cannot reach the child: it cannot be pickled, or it uses
    a class or function of the ``__main__`` module, which the child never imports (``_no_main.py``: a
    script, ``python -m``, ``python -c``, a REPL or a notebook alike). A class or function of an importable
    module the child's ``sys.path`` lacks is not checkable here; the child says so when it fails to
    start."""
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
    names = ", ".join(sorted(set(finder.from_main)))
    raise TypeError(
        f"worker='process' sends the metric to its child process, but it uses {names} from __main__, "
        f"which the child does not run (it never imports your main module, so that your application's "
        f"code runs once); define it in a module the child can import, or use worker='thread'"
    )
