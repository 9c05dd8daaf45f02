"""Text helpers for the lexical judge: tokenising, a light stemmer, stopwords, sentence splitting.

Everything here is pure Python, deterministic and linear in the length of the text.

* :func:`words` lower-cases (``str.casefold``), splits on non-word characters (Unicode-aware, so
  accented Latin, Cyrillic, Arabic, Hebrew and Hangul words survive), keeps decimal numbers whole
  (``9.8``, ``1,000``), splits runs of Han / Kana characters into overlapping character bigrams
  (those scripts do not separate words with spaces) and applies :func:`stem`; :func:`content` and
  :func:`tokens` then drop stopwords.
* :func:`stem` is a suffix stripper in the spirit of the Porter "step 1" rules, not a linguistic
  stemmer: it only has to map inflected forms of one word to the same key (``released`` /
  ``release`` / ``releases`` -> ``releas``), consistently on both sides of a comparison.
"""

from __future__ import annotations

import re
from collections.abc import Hashable
from functools import lru_cache
from typing import TypeVar

__all__ = [
    "ANSWER_FILLER",
    "ANSWER_STOP_KEYS",
    "STOPWORDS",
    "STOP_KEYS",
    "content",
    "grouped",
    "has_words",
    "sentence_words",
    "sentences",
    "stem",
    "stemmed",
    "tokens",
    "words",
]

# A number (with decimal or thousands separators) or a run of letters/digits (no underscore).
_TOKEN = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+")
# Han ideographs (incl. extension A and compatibility), Hiragana and Katakana.
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")
# A word as _TOKEN finds it, or a sentence end as _SENTENCE_END splits at (. ! ? before a space, a line
# break): the words of each sentence in one pass over the text.
_TOKEN_OR_END = re.compile(r"\d+(?:[.,]\d+)*|[^\W_]+|[.!?。！？](?=\s)|\n")
_ENDS = frozenset(".!?。！？\n")
# Sentence ends: . ! ? (and their CJK forms) followed by space, or a line break.
_SENTENCE_END = re.compile(r"(?<=[.!?。！？])\s+|\n+")

STOPWORDS: frozenset[str] = frozenset(
    """
    a about above after again against all also am an and any are aren as at be because been before being
    below between both but by can cannot could couldn did didn do does doesn doing don down during each
    either etc few for from further had hadn has hasn have haven having he her here hers herself him himself
    his how however i if in into is isn it its itself just let ll me might more most must mustn my myself
    no nor not now of off on once only or other ought our ours ourselves out over own per re s same shall
    shan she should shouldn so some such t than that the their theirs them themselves then there these
    they this those through thus to too under until up upon us ve very via was wasn we were weren what
    whatever when where whether which while who whom whose why will with within without won would wouldn
    yes yet you your yours yourself yourselves one ones many much may also
    """.split()
)

# Words that frame a generated answer rather than carry its content ("Based on the given context, ...").
ANSWER_FILLER: frozenset[str] = frozenset(
    """
    based given context contexts provided provide passage passages document documents mentioned mention
    according information answer question state states stated specific specifically however therefore
    """.split()
)

_SUFFIXES = ("ational", "ization", "ations", "ation", "ments", "ment", "ness", "ings", "ing", "edly", "ed")


@lru_cache(maxsize=131072)
def stem(word: str) -> str:
    """Map an inflected (English) word form to a shared key; other scripts and numbers pass through.

    Rules, first match wins, never leaving fewer than 3 characters: ``-ies`` -> ``-y``; ``-sses`` ->
    ``-ss``; the suffixes ``-ational -ization -ations -ation -ments -ment -ness -ings -ing -edly -ed``;
    then a final ``-es`` or ``-s`` (not ``-ss``, ``-us``, ``-is``); then a final ``-e``.
    """
    if len(word) <= 3 or not word.isascii() or not word.isalpha():
        return word
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith("sses"):
        return word[:-2]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            word = word[: -len(suffix)]
            break
    else:
        if word.endswith("es") and len(word) > 4:
            word = word[:-2]
        elif word.endswith("s") and not word.endswith(("ss", "us", "is")):
            word = word[:-1]
    if word.endswith("e") and len(word) > 3:
        word = word[:-1]
    return word


def _split_cjk(token: str) -> list[str]:
    out: list[str] = []
    last = 0
    for match in _CJK.finditer(token):
        if match.start() > last:
            out.append(token[last : match.start()])
        run = match.group()
        if len(run) == 1:
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(len(run) - 1))
        last = match.end()
    if last < len(token):
        out.append(token[last:])
    return out


