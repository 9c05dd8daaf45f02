"""Training examples for ``train_learned.py``: natural rows and their swapped- and truncated-answer copies.

A model trained on natural rows alone learns "answers use their context" and barely reacts when they stop
doing so; the copies teach it what the drift checks of ``ctxutil-otel bench --perturb`` test:

* **swapped**: the answer of another row of the same subset (:func:`derangement`); every chunk is
  labelled *not utilized*, relevance unchanged (relevance does not depend on the answer).
* **truncated**: the answer cut to its first sentence, as ``--perturb truncate`` cuts it, and (``cuts``)
  to its first N sentences (rows whose answer has N sentences or fewer get no such copy). A chunk labelled
  utilized stays utilized only when a kept sentence draws on what the labels say was used from it
  (:func:`first_sentence_uses`, :func:`prefix_uses`); relevance unchanged.
* **replaced**: the row's chunks replaced by another row's (the swap partner's; any the row retrieved
  too left out): nothing retrieved is
  relevant, so every chunk is labelled *not relevant* and the interaction is not applicable. Natural data
  rarely shows a retrieval that missed entirely (P(relevant) of off-topic chunks stayed near 0.5).
* **echo**: the answer replaced by the row's own query: an answer that only repeats the question adds
  nothing from any chunk, so every chunk is labelled *not utilized*, relevance unchanged. Natural data
  never shows it, and the query's words are in every relevant chunk: without the copies such an answer
  scores as fully used. Always built (``train_learned.py`` reports their pooled utilization); the models
  learn from them only with ``--echo``.
* **appended**: K chunks of other rows (not among the row's own) appended to the row's chunks, for each
  K of :data:`OFFTOPIC_APPENDED`: the appended ones are labelled *not relevant, not utilized*, the row's
  own chunks keep their labels (a chunk's relevance and use do not depend on what else was retrieved), so
  the labelled score is unchanged: the contract that irrelevant chunks neither lower nor raise the score.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from ctxutil_otel.cli._perturb_rows import first_sentence  # the cut of --perturb truncate
from ctxutil_otel.judges._learned_features import WordWeights, chunk_features
from ctxutil_otel.judges._text import ANSWER_STOP_KEYS, STOP_KEYS, content, sentences, words
from ctxutil_otel.metric._contextual_utilization import normalise_chunk

NATURAL, SWAPPED, TRUNCATED = "natural", "swapped", "truncated"
REPLACED, APPENDED, ECHO, PREFIX = "replaced", "appended", "echo", "prefix"
WRONG_SOURCE, PARTIAL = "wrong_source", "partial"
EMPTY, EMPTY_REPLACED = "empty", "empty_replaced"
OFFTOPIC_APPENDED = (1, 3)
"""Off-topic chunks appended to each row in its ``appended`` copies (one copy per count)."""
MIN_NEW_SHARE = 0.2
"""A used chunk supports the first answer sentence when one of its used sentences holds at least this
share of the sentence's new words (not in the query), or shares a word trigram with it."""


def _trigrams(keys: list[str]) -> set[tuple[str, str, str]]:
    return set(zip(keys, keys[1:], keys[2:], strict=False))


def used_sentences(row: dict[str, Any]) -> list[list[str]]:
    """Per chunk of ``row``: the texts of its labelled-utilized sentences (``utilized_sentence_keys`` such
    as ``"0f"``: chunk 0, sentence f, texts in ``documents_sentences``); the whole chunk when the file has
    no sentence keys; nothing for a chunk not labelled utilized."""
    texts: dict[str, str] = {key: text for doc in row.get("documents_sentences", ()) for key, text in doc}
    used_keys = row.get("utilized_sentence_keys")
    out: list[list[str]] = []
    for i, label in enumerate(row["chunk_labels"]):
        if not label["utilized"]:
            out.append([])
        elif used_keys is None or not texts:
            out.append([row["retrieved_content"][i]])
        else:
            prefix = str(i)
            out.append(
                [
                    texts[k]
                    for k in used_keys
                    if k in texts and k.startswith(prefix) and k[len(prefix) :].isalpha()
                ]
            )
    return out


