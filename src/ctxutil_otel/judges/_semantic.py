"""SemanticJudge: relevance from the query alone, with word embeddings beside the lexical features.

How it decides (model trained by ``benchmarks/train_semantic.py``; figures in ``docs/judges.md``):

1. **Features** (:mod:`ctxutil_otel.judges._semantic_features`): per chunk a relevance row that never
   reads the answer (query-side lexical features, and the cosines of the query with the chunk and its
   best sentences, ranked within the interaction) and a utilization row (every lexical feature and the
   answer's cosines with the chunk and its sentences). Vectors are WordLlama static embeddings
   (:mod:`ctxutil_otel.judges._semantic_embed`): no neural network runs.
2. **Relevant** when P(relevant) >= the model's threshold; when no chunk reaches it, the most likely chunk
   is relevant if it reaches the fallback (else nothing relevant was retrieved: not applicable). The
   answer cannot make a chunk relevant or irrelevant.
3. **Non-answers** (:func:`~ctxutil_otel.judges._non_answer.non_answer`: no words, the query restated, a
   refusal) use no chunk: relevant chunks are relevant, not used, and the score is 0.0.
4. **Utilized**: the expected number of used relevant chunks (the sum of their P(utilized | relevant)),
   rounded, marks that many of the most likely used relevant chunks
   (:func:`~ctxutil_otel.judges._learned_decision.decide`, as for the learned judge).

Deterministic, no network; needs numpy, tokenizers, safetensors and wordllama's table (the ``semantic``
extra), loaded once per process.
"""

from __future__ import annotations

from collections.abc import Sequence

from ._base import ChunkVerdict, JudgeResult
from ._learned import judge_capped
from ._learned_decision import decide, decide_relevant, utilized_why
from ._learned_features import ChunkEvidence
from ._non_answer import non_answer
from ._semantic_embed import StaticEmbedder
from ._semantic_features import SemanticRows, semantic_features
from ._semantic_model import SemanticModel, shipped_semantic_model

__all__ = ["SemanticJudge"]


