"""The size bound on what the process worker copies to its child: each text of an interaction (the query,
the answer, each chunk) is cut to :data:`MAX_SENT_TEXT_CHARS` characters before it is pickled, and the cut
is stated in the reasons of the result that comes back.

Pickling holds the GIL for the whole copy (one 64 MB chunk: 98 ms, against 0.01 ms once cut, on the
reference machine), and the pipe and the child hold the copy again. No judge of this package reads that
much of one text: the lexical and learned judges read the first 20,000 characters (``max_text_chars``),
the OpenAI judge at most what fits its ``max_context_tokens`` budget (16,000 tokens by default, about
64,000 characters), so the cut changes no verdict of theirs at their defaults.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..metric._results import MetricEvaluationResult

__all__ = ["MAX_SENT_TEXT_CHARS", "cap_texts", "note_cut"]

MAX_SENT_TEXT_CHARS = 100_000
"""Characters of one text (query, answer, chunk) the process worker sends its child; the rest is cut."""


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