def words(text: str) -> list[str]:
    """Every word key of ``text`` in order, stopwords kept: case-folded, numbers whole, ASCII words
    stemmed with :func:`stem`, Han/Kana runs split into character bigrams, other scripts as they are."""
    folded = text.casefold()
    if folded.isascii():  # the common case: every token is stemmed (stem is cached per word)
        return list(map(stem, _TOKEN.findall(folded)))
    out: list[str] = []
    for raw in _TOKEN.findall(folded):
        if raw.isascii():
            out.append(stem(raw))
        elif _CJK.search(raw):
            out.extend(_split_cjk(raw))
        else:
            out.append(raw)
    return out


def sentence_words(text: str) -> list[list[str]]:
    """:func:`words` of each of :func:`sentences` of ``text`` (sentences without words dropped); their
    concatenation is ``words(text)``. The text is scanned once."""
    return _split_at_ends(_keys_and_ends(text.casefold()))


def _keys_and_ends(folded: str) -> list[str]:
    """The word keys of ``folded`` text, with its sentence-end marks kept in place."""
    if folded.isascii():
        return list(map(stem, _TOKEN_OR_END.findall(folded)))
    keys: list[str] = []
    for raw in _TOKEN_OR_END.findall(folded):  # as words() does it, token by token (ends pass unchanged)
        if raw.isascii():
            keys.append(stem(raw))
        elif _CJK.search(raw):
            keys.extend(_split_cjk(raw))
        else:
            keys.append(raw)
    return keys


def _split_at_ends(keys: list[str]) -> list[list[str]]:
    """``keys`` cut at its sentence-end marks (dropped), empty sentences left out."""
    ends: list[int] = []
    for mark in _ENDS:  # list.index scans in C: one Python step per sentence, not per word
        at = keys.index(mark) if mark in keys else -1
        while at >= 0:
            ends.append(at)
            try:
                at = keys.index(mark, at + 1)
            except ValueError:
                at = -1
    ends.sort()
    if not ends:
        return [keys] if keys else []
    out = []
    start = 0
    for end in ends:
        if end > start:
            out.append(keys[start:end])
        start = end + 1
    if start < len(keys):
        out.append(keys[start:])
    return out


def has_words(text: str) -> bool:
    """Whether :func:`words` finds any word key in ``text`` (False for empty, whitespace-only or
    punctuation-only text), without building the list."""
    return _TOKEN.search(text) is not None


def stemmed(vocabulary: frozenset[str]) -> frozenset[str]:
    """``vocabulary`` plus the stemmed form of each word, to filter the output of :func:`words`."""
    return vocabulary | frozenset(stem(w) for w in vocabulary)


STOP_KEYS: frozenset[str] = stemmed(STOPWORDS)
"""Stopwords as :func:`words` emits them."""

ANSWER_STOP_KEYS: frozenset[str] = stemmed(STOPWORDS | ANSWER_FILLER)
"""Stopwords and answer filler (``ANSWER_FILLER``) as :func:`words` emits them: what an answer
sentence's content words leave out."""

_A = TypeVar("_A", bound=Hashable)
_B = TypeVar("_B", bound=Hashable)


def grouped(parts: list[tuple[set[_A], set[_B]]], limit: int) -> list[tuple[set[_A], set[_B]]]:
    """Merge consecutive answer-sentence parts (pairs of sets) into at most ``limit`` parts, unions of
    ``ceil(len(parts) / limit)`` neighbours each (bounds the work on long answers); ``parts`` itself when
    it is short enough."""
    if len(parts) <= limit:
        return parts
    size = -(-len(parts) // limit)  # ceiling division
    merged: list[tuple[set[_A], set[_B]]] = []
    for start in range(0, len(parts), size):
        group = parts[start : start + size]
        merged.append((set().union(*(g[0] for g in group)), set().union(*(g[1] for g in group))))
    return merged


def content(keys: list[str], drop: frozenset[str] = STOP_KEYS) -> set[str]:
    """The distinct content keys among ``keys`` (output of :func:`words`): not in ``drop``, and not a
    single non-digit character (initials, list markers)."""
    return {k for k in keys if k not in drop and (len(k) > 1 or k.isdigit())}


def tokens(text: str, *, drop: frozenset[str] = STOP_KEYS) -> list[str]:
    """Content-word keys of ``text`` in order (:func:`words` without ``drop`` and single letters)."""
    return [k for k in words(text) if k not in drop and (len(k) > 1 or k.isdigit())]


def sentences(text: str) -> list[str]:
    """Split ``text`` into sentences at ``. ! ?`` followed by whitespace and at line breaks.

    Deliberately simple (abbreviations such as "e.g. x" split too); empty pieces are dropped.
    """
    return [piece for piece in _SENTENCE_END.split(text) if piece.strip()]
