"""Data shipped with the package: a RAGBench sample (CC-BY-4.0, attribution in README.md beside it)."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

__all__ = ["SAMPLE_FILE", "load_sample", "sample_path"]

SAMPLE_FILE = "ragbench_sample.jsonl"


def sample_path() -> str:
    """Filesystem path of the bundled ``ragbench_sample.jsonl`` (250 rows)."""
    return str(resources.files(__name__).joinpath(SAMPLE_FILE))


def load_sample(limit: int | None = None) -> list[dict[str, Any]]:
    """Return the bundled RAGBench rows as dicts (fields in README.md), at most ``limit`` of them."""
    rows: list[dict[str, Any]] = []
    with resources.files(__name__).joinpath(SAMPLE_FILE).open(encoding="utf-8") as handle:
        for line in handle:
            if limit is not None and len(rows) >= limit:
                break
            if line.strip():
                rows.append(json.loads(line))
    return rows