class SemanticJudge:
    """Offline judge with a semantic signal: relevance from the query alone (module docstring).

    ``name`` is ``"semantic"``; ``model`` the shipped model's id (``model_id`` of its provenance, e.g.
    ``"ctxutil-semantic-gbdt-seed20261205-1a2b3c4d"``), reported as ``ctxutil.judge.model``.

    Args:
        semantic_model: A loaded :class:`~ctxutil_otel.judges._semantic_model.SemanticModel`; ``None``
            (default) loads the shipped one.
        max_text_chars: Only this many characters of the query, the answer and each chunk are read.

    Raises:
        ValueError: for ``max_text_chars < 1``; ``ModelFileError`` (a ValueError) for a broken model.
        SemanticExtraMissingError: (an ImportError) when the ``semantic`` extra is not installed:
            ``pip install 'ctxutil-otel[semantic]'``.
    """

    name = "semantic"

    def __init__(self, *, semantic_model: SemanticModel | None = None, max_text_chars: int = 20_000) -> None:
        if max_text_chars < 1:
            raise ValueError(f"max_text_chars must be >= 1, got {max_text_chars!r}")
        self.embedder = StaticEmbedder.load()  # first: a missing extra is said before anything else
        self.semantic_model = semantic_model if semantic_model is not None else shipped_semantic_model()
        self.max_text_chars = max_text_chars

    def __reduce__(self) -> tuple[object, ...]:
        # The embedder is loaded again in a process worker's child (a module-level table, ~0.2 s).
        return (_rebuilt, (self.semantic_model, self.max_text_chars))

    @property
    def model(self) -> str | None:
        """The model id from the model file's provenance (reported as ``ctxutil.judge.model``)."""
        value = self.semantic_model.provenance.get("model_id")
        return str(value) if value is not None else None

    def __repr__(self) -> str:
        return f"SemanticJudge(model={self.model!r}, max_text_chars={self.max_text_chars})"

    async def judge(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> JudgeResult:
        """Return one verdict per chunk (``usage`` is ``None``: no tokens are spent)."""
        return JudgeResult(verdicts=self.judge_sync(query, answer, chunks, reasons=reasons))

    def probabilities(
        self, query: str, answer: str, chunks: Sequence[str]
    ) -> tuple[list[float], list[float]]:
        """Per chunk P(relevant) (from the query and the chunks only) and P(utilized | relevant)."""
        return self._probabilities(self._rows(query, answer, chunks, False))

    def judge_sync(
        self, query: str, answer: str, chunks: Sequence[str], *, reasons: bool = True
    ) -> list[ChunkVerdict]:
        """Synchronous :meth:`judge` (CPU-only; a few ms for typical RAG text: docs/judges.md, Speed).

        Only the first ``max_text_chars`` characters of each text are read; when anything was cut, every
        reason says what.
        """
        return judge_capped(query, answer, chunks, self.max_text_chars, reasons, self._judge_keyed)

    def _rows(self, query: str, answer: str, chunks: Sequence[str], reasons: bool) -> SemanticRows:
        return semantic_features(
            query, answer, chunks, self.semantic_model.weights, self.embedder, reasons=reasons
        )

    def _probabilities(self, rows: SemanticRows) -> tuple[list[float], list[float]]:
        m = self.semantic_model
        return [m.relevance(x) for x in rows.relevance], [m.utilization(x) for x in rows.utilization]

    def _judge_keyed(
        self, query: str, answer: str, chunks: Sequence[str], reasons: bool
    ) -> list[ChunkVerdict]:
        m = self.semantic_model
        rows = self._rows(query, answer, chunks, reasons)
        p_rel, p_use = self._probabilities(rows)
        nothing = non_answer(query, answer)
        if nothing:
            relevant = decide_relevant(
                p_rel, m.decision.relevance_threshold, m.decision.fallback_threshold, chunks
            )
            utilized, expected = [False] * len(chunks), 0.0
        else:
            relevant, utilized, expected = decide(m.decision, p_rel, p_use, chunks)
        n_rel = sum(relevant)
        return [
            ChunkVerdict(
                index=i,
                is_relevant=relevant[i],
                is_utilized=utilized[i],
                reason=_reason(
                    rows.evidence[i],
                    rows.query_cos[i],
                    rows.answer_cos[i],
                    p_rel[i],
                    p_use[i],
                    relevant[i],
                    utilized[i],
                    nothing,
                    utilized_why(p_use[i], utilized[i], expected, n_rel, m.decision.round_offset),
                )
                if reasons
                else "",
            )
            for i in range(len(chunks))
        ]


def _rebuilt(model: SemanticModel, max_text_chars: int) -> SemanticJudge:
    return SemanticJudge(semantic_model=model, max_text_chars=max_text_chars)


def _reason(
    e: ChunkEvidence,
    q_cos: float,
    a_cos: float,
    p_rel: float,
    p_use: float,
    relevant: bool,
    utilized: bool,
    nothing: str,
    why: str,
) -> str:
    terms = f" incl. {', '.join(repr(t) for t in e.top_terms)}" if e.top_terms else ""
    evidence = (
        f"query similarity {q_cos:.2f} (best sentence), query overlap {e.query_cover:.2f}; answer similarity "
        f"{a_cos:.2f} (best sentence pair), shares {e.shared_terms} answer term"
        f"{'s' if e.shared_terms != 1 else ''}{terms}"
    )
    if not relevant:
        return f"not relevant (P(relevant) {p_rel:.2f}, judged from the query alone): {evidence}"
    odds = f"P(relevant) {p_rel:.2f}, P(used) {p_use:.2f}"
    if nothing:
        return f"relevant, not used ({odds}; {nothing}, so it uses no chunk): {evidence}"
    if utilized:
        return f"used ({odds}{why}): {evidence}"
    return f"relevant, not used ({odds}{why}): {evidence}"
