"""SemanticJudge features: the chunk-to-chunk cosines are linear in the chunk count, in memory and in time,
and give the values of the chunk-by-chunk matrix they replace."""

from __future__ import annotations

import tracemalloc

import numpy as np
import numpy.typing as npt
import pytest

from ctxutil_otel.judges import _semantic_features as features
from ctxutil_otel.judges._semantic_embed import StaticEmbedder
from ctxutil_otel.judges._semantic_features import _chunk_to_chunk, semantic_features
from ctxutil_otel.judges._semantic_model import shipped_semantic_model

QUERY = "What is the boiling point of water?"
ANSWER = "Water boils at 100 degrees Celsius at sea level."


def _matrix_reference(
    c: npt.NDArray[np.float32], q_chunk: list[float], chunks: list[str]
) -> tuple[list[float], list[float]]:
    """The values from the whole chunk-by-chunk matrix, in float64 (quadratic: the reference)."""
    n = len(chunks)
    cc = c.astype(np.float64) @ c.astype(np.float64).T
    top, second = sorted(range(n), key=lambda i: (-q_chunk[i], chunks[i]))[:2]
    c_top = [float(cc[i, top if i != top else second]) for i in range(n)]
    return c_top, [float((cc[i].sum() - cc[i, i]) / (n - 1)) for i in range(n)]


def test_chunk_to_chunk_above_the_matrix_size_equals_the_matrix_within_float32_rounding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(features, "_BLOCK", 300)  # sums over several blocks of rows
    n = 1_000  # above the size the matrix is kept for (256)
    rng = np.random.default_rng(7)
    c = rng.standard_normal((n, 256)).astype(np.float32)
    c /= np.linalg.norm(c, axis=1, keepdims=True)
    c[5] = c[9]  # equal cosines with the query: the tie goes to the smaller text
    chunks = [f"chunk {i}" for i in range(n)]
    q_chunk = [float(x) for x in c @ c[9]]
    got_top, got_mean = _chunk_to_chunk(c, q_chunk, chunks)
    want_top, want_mean = _matrix_reference(c, q_chunk, chunks)
    assert np.allclose(got_top, want_top, rtol=0, atol=1e-6)
    assert np.allclose(got_mean, want_mean, rtol=0, atol=1e-6)


def _feature_peak(n: int) -> int:
    # The features, not the whole judge: tracemalloc slows each call of the model's compiled trees ~25x.
    model, embedder = shipped_semantic_model(), StaticEmbedder.load()
    chunks = [f"chunk {i} about water and other things" for i in range(n)]
    tracemalloc.start()
    try:
        semantic_features(QUERY, ANSWER, chunks, model.weights, embedder)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_feature_memory_grows_linearly_with_the_chunk_count() -> None:
    # The chunk-by-chunk matrix took 4,000² float32 = 64 MB here (peak ratio about 9 to 1,000 chunks);
    # linear features take about 4x the memory for 4x the chunks.
    small, large = _feature_peak(1_000), _feature_peak(4_000)
    assert large / small < 5.5, (small, large)
