"""The fault suite runs ``serve`` with the same real fixtures as tests/serve (its environment cleaning
included)."""

from tests.serve.conftest import _clean_env, make_served, rag_trace, sink

__all__ = ["_clean_env", "make_served", "rag_trace", "sink"]