def first_sentence_uses(row: dict[str, Any], sentence: str) -> list[bool]:
    """Per chunk of ``row``: labelled utilized *and* the first answer ``sentence`` draws on it.

    "Draws on" means one of the chunk's labelled-utilized sentences (``utilized_sentence_keys`` such as
    ``"0f"``: chunk 0, sentence f, texts in ``documents_sentences``; the whole chunk when a file has no
    sentence keys) holds :data:`MIN_NEW_SHARE` of the sentence's new words or shares a word trigram with
    it. Conservative: a chunk loses its label only when the first sentence shows little of what was used.
    """
    keys = words(sentence)
    query_terms = content(words(row["query"]), STOP_KEYS)
    terms = content(keys, ANSWER_STOP_KEYS)
    new = (terms - query_terms) or terms
    tri = _trigrams(keys)

    def draws_on(text: str) -> bool:
        w = words(text)
        share = len(new & set(w)) / len(new) if new else 0.0
        return share >= MIN_NEW_SHARE or not tri.isdisjoint(_trigrams(w))

    return [any(draws_on(text) for text in used) for used in used_sentences(row)]


class Example:
    """One interaction as training sees it: unique chunks (as the metric de-duplicates them), their labels
    and feature rows; ``row_index`` is the natural row it comes from (copies share its fold)."""

    def __init__(
        self,
        row: dict[str, Any],
        row_index: int,
        kind: str,
        weights: WordWeights,
        answer: str | None = None,
        kept: Sequence[str] | None = None,
    ) -> None:
        first: dict[str, int] = {}
        unique: list[int] = []
        for i, text in enumerate(row["retrieved_content"]):
            key = normalise_chunk(text)
            if key not in first:
                first[key] = i
                unique.append(i)
        answer = row["actual_output"] if answer is None else answer
        if kind in (SWAPPED, ECHO, WRONG_SOURCE, EMPTY, EMPTY_REPLACED):
            used = [False] * len(row["chunk_labels"])
        elif kind == PREFIX:
            used = prefix_word_uses(row, answer)
        elif kind == PARTIAL:
            used = prefix_uses(row, kept or ())
        elif kind == TRUNCATED:
            used = (
                first_sentence_uses(row, answer) if kept is None or len(kept) == 1 else prefix_uses(row, kept)
            )
        else:
            used = [bool(lab["utilized"]) for lab in row["chunk_labels"]]
        self.row_index = row_index
        self.kind = kind
        self.appended = 0  # off-topic chunks appended (``appended`` copies)
        self.subset: str = row["subset"]
        self.relevant = [bool(row["chunk_labels"][i]["relevant"]) for i in unique]
        self.utilized = [used[i] for i in unique]
        self.features, _ = chunk_features(
            row["query"], answer, [row["retrieved_content"][i] for i in unique], weights
        )
        n_rel = sum(self.relevant)
        self.score: float | None = (
            sum(r and u for r, u in zip(self.relevant, self.utilized, strict=True)) / n_rel if n_rel else None
        )


def derangement(rows: Sequence[dict[str, Any]], rng: random.Random) -> list[int]:
    """For each row, another row of the same subset whose answer differs."""
    by_subset: dict[str, list[int]] = {}
    for i, r in enumerate(rows):
        by_subset.setdefault(r["subset"], []).append(i)
    partner = [0] * len(rows)
    for members in by_subset.values():
        for i in members:
            while True:
                j = rng.choice(members)
                if (j != i and rows[j]["actual_output"] != rows[i]["actual_output"]) or len(members) == 1:
                    break
            partner[i] = j
    return partner


def prefix_word_uses(row: dict[str, Any], fragment: str) -> list[bool]:
    """Per chunk of ``row``: labelled utilized and the answer ``fragment`` (its first few words) holds a
    content word that is not in the query and is in one of the chunk's labelled-utilized sentences (the
    whole chunk when the file has no sentence keys). A fragment that only repeats the question's words
    draws on nothing."""
    new = content(words(fragment), ANSWER_STOP_KEYS) - content(words(row["query"]), STOP_KEYS)
    return [any(not new.isdisjoint(words(text)) for text in used) for used in used_sentences(row)]


