"""The demo: a real LangChain RAG chain replaying the bundled RAGBench sample (also used by examples/)."""

from __future__ import annotations

from ._chain import build_rag_chain, replay_parts
from ._embeddings import HashingEmbeddings
from ._replay import RecordedRetriever, ReplayChatModel

__all__ = ["HashingEmbeddings", "RecordedRetriever", "ReplayChatModel", "build_rag_chain", "replay_parts"]
