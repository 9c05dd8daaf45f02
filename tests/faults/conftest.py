"""The fault suite runs ``serve`` with the same real fixtures as tests/serve (the environment is cleaned for
every test by tests/conftest.py)."""

from tests.serve.conftest import make_served, rag_trace, sink

__all__ = ["make_served", "rag_trace", "sink"]