def prefix_uses(row: dict[str, Any], kept: Sequence[str]) -> list[bool]:
    """Per chunk of ``row``: labelled utilized and one of the ``kept`` answer sentences draws on it
    (:func:`first_sentence_uses` per sentence)."""
    out = [False] * len(row["chunk_labels"])
    for sentence in kept:
        out = [a or b for a, b in zip(out, first_sentence_uses(row, sentence), strict=True)]
    return out


def with_chunks(row: dict[str, Any], chunks: Sequence[str], relevant: bool | None = None) -> dict[str, Any]:
    """``row`` with other chunks: ``relevant=False`` replaces them all (every label *not relevant*),
    ``None`` appends ``chunks`` to the row's own (labelled *not relevant, not utilized*)."""
    off = [{"relevant": False, "utilized": False} for _ in chunks]
    if relevant is None:
        return {
            **row,
            "retrieved_content": [*row["retrieved_content"], *chunks],
            "chunk_labels": [*row["chunk_labels"], *off],
        }
    return {**row, "retrieved_content": list(chunks), "chunk_labels": off}


def offtopic_chunks(rows: Sequence[dict[str, Any]], i: int, k: int, rng: random.Random) -> list[str]:
    """``k`` chunks, each from a different other row, none among row ``i``'s own chunks."""
    own = {normalise_chunk(c) for c in rows[i]["retrieved_content"]}
    out: list[str] = []
    used_rows = {i}
    for _ in range(1000):
        if len(out) == k:
            break
        j = rng.randrange(len(rows))
        if j in used_rows or not rows[j]["retrieved_content"]:
            continue
        chunk = rng.choice(rows[j]["retrieved_content"])
        if normalise_chunk(chunk) in own or not words(chunk):
            continue
        used_rows.add(j)
        own.add(normalise_chunk(chunk))
        out.append(chunk)
    return out


