"""The non-answer rule: an answer that refuses, or only restates the query, uses no chunk.

DESIGN.md's metric asks whether the answer *used* a chunk's information; an answer that says the context
does not tell, or that gives the question back, uses none, whatever words it shares with the chunks
(issue 26, decision 2: DESIGN.md wins over RAGBench's labels, which often count refusals as used). The
semantic judge applies this rule before its utilization model, and its trainer relabels the training rows
it matches as *not utilized* (docs/judges.md, "Non-answers").

:func:`non_answer` says why an answer is a non-answer, or ``""``:

* **no words**: empty, whitespace, punctuation;
* **restates the query**: the answer has exactly the query's words, stopwords included (one-letter tokens
  such as a ``Q:`` label aside), in any order (``"Q: What is X?"``, the query twice, its words reversed).
  An answer made of the query's words drops some ("Kodiak Island" for "What is the largest island of
  the Kodiak Archipelago?", a pick between the options the query names) or adds "yes" or "no": none is a
  restatement;
* **refuses**: its first sentence is a refusal (:data:`REFUSAL`: "the context does not mention ...",
  "I am not sure about ...", "I'm sorry, ...", "no information about ...") and every other sentence is
  a refusal too or adds no content word beyond the query's. "The context does not say X. However, Y ..."
  goes on to answer, so it is left to the models.
"""

from __future__ import annotations

import re

from ._text import ANSWER_STOP_KEYS, STOP_KEYS, content, sentences, words

__all__ = ["REFUSAL", "non_answer"]

REFUSAL = re.compile(
    r"\b(?:does not|doesn't|do not|don't|did not|cannot|can't|can not|unable to|not (?:possible|able))\b"
    r"[^.]{0,80}\b(?:provide|mention|contain|include|answer|specify|say|state|determine|find|know|tell|"
    r"address|discuss|give|offer|indicate)"
    r"|\bno (?:specific |relevant |further |clear |direct )?(?:information|mention|details?|data|answer)\b"
    r"|\bnot (?:mentioned|provided|specified|stated|included|given|available|addressed|discussed)\b"
    r"|\b(?:i am|i'm|i was) (?:not sure|unsure|not certain|sorry|afraid)\b"
    r"|\bi (?:do not|don't) know\b|^\s*(?:sorry|unfortunately)\b",
    re.IGNORECASE,
)
"""A sentence that declines to answer (case-insensitive, searched anywhere in the sentence)."""


def _kept(keys: list[str]) -> set[str]:
    """The words a restatement must match: one-letter tokens (a ``Q:`` label) aside, digits kept."""
    return {k for k in keys if len(k) > 1 or k.isdigit()}


def _restates(answer_keys: list[str], query_keys: list[str]) -> bool:
    query = _kept(query_keys)
    return bool(query) and _kept(answer_keys) == query


def non_answer(query: str, answer: str) -> str:
    """Why ``answer`` uses no chunk (module docstring), or ``""`` when it may use some.

    Returns one of ``"the answer has no words"``, ``"the answer only restates the query"``,
    ``"the answer declines to answer"`` or ``""``. Linear in the length of the texts.
    """
    answer_keys = words(answer)
    if not answer_keys:
        return "the answer has no words"
    query_keys = words(query)
    if _restates(answer_keys, query_keys):
        return "the answer only restates the query"
    parts = [p for p in sentences(answer) if words(p)]
    if parts and REFUSAL.search(parts[0]):
        q_terms = content(query_keys, STOP_KEYS)
        if all(REFUSAL.search(p) or not (content(words(p), ANSWER_STOP_KEYS) - q_terms) for p in parts[1:]):
            return "the answer declines to answer"
    return ""
