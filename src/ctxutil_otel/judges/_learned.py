"""LearnedJudge: an offline judge, gradient-boosted trees over cheap lexical features (the default when the
``semantic`` extra is not installed; :mod:`ctxutil_otel.judges._semantic` otherwise).

How it decides (model trained by ``benchmarks/train_learned.py`` on ``ragbench_train.jsonl``; figures
and provenance in ``docs/judges.md``):

1. **Features.** Every chunk gets the features of :mod:`ctxutil_otel.judges._learned_features`:
   query and answer overlap (rare words weigh more), per-answer-sentence support, shared n-grams and
   numbers, lengths, and each key value's rank and gap to the best chunk of the interaction.
2. **Chunk probabilities.** One tree ensemble gives P(relevant), another P(utilized | relevant). The
   second was trained with swapped-answer copies of the training rows labelled "not utilized", so an
   answer that does not come from the context is not credited to it, and with truncated-answer copies
   (a chunk only the cut sentences drew on stays used); the first learned from the truncated and
   swapped-answer copies too (their relevance labels are the row's), so a chunk relevant to the query
   tends to stay relevant when the answer stops drawing on it.
3. **Relevant** when P(relevant) >= the model's ``relevance_threshold``; when no chunk reaches it, the
   most likely chunk is relevant if its P(relevant) >= ``fallback_threshold`` (else the interaction
   is not applicable: nothing relevant was retrieved).
4. **Utilized.** The expected number of used chunks among the relevant ones is the sum of their
   P(utilized | relevant); rounded to the nearest whole count (``round_offset``), that many of the
   relevant chunks most likely used are marked utilized
   (:func:`~ctxutil_otel.judges._learned_decision.decide`). Every chunk counts through its own
   probabilities only: chunks that are not relevant add nothing to the count (they can still shift the
   others' features, which are read across the interaction). Model formats 1-3 had a third, row-level
   model predict the score from aggregates of the chunk probabilities and set the count from it; it
   learnt the training domains' typical scores, and judged a domain it had not seen worse than the
   expected count does (``docs/judges-history.md``).
5. **Nothing to draw on.** An answer with no words, or one that only repeats the query
   (:func:`draws_on_nothing`), uses no chunk, whatever the models say; its relevance verdicts are judged
   from the query alone (the features of an empty answer), with ``nothing_fallback``, so relevant context
   gives a 0.0 rather than "not applicable".

Pure Python (the trees are compiled to Python functions when the model loads), deterministic, no network,
no numpy at run time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ._base import ChunkVerdict, JudgeResult
from ._learned_decision import decide, decide_relevant, utilized_why
from ._learned_features import ChunkEvidence, chunk_features
from ._learned_model import LearnedModel, shipped_model
from ._text import has_words, words

__all__ = ["ChunkProbabilities", "LearnedJudge", "draws_on_nothing", "judge_capped"]


@dataclass(frozen=True)
class ChunkProbabilities:
    """The model's view of one interaction: per chunk P(relevant) and P(utilized | relevant), both in
    [0, 1], plus the feature rows they came from."""

    relevant: list[float]
    utilized: list[float]
    features: list[list[float]]


def draws_on_nothing(query: str, answer: str) -> str:
    """Why ``answer`` can have used no chunk, whatever the models say, or ``""`` when it may have.

    Two cases: the answer has no word (empty, whitespace, punctuation), or it repeats the query: the
    same words (:func:`~ctxutil_otel.judges._text.words` keys, stopwords included) in the same order,
    case and punctuation aside ("What is X?" answered "what is X"). Only a verbatim repeat: the same
    words in another order can answer the query ("Is the Eiffel Tower in Paris?" answered "The Eiffel
    Tower is in Paris."), and so can some of them ("Yes, FX is affiliated with Fox.", or a pick between
    the options the query names): RAGBench's annotators count the chunk such answers came from as used
    (9 training rows made only of their query's words, mean labelled score 0.78); those are left to the
    models.
    """
    answer_words = words(answer)
    if not answer_words:
        return "the answer has no words"
    if answer_words == words(query):
        return "the answer only repeats the query"
    return ""


class LearnedJudge:
    """Offline judge: relevance and utilization from gradient-boosted trees (module docstring).

    Deterministic (same input, same verdicts), pure Python, no network. ``name`` is ``"learned"`` and
    ``model`` the shipped model's id (``model_id`` in its provenance, e.g.
    ``"ctxutil-gbdt-ragbench-seed20261201-96e81093"``: the training seed and the sha256 of the model body),
    reported as ``ctxutil.judge.model``.

    Args:
        learned_model: A :class:`~ctxutil_otel.judges._learned_model.LearnedModel` (from
            :func:`ctxutil_otel.judges.load_model`); ``None`` (default) loads the shipped model.
        max_text_chars: Only this many characters of the query, the answer and each chunk are read (bounds
            the cost of one evaluation, as for :class:`~ctxutil_otel.judges.LexicalJudge`).

    Raises:
        ValueError: for ``max_text_chars < 1``; ``ModelFileError`` (a ValueError) for a broken model.
    """

    name = "learned"

    def __init__(self, *, learned_model: LearnedModel | None = None, max_text_chars: int = 20_000) -> None:
        if max_text_chars < 1:
            raise ValueError(f"max_text_chars must be >= 1, got {max_text_chars!r}")
        self.learned_model = learned_model if learned_model is not None else shipped_model()
        self.max_text_chars = max_text_chars

    @property
    def model(self) -> str | None:
        """The model id from the model file's provenance (reported as ``ctxutil.judge.model``)."""
        value = self.learned_model.provenance.get("model_id")
        return str(value) if value is not None else None

    def __repr__(self) -> str:
        return f"LearnedJudge(model={self.model!r}, max_text_chars={self.max_text_chars})"

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        """Return one verdict per chunk (``usage`` is ``None``: no tokens are spent)."""
        return JudgeResult(verdicts=self.judge_sync(query, answer, chunks, reasons=reasons))

    def probabilities(self, query: str, answer: str, chunks: Sequence[str]) -> ChunkProbabilities:
        """Per-chunk P(relevant) and P(utilized | relevant) (no text cap applied here)."""
        rows, _ = chunk_features(query, answer, chunks, self.learned_model.weights)
        return self._probabilities(rows)

    def _probabilities(self, rows: list[list[float]]) -> ChunkProbabilities:
        m = self.learned_model
        return ChunkProbabilities([m.relevance(x) for x in rows], [m.utilization(x) for x in rows], rows)

    def judge_sync(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> list[ChunkVerdict]:
        """Synchronous :meth:`judge` (CPU-only; about 2 ms for typical RAG text on a quiet core: Speed in
        docs/judges.md).

        Only the first ``max_text_chars`` characters of the query, the answer and each chunk are read;
        when anything was cut, every reason ends with ``[read only the first N characters of the ...]``
        naming what (the query, the answer, up to three chunks by index).
        """
        return judge_capped(query, answer, chunks, self.max_text_chars, reasons, self._judge_keyed)

    def _judge_keyed(
        self, query: str, answer: str, chunks: Sequence[str], reasons: bool
    ) -> list[ChunkVerdict]:
        m = self.learned_model
        rows, evidence = chunk_features(query, answer, chunks, m.weights, evidence=True, reasons=reasons)
        drew_nothing = draws_on_nothing(query, answer)
        if drew_nothing:
            # No evidence of use, and none of relevance from the answer: relevance is judged from the query
            # alone (an empty answer's features) with the fallback chosen for that case, so an empty
            # answer over relevant context is a 0.0 (DESIGN.md), not "not applicable"; nothing is used.
            probs = self._probabilities(chunk_features(query, "", chunks, m.weights)[0])
            relevant = decide_relevant(
                probs.relevant, m.decision.relevance_threshold, m.decision.nothing_fallback, chunks
            )
            utilized, expected = [False] * len(chunks), 0.0
        else:
            probs = self._probabilities(rows)
            # Equal probabilities are broken by the chunk's text: the retrieved order changes no verdict.
            relevant, utilized, expected = decide(m.decision, probs.relevant, probs.utilized, chunks)
        n_rel = sum(relevant)
        threshold = m.decision.relevance_threshold
        fallback = not any(p >= threshold for p in probs.relevant)
        return [
            ChunkVerdict(
                index=i,
                is_relevant=relevant[i],
                is_utilized=utilized[i],
                reason=_reason(
                    evidence[i],
                    probs.relevant[i],
                    probs.utilized[i],
                    relevant[i],
                    utilized[i],
                    utilized_why(probs.utilized[i], utilized[i], expected, n_rel, m.decision.round_offset),
                    _rule(probs.relevant[i], relevant[i], threshold, fallback),
                    drew_nothing,
                )
                if reasons
                else "",
            )
            for i in range(len(chunks))
        ]


def judge_capped(
    query: str,
    answer: str,
    chunks: Sequence[str],
    cap: int,
    reasons: bool,
    judge_keyed: Callable[[str, str, Sequence[str], bool], list[ChunkVerdict]],
) -> list[ChunkVerdict]:
    """The verdicts of ``judge_keyed`` on the chunks that have words, every text cut to ``cap`` characters
    (said in every reason); a chunk without a word is "not relevant: no words". Shared by the learned
    and semantic judges."""
    if not chunks:
        return []
    cut = ""  # said in every reason: what was not read (nothing is ignored silently)
    if len(query) > cap or len(answer) > cap or any(len(c) > cap for c in chunks):
        long = [name for name, text in (("query", query), ("answer", answer)) if len(text) > cap]
        long += [f"chunk {i}" for i, c in enumerate(chunks) if len(c) > cap][:3]
        more = sum(1 for c in chunks if len(c) > cap) - 3
        cut = f" [read only the first {cap} characters of the {', '.join(long)}" + (
            f" and {more} more chunks]" if more > 0 else "]"
        )
        query, answer, chunks = query[:cap], answer[:cap], [c[:cap] for c in chunks]
    # A chunk without a single word (empty, whitespace, punctuation) is never relevant, and it is
    # left out of the features so that it cannot move the other chunks' verdicts.
    keyed = [i for i, c in enumerate(chunks) if has_words(c)]
    verdicts = [
        ChunkVerdict(
            index=i,
            is_relevant=False,
            is_utilized=False,
            reason=f"not relevant: no words{cut}" if reasons else "",
        )
        for i in range(len(chunks))
    ]
    if keyed:
        texts = chunks if len(keyed) == len(chunks) else [chunks[i] for i in keyed]
        for i, verdict in zip(keyed, judge_keyed(query, answer, texts, reasons), strict=True):
            verdicts[i] = ChunkVerdict(
                index=i,
                is_relevant=verdict.is_relevant,
                is_utilized=verdict.is_utilized,
                reason=verdict.reason + cut if reasons else "",
            )
    return verdicts


def _rule(p_rel: float, relevant: bool, threshold: float, fallback: bool) -> str:
    """Why a chunk is relevant below its threshold ("" when it is not)."""
    if relevant and p_rel < threshold and fallback:
        return f"; below the {threshold:.2f} threshold, relevant as the most likely chunk (fallback)"
    return ""


def _reason(
    e: ChunkEvidence,
    p_rel: float,
    p_use: float,
    relevant: bool,
    utilized: bool,
    why: str,
    rule: str = "",
    nothing: str = "",
) -> str:
    """``why``: the utilized rule's clause (:func:`~ctxutil_otel.judges._learned_decision.utilized_why`)."""
    terms = f" incl. {', '.join(repr(t) for t in e.top_terms)}" if e.top_terms else ""
    # Support from a sentence that only repeats the query's words says little about use.
    echo = ", none of it from answer words beyond the query's" if e.support > 0 and not e.shared_terms else ""
    evidence = (
        f"shares {e.shared_terms} answer term{'s' if e.shared_terms != 1 else ''}{terms}; answer support "
        f"{e.support:.2f} ({e.support_rel:.2f} of best{echo}); query overlap {e.query_cover:.2f}"
    )
    odds = f"P(relevant) {p_rel:.2f}, P(used) {p_use:.2f}{rule}"
    if utilized:
        return f"used ({odds}{why}): {evidence}"
    if relevant:
        if nothing:
            why = f"; {nothing}, so it draws on no chunk"
        return f"relevant, not used ({odds}{why}): {evidence}"
    return f"not relevant ({odds}): {evidence}"
