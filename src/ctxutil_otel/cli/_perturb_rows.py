"""The perturbed copies of rows behind ``ctxutil-otel bench --perturb KIND`` (what each kind does to a row).

Each function takes a sequence of :class:`~ctxutil_otel.DatasetItem` and returns a new list of the same
length and order (the originals are not changed), deterministic for a given ``seed``:

* ``swap``: every answer is replaced by another row's answer (a seeded derangement: no row keeps its own).
* ``truncate``: every answer is cut to its first sentence.
* ``shuffle``: the chunks of every row are put in a seeded random order.
* ``offtopic``: one chunk of another row appended to every row (:func:`add_offtopic` with ``k = 1``).
* ``echo``: every answer is replaced by a light edit of the row's own query that adds no information, one
  of :data:`ECHO_FORMS` per row, seeded: ``"Q: " + query``, the query twice, or its words in reverse order
  (``"Q: " + query`` when the reversed words are the query's, as for a one-word query).
* ``wrongsource``: the chunk ``offtopic`` appends (the same one for the same seed) is appended, and the
  answer is replaced by that chunk's first two sentences, verbatim (:func:`wrong_source`).
* ``pad``: three chunks of other rows appended to every row (:func:`add_offtopic` with ``k = 3``).
* ``refusal``: every answer is replaced by a refusal that restates the row's query, one of
  :data:`REFUSAL_FORMS` per row, seeded (:func:`refuse`).

The kinds that take from other rows (:data:`FROM_OTHER_ROWS`) raise ``ValueError`` naming
``--perturb KIND`` with fewer than 2 rows.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from .._item import DatasetItem
from ..judges._text import sentences

__all__ = [
    "ECHO_FORMS",
    "FROM_OTHER_ROWS",
    "PAD_CHUNKS",
    "PERTURBATIONS",
    "REFUSAL_FORMS",
    "WRONG_SOURCE_SENTENCES",
    "add_offtopic",
    "echo_query",
    "first_sentence",
    "perturb",
    "refuse",
    "wrong_source",
]

PERTURBATIONS = ("swap", "truncate", "shuffle", "offtopic", "echo", "wrongsource", "pad", "refusal")
FROM_OTHER_ROWS = ("swap", "offtopic", "wrongsource", "pad")
PAD_CHUNKS = 3
WRONG_SOURCE_SENTENCES = 2


def _reversed_words(query: str) -> str:
    return " ".join(reversed(query.split()))


# ``echo``'s edits of a query: each adds no word but "Q". A form that gives the query's own words in order
# (the reversed words of a one-word or palindromic query, the query twice when it has no word) is replaced
# by the first one by ``echo_query``, so no echoed answer is the query verbatim.
ECHO_FORMS: tuple[Callable[[str], str], ...] = (
    lambda query: f"Q: {query}",
    lambda query: f"{query} {query}",
    _reversed_words,
)


# ``refusal``'s answers: the forms the second review of the learned judge found passing (docs/judges.md,
# Known limits), each saying the answer is not in the context while restating the query.
REFUSAL_FORMS: tuple[str, ...] = (
    "The provided context does not say {query}",
    "I am not sure about {query}",
    "I'm sorry, the documents do not contain information about {query}",
)


def refuse(query: str, form: int) -> str:
    """``REFUSAL_FORMS[form]`` around ``query`` (its trailing ``?`` and spaces dropped, a full stop
    added): e.g. form 0 of ``"What is X?"`` is ``"The provided context does not say What is X."``.

    Raises:
        IndexError: for a ``form`` outside ``range(len(REFUSAL_FORMS))``.
    """
    return REFUSAL_FORMS[form].format(query=query.strip().rstrip("?").rstrip()) + "."


def first_sentence(answer: str) -> str:
    """The first sentence of ``answer`` (stripped), or ``answer`` itself when it has no sentence."""
    parts = sentences(answer)
    return parts[0].strip() if parts else answer


def echo_query(query: str, form: int) -> str:
    """``query`` edited by ``ECHO_FORMS[form]``: 0 ``"Q: " + query``, 1 the query twice (space between),
    2 its whitespace-separated words in reverse order; form 0 instead when the edit's words would be the
    query's in the same order (form 2 on a one-word query such as ``"tea"``), so the result's words never
    are.

    Raises:
        IndexError: for a ``form`` outside ``range(len(ECHO_FORMS))``.
    """
    edited = ECHO_FORMS[form](query)
    return ECHO_FORMS[0](query) if edited.split() == query.split() else edited


def _need_other_rows(items: Sequence[DatasetItem], kind: str) -> None:
    if len(items) < 2:
        raise ValueError(
            f"--perturb {kind} needs at least 2 rows (it takes from other rows); got {len(items)}"
        )


def add_offtopic(items: Sequence[DatasetItem], k: int, *, seed: int = 0) -> list[DatasetItem]:
    """Each item with up to ``k`` chunks of other rows appended, each from a random other row and none
    equal to a chunk it holds (fewer when the other rows have no such chunk).

    Raises:
        ValueError: with fewer than 2 items.
    """
    if len(items) < 2:
        raise ValueError("--perturb offtopic needs at least 2 rows (it takes chunks from other rows)")
    rng = random.Random(seed)
    out = []
    for i, item in enumerate(items):
        own = set(item.retrieved_content)
        extra: list[str] = []
        for _ in range(50 * k):  # bounded: rows whose chunks are all among this row's give nothing
            if len(extra) == k:
                break
            j = rng.randrange(len(items))
            chunks = items[j].retrieved_content
            chunk = rng.choice(chunks) if chunks else ""
            if j != i and chunk.strip() and chunk not in own:
                own.add(chunk)
                extra.append(chunk)
        out.append(item.model_copy(update={"retrieved_content": [*item.retrieved_content, *extra]}))
    return out


def wrong_source(items: Sequence[DatasetItem], *, seed: int = 0) -> list[DatasetItem]:
    """Each item with the chunk ``add_offtopic(items, 1, seed=seed)`` appends to it, and its answer
    replaced by that chunk's first :data:`WRONG_SOURCE_SENTENCES` sentences (stripped, joined by a space).
    A row to which no chunk could be appended (every other row's chunks are among its own) is unchanged.

    Raises:
        ValueError: with fewer than 2 items (names ``--perturb wrongsource``).
    """
    _need_other_rows(items, "wrongsource")
    out = []
    for old, new in zip(items, add_offtopic(items, 1, seed=seed), strict=True):
        extra = new.retrieved_content[len(old.retrieved_content) :]
        if not extra:
            out.append(new)
            continue
        copied = " ".join(p.strip() for p in sentences(extra[0])[:WRONG_SOURCE_SENTENCES])
        out.append(new.model_copy(update={"actual_output": copied or extra[0].strip()}))
    return out


def perturb(items: Sequence[DatasetItem], kind: str, *, seed: int = 0) -> list[DatasetItem]:
    """A perturbed copy of ``items`` (see the module docstring); the originals are not changed.

    Raises:
        ValueError: for an unknown ``kind``, or a kind of :data:`FROM_OTHER_ROWS` with fewer than 2
            items (the message names ``--perturb KIND``).
    """
    if kind not in PERTURBATIONS:
        raise ValueError(f"--perturb: unknown perturbation {kind!r} (choose from {', '.join(PERTURBATIONS)})")
    if kind in FROM_OTHER_ROWS:
        _need_other_rows(items, kind)
    rng = random.Random(seed)
    if kind == "swap":
        order = list(range(len(items)))
        rng.shuffle(order)
        partner = {order[k]: order[(k + 1) % len(order)] for k in range(len(order))}
        return [
            item.model_copy(update={"actual_output": items[partner[i]].actual_output})
            for i, item in enumerate(items)
        ]
    if kind == "truncate":
        return [
            item.model_copy(update={"actual_output": first_sentence(item.actual_output)}) for item in items
        ]
    if kind == "shuffle":
        out = []
        for item in items:
            chunks = list(item.retrieved_content)
            rng.shuffle(chunks)
            out.append(item.model_copy(update={"retrieved_content": chunks}))
        return out
    if kind == "echo":
        return [
            item.model_copy(update={"actual_output": echo_query(item.query, rng.randrange(len(ECHO_FORMS)))})
            for item in items
        ]
    if kind == "wrongsource":
        return wrong_source(items, seed=seed)
    if kind == "refusal":
        return [
            item.model_copy(update={"actual_output": refuse(item.query, rng.randrange(len(REFUSAL_FORMS)))})
            for item in items
        ]
    return add_offtopic(items, 1 if kind == "offtopic" else PAD_CHUNKS, seed=seed)
