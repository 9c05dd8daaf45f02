"""The process worker's pipe: what travels between the application process and its child, and the bounds
on it.

Messages on the one duplex :class:`multiprocessing.connection.Connection` (pickled by ``multiprocessing``),
batched both ways so that neither side wakes up once per evaluation:

* parent -> child, first: a :class:`ChildConfig` (the settings, API key included, travel here, never on a
  command line or in an environment); then ``("evaluate", [(seq, query, answer, chunks, item_id), ...])``
  (:data:`Request`; the evaluations the parent started together) or ``("stop",)``;
* child -> parent: ``("hello", MetricInfo)`` once the metric is built (or ``("failed", reason)`` when
  its configuration cannot be unpickled or its judge built, then it exits 1), then
  ``("results", [(seq, JSON, duration_s), ...])`` (:data:`Answer`, :func:`encode_result`; the seconds each
  evaluation took there).

What may go down, checked in the parent: a metric passed to the ``Evaluator`` must reach the child
(:func:`check_reaches_child`, at construction, so that a metric the child could never rebuild is refused
with the reason rather than failing every evaluation ``worker_crashed``); each text of an interaction (the
query, the answer, each chunk) is cut to :data:`MAX_SENT_TEXT_CHARS` characters before it is pickled
(:func:`cap_texts`), and the cut is stated in the reasons of the result that comes back (:func:`note_cut`).
Pickling holds the GIL for the whole copy (one 64 MB chunk: 98 ms, against 0.01 ms once cut, on the
reference machine), and the pipe and the child hold the copy again. No judge of this package reads that
much of one text: the lexical and learned judges read the first 20,000 characters (``max_text_chars``),
the OpenAI judge at most what fits its ``max_context_tokens`` budget (16,000 tokens by default, about
64,000 characters), so the cut changes no verdict of theirs at their defaults.
"""

from __future__ import annotations

import io
import json
import pickle
import types
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from .._settings import Settings
from ..metric._contextual_utilization import ContextualUtilization
from ..metric._results import MetricEvaluationResult

__all__ = [
    "MAX_SENT_TEXT_CHARS",
    "Answer",
    "ChildConfig",
    "Request",
    "cap_texts",
    "check_reaches_child",
    "decode_result",
    "encode_result",
    "note_cut",
]

#: One evaluation as sent: ``(seq, query, answer, chunk texts, item id)``.
Request = tuple[int, str, str, list[str], str | None]
#: One result as sent back.
Answer = tuple[int, str, float]  # (seq, the result's JSON, seconds the evaluation took in the child)


@dataclass(frozen=True, slots=True)
class ChildConfig:
    """What the child needs: the settings (for the judge), a metric passed to the ``Evaluator`` (pickled)
    or ``None`` to build it from the settings, the per-evaluation timeout and the in-flight bound."""

    settings: Settings
    metric: ContextualUtilization | None
    timeout_s: float
    max_in_flight: int


def encode_result(result: MetricEvaluationResult) -> str:
    """A result as JSON without the chunk texts of its breakdown (the parent has them: it sent them).
    JSON, not a pickled model: the parent's validation from JSON costs about half of unpickling the
    models, and the parent's CPU is what the process worker exists to save."""
    data = result.model_dump(mode="json")
    for entry in (data.get("signals") or {}).get("chunk_breakdown") or ():
        entry["chunk_text"] = ""
    return json.dumps(data)


def decode_result(raw: str, chunks: Sequence[str]) -> MetricEvaluationResult:
    """:func:`encode_result` undone in the parent, ``chunks`` being the texts it sent.

    Raises:
        pydantic.ValidationError: ``raw`` is not a result.
    """
    try:
        result = MetricEvaluationResult.model_validate_json(raw)
    except ValidationError:
        # pydantic's JSON parser refuses a lone surrogate (``"\\ud800"``, from a judge's reason quoting
        # the query), which Python strings (and the thread worker) carry: the standard library's parser
        # takes it, lossless, at the cost of building the dict first.
        result = MetricEvaluationResult.model_validate(json.loads(raw))
    for entry in result.signals.chunk_breakdown:
        if not entry.chunk_text and 0 <= entry.index < len(chunks):
            entry.chunk_text = chunks[entry.index]
    return result


# --- what may go down the pipe ---------------------------------------------------------------

MAX_SENT_TEXT_CHARS = 100_000
"""Characters of one text (query, answer, chunk) the process worker sends its child, and the thread worker
judges (``_evaluate.py``); the rest is cut."""


def cap_texts(
    query: str, answer: str, chunks: Sequence[str], limit: int = MAX_SENT_TEXT_CHARS
) -> tuple[tuple[str, str, list[str]], list[str]]:
    """``((query, answer, chunks), cut)``: each text cut to ``limit`` characters, and the names of those
    cut (``query``, ``answer``, ``chunk 3``) in that order; texts within the limit are not copied."""
    cut: list[str] = []
    if len(query) > limit:
        query, cut = query[:limit], [*cut, "query"]
    if len(answer) > limit:
        answer, cut = answer[:limit], [*cut, "answer"]
    texts = list(chunks)
    for i, text in enumerate(texts):
        if len(text) > limit:
            texts[i] = text[:limit]
            cut.append(f"chunk {i}")
    return (query, answer, texts), cut


def note_cut(result: MetricEvaluationResult, cut: Sequence[str], limit: int = MAX_SENT_TEXT_CHARS) -> None:
    """Append to every chunk reason of ``result`` (``verdicts`` and ``chunk_breakdown``) which texts the
    judge saw only the first ``limit`` characters of; nothing when ``cut`` is empty."""
    if not cut:
        return
    note = f"[the judge was sent only the first {limit} characters of the {', '.join(cut)}]"
    signals = result.signals
    for verdict in signals.verdicts:
        verdict.reason = f"{verdict.reason} {note}" if verdict.reason else note
    for entry in signals.chunk_breakdown:
        entry.reason = f"{entry.reason} {note}" if entry.reason else note


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
