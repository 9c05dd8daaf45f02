"""An offline embedding for examples: hashed bag of words (no model, no download, deterministic)."""

from __future__ import annotations

import hashlib
import math
import re

from langchain_core.embeddings import Embeddings

__all__ = ["HashingEmbeddings"]

_WORD = re.compile(r"\w+", re.UNICODE)


class HashingEmbeddings(Embeddings):
    """Embeds text as an L2-normalised bag of lower-cased words hashed into ``dimensions`` buckets.

    Cosine similarity then approximates word overlap: good enough for an ``InMemoryVectorStore``
    to retrieve related passages offline. Not a semantic model; swap in a real one in production.
    """

    def __init__(self, dimensions: int = 512) -> None:
        if dimensions < 1:
            raise ValueError(f"dimensions must be >= 1, got {dimensions}")
        self.dimensions = dimensions

    def _embed(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode("utf-8"), digest_size=8).digest()
            vector[int.from_bytes(digest, "little") % self.dimensions] += 1.0
        norm = math.sqrt(sum(v * v for v in vector)) or 1.0
        return [v / norm for v in vector]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._embed(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._embed(text)