def examples_of(
    rows: Sequence[dict[str, Any]],
    weights: WordWeights,
    rng: random.Random,
    *,
    truncated: bool = True,
    cuts: Sequence[int] = (1,),
    offtopic: bool = True,
    echo: bool = True,
    echo_every: int = 1,
    prefix_words: int = 0,
    wrong_source: bool = True,
    partial: bool = True,
    empty: bool = True,
) -> list[Example]:
    """Natural rows first (in file order), then one swapped copy per row, then (when ``truncated``) for
    each ``c`` of ``cuts`` a copy of each row whose answer has more than ``c`` sentences, cut to its first
    ``c`` (``c = 1``: the cut of ``--perturb truncate``), then (when ``offtopic``) one replaced copy per
    row and, for each K of :data:`OFFTOPIC_APPENDED`, one appended copy per row, then (when ``echo``) one
    echo copy per ``echo_every``-th row whose query has words, then (when ``prefix_words``) one copy per
    row whose answer is longer, cut to its first ``prefix_words`` words, then (when ``wrong_source``) one
    wrong-source copy per row: a chunk of another row appended and the answer taken from it (its first two
    sentences, verbatim), that chunk labelled *not relevant* (it is off the query's topic, whatever the
    answer does with it) and the row's own chunks *not utilized* (the answer ignores them). Its draws come
    from a generator of its own (seeded from the number of rows), so the copies before are the same with
    or without it. Then (when ``partial``, no random draw) one partial copy per row whose answer draws on
    several used chunks (:func:`partial_answer`). Then (when ``empty``, no random draw) one **empty-answer
    copy** per row (the answer ``""``, the row's relevance labels, nothing used) and one per row with the
    swap partner's chunks instead (nothing relevant): measured only, they choose the fallback for answers
    that draw on nothing (``nothing_fallback``, ``_train_decision.choose_fallback``)."""
    partner = derangement(rows, rng)
    out = _examples(rows, weights, rng, partner, truncated, cuts)
    if offtopic:
        off_rng = random.Random(rng.random())  # the earlier copies stay as they were without these
        for i, r in enumerate(rows):
            own = {normalise_chunk(c) for c in r["retrieved_content"]}
            other = [c for c in rows[partner[i]]["retrieved_content"] if normalise_chunk(c) not in own]
            if other:  # a chunk the row retrieved too keeps the row's own label: left out
                out.append(Example(with_chunks(r, other, False), i, REPLACED, weights))
        for k in OFFTOPIC_APPENDED:
            for i, r in enumerate(rows):
                extra = offtopic_chunks(rows, i, k, off_rng)
                if extra:
                    out.append(Example(with_chunks(r, extra), i, APPENDED, weights))
                    out[-1].appended = len(extra)
    if echo:  # no random draw: the copies before stay as they were without these
        out += [
            Example(r, i, ECHO, weights, r["query"])
            for i, r in enumerate(rows)
            if i % echo_every == 0 and words(r["query"])
        ]
    if prefix_words:
        for i, r in enumerate(rows):
            pieces = r["actual_output"].split()
            if len(pieces) > prefix_words:
                out.append(Example(r, i, PREFIX, weights, " ".join(pieces[:prefix_words])))
    if wrong_source:
        wrong_rng = random.Random(len(rows))
        for i, r in enumerate(rows):
            extra = offtopic_chunks(rows, i, 1, wrong_rng)
            if extra:
                copied = " ".join(p.strip() for p in sentences(extra[0])[:2])
                out.append(Example(with_chunks(r, extra), i, WRONG_SOURCE, weights, copied))
    if partial:
        for i, r in enumerate(rows):
            kept = partial_answer(r)
            if kept:
                out.append(Example(r, i, PARTIAL, weights, " ".join(kept), kept=kept))
    if empty:
        out += [Example(r, i, EMPTY, weights, "") for i, r in enumerate(rows)]
        for i, r in enumerate(rows):
            own = {normalise_chunk(c) for c in r["retrieved_content"]}
            other = [c for c in rows[partner[i]]["retrieved_content"] if normalise_chunk(c) not in own]
            if other:
                out.append(Example(with_chunks(r, other, False), i, EMPTY_REPLACED, weights, ""))
    return out


def partial_answer(row: dict[str, Any]) -> list[str]:
    """The answer sentences of ``row`` that draw on its first used chunk (:func:`first_sentence_uses`),
    when they are not all of them and some other used chunk is then left undrawn on; else ``[]``. Such a
    copy keeps the row's relevance labels and its utilized labels follow the kept sentences
    (:func:`prefix_uses`): an answer drawn from one of several relevant chunks, in the row's own words."""
    parts = [p.strip() for p in sentences(row["actual_output"]) if p.strip()]
    if len(parts) < 2:
        return []
    uses = [first_sentence_uses(row, part) for part in parts]
    full = [any(u[c] for u in uses) for c in range(len(row["chunk_labels"]))]
    if sum(full) < 2:
        return []
    first = full.index(True)
    kept = [(part, u) for part, u in zip(parts, uses, strict=True) if u[first]]
    left = [any(u[c] for _, u in kept) for c in range(len(full))]
    return [part for part, _ in kept] if len(kept) < len(parts) and sum(left) < sum(full) else []


def _examples(
    rows: Sequence[dict[str, Any]],
    weights: WordWeights,
    rng: random.Random,
    partner: list[int],
    truncated: bool,
    cuts: Sequence[int],
) -> list[Example]:
    out = [Example(r, i, NATURAL, weights) for i, r in enumerate(rows)]
    out += [Example(r, i, SWAPPED, weights, rows[partner[i]]["actual_output"]) for i, r in enumerate(rows)]
    if truncated:
        for c in cuts:
            for i, r in enumerate(rows):
                parts = sentences(r["actual_output"])
                if len(parts) > c:
                    cut = (
                        first_sentence(r["actual_output"])
                        if c == 1
                        else " ".join(p.strip() for p in parts[:c])
                    )
                    out.append(Example(r, i, TRUNCATED, weights, cut, kept=[p.strip() for p in parts[:c]]))
    return out
